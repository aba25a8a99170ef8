"""The watch-fed pod cache (podcache.py) and how `Kube` feeds and reads it."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from passhat.operator.config import OperatorConfig
from passhat.operator.kube import ApiError, Kube
from passhat.operator.podcache import PodCache
from passhat.operator.pods import LABEL_EVAL_UID


def pod(name: str, uid: str, *, eval_uid: str = "e1", phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": uid, "labels": {LABEL_EVAL_UID: eval_uid}},
        "status": {"phase": phase},
    }


def names(pods: list[dict[str, Any]] | None) -> list[str]:
    assert pods is not None
    return sorted(p["metadata"]["name"] for p in pods)


def test_not_synced_until_a_list_then_events_apply() -> None:
    """None (LIST from the API server) until the first LIST is in; then events move it."""
    cache = PodCache()
    cache.apply("ns", "ADDED", pod("a", "u-a"))
    assert cache.pods("ns", "e1") is None
    cache.replace("ns", [pod("a", "u-a"), pod("x", "u-x", eval_uid="e2")])
    assert names(cache.pods("ns", "e1")) == ["a"]
    assert names(cache.pods("ns", "e2")) == ["x"]
    cache.apply("ns", "ADDED", pod("b", "u-b"))
    cache.apply("ns", "MODIFIED", pod("a", "u-a", phase="Succeeded"))
    listed = cache.pods("ns", "e1") or []
    assert names(listed) == ["a", "b"]
    assert next(p for p in listed if p["metadata"]["name"] == "a")["status"]["phase"] == (
        "Succeeded"
    )
    cache.apply("ns", "DELETED", pod("b", "u-b"))
    assert names(cache.pods("ns", "e1")) == ["a"]
    cache.unsync("ns")
    assert cache.pods("ns", "e1") is None
    assert cache.pods("other", "e1") is None


def test_a_released_pod_stays_hidden_until_its_deleted_event() -> None:
    """After `forget`, an older event or a LIST from before the release does not bring the
    pod back; its DELETED event (it left the selector) ends that, and a pod of the same
    name with another uid is a new pod."""
    cache = PodCache()
    cache.replace("ns", [pod("a", "u-a"), pod("b", "u-b")])
    cache.forget("ns", "a", "u-a")
    assert names(cache.pods("ns", "e1")) == ["b"]
    cache.apply("ns", "MODIFIED", pod("a", "u-a", phase="Succeeded"))  # NB: an older event
    cache.replace("ns", [pod("a", "u-a"), pod("b", "u-b")])  # NB: a LIST from before
    assert names(cache.pods("ns", "e1")) == ["b"]
    cache.apply("ns", "DELETED", pod("a", "u-a"))
    cache.apply("ns", "ADDED", pod("a", "u-a2"))
    assert names(cache.pods("ns", "e1")) == ["a", "b"]


def test_a_list_without_a_released_pod_drops_its_mark() -> None:
    """A released pod a LIST no longer shows has left for good: nothing is remembered."""
    cache = PodCache()
    cache.replace("ns", [pod("a", "u-a")])
    cache.forget("ns", "a", "u-a")
    cache.replace("ns", [])
    assert cache._released["ns"] == set()


def test_a_deleted_event_of_an_older_pod_keeps_the_newer_one() -> None:
    """A DELETED event removes the pod of its uid, never a newer pod of that name."""
    cache = PodCache()
    cache.replace("ns", [pod("a", "u-new")])
    cache.apply("ns", "DELETED", pod("a", "u-old"))
    assert names(cache.pods("ns", "e1")) == ["a"]


def kube(**settings: Any) -> Kube:
    return Kube(client.Configuration(), OperatorConfig(**settings))


def test_kube_applies_an_event_before_it_wakes_a_pass() -> None:
    """A pass woken by an event sees that event in the cache; an ERROR event (410) ends
    the watch so that the next one lists again."""
    api = kube()
    api.pods.replace("ns", [])
    seen: list[list[str]] = []
    api._pod_event(
        "ns",
        {"type": "ADDED", "object": pod("a", "u-a")},
        lambda kind, obj: seen.append(names(api.list_pods("ns", "e1"))),
    )
    assert seen == [["a"]]
    with pytest.raises(ApiError):
        api._pod_event(
            "ns", {"type": "ERROR", "object": {"code": 410, "message": "too old"}}, print
        )
    api.close()


def test_kube_with_the_cache_off_never_reads_it() -> None:
    """`--set pod_cache=false`: events are not cached, passes LIST as before."""
    api = kube(pod_cache=False)
    api._pod_event("ns", {"type": "ADDED", "object": pod("a", "u-a")}, lambda *_: None)
    assert api.pods.pods("ns", "e1") is None
    api.close()


def test_forgetting_a_pod_leaves_a_newer_one_of_its_name() -> None:
    """`forget` goes by name and uid: a newer pod that took the name stays listed."""
    cache = PodCache()
    cache.replace("ns", [pod("a", "u-new"), pod("b", "u-b")])
    cache.forget("ns", "a", "u-old")
    cache.forget("ns", "b", "u-b")
    assert names(cache.pods("ns", "e1")) == ["a"]
