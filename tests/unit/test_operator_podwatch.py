"""The pod watcher: wakes the eval of each pod event, reopens failed streams, frees orphans."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from passhat.operator.pods import FINALIZER, LABEL_EVAL_UID, LABEL_RECORDED
from passhat.operator.podwatch import PodWatcher


def pod(uid: str, *, deleting: bool = False) -> dict[str, Any]:
    """A trial pod of eval `uid`, optionally being deleted while holding our finalizer."""
    meta: dict[str, Any] = {"name": f"p-{uid}", "labels": {LABEL_EVAL_UID: uid}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        meta["finalizers"] = [FINALIZER]
    return {"metadata": meta}


def test_events_wake_their_eval_and_streams_are_reopened() -> None:
    """Each event wakes its eval; a stream that fails is opened again; orphans are released."""
    streams: list[str] = []
    woken: list[str] = []
    orphans: list[str] = []
    done = threading.Event()

    def watch(namespace: str, on_event: Callable[[str, Mapping[str, Any]], None]) -> None:
        streams.append(namespace)
        if len(streams) == 1:
            on_event("ADDED", pod("a"))
            raise ConnectionError("API server restarting")
        if len(streams) == 2:
            on_event("MODIFIED", pod("b"))
            on_event("MODIFIED", pod("gone", deleting=True))
            on_event("MODIFIED", pod("gone-not-deleting"))
            return
        done.set()
        time.sleep(60)

    def wake(uid: str) -> bool:
        woken.append(uid)
        return uid in ("a", "b")

    watcher = PodWatcher(
        watch,
        wake=wake,
        on_orphan=lambda namespace, meta, uid: orphans.append(uid),
        retry_s=0.01,
    )
    watcher.ensure("ns")
    watcher.ensure("ns")  # NB: one thread per namespace
    assert done.wait(30)
    assert streams == ["ns", "ns", "ns"]
    assert woken == ["a", "b", "gone", "gone-not-deleting"]
    assert orphans == ["gone"]


def test_deleted_and_recorded_pods_wake_nothing() -> None:
    """DELETED events and events of pods labelled recorded carry nothing to record."""
    woken: list[str] = []
    orphans: list[str] = []
    done = threading.Event()

    def watch(namespace: str, on_event: Callable[[str, Mapping[str, Any]], None]) -> None:
        if done.is_set():
            time.sleep(60)
        recorded = pod("kept")
        recorded["metadata"]["labels"][LABEL_RECORDED] = "true"
        on_event("MODIFIED", recorded)
        on_event("DELETED", pod("left-the-selector"))
        on_event("DELETED", pod("gone", deleting=True))
        on_event("MODIFIED", pod("live"))
        done.set()

    def wake(uid: str) -> bool:
        woken.append(uid)
        return True

    watcher = PodWatcher(
        watch,
        wake=wake,
        on_orphan=lambda namespace, meta, uid: orphans.append(uid),
        retry_s=0.01,
    )
    watcher.ensure("ns")
    assert done.wait(30)
    time.sleep(0.2)
    assert woken == ["live"]
    assert orphans == []
