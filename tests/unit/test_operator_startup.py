"""What the operator does as it starts: kopf's scanning, and pods stranded by a missing eval."""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import kopf
import pytest

from passhat.operator import handlers
from passhat.operator.config import OperatorConfig
from passhat.operator.pods import FINALIZER, LABEL_EVAL_UID


@pytest.fixture
def served() -> Iterator[Callable[[list[str]], None]]:
    """Configure the runtime for some namespaces; restore it afterwards."""
    saved = (handlers.runtime.config, handlers.runtime.kubeconfig, handlers.runtime.namespaces)

    def serve(namespaces: list[str]) -> None:
        handlers.configure(OperatorConfig(), namespaces=namespaces)

    yield serve
    handlers.runtime.config, handlers.runtime.kubeconfig, handlers.runtime.namespaces = saved


def test_scanning_is_off_when_serving_named_namespaces(
    served: Callable[[list[str]], None],
) -> None:
    """Namespaced: no cluster-wide scan (it would get 403s for a minute); cluster-wide: on."""
    for namespaces, disabled in (([], False), (["evals"], True)):
        served(namespaces)
        settings = kopf.OperatorSettings()
        handlers._settings(
            settings=settings,
            retry=0,
            started=datetime.datetime.now(datetime.UTC),
            runtime=datetime.timedelta(0),
            logger=logging.getLogger(__name__),
            memo=kopf.Memo(),
        )
        assert settings.scanning.disabled is disabled


class StrandedApi:
    """Trial pods of two evals, one of which is gone; records releases and lookups."""

    def __init__(self) -> None:
        self.released: list[str] = []
        self.lookups: list[tuple[str, str]] = []

    def list_held_pods(self, namespace: str | None) -> list[dict[str, Any]]:
        def pod(name: str, eval_name: str, uid: str, finalizers: list[str]) -> dict[str, Any]:
            return {
                "metadata": {
                    "name": name,
                    "namespace": "ns",
                    "labels": {LABEL_EVAL_UID: uid},
                    "finalizers": finalizers,
                    "ownerReferences": [{"name": eval_name, "uid": uid, "controller": True}],
                }
            }

        assert namespace is None
        return [
            pod("gone-a0", "gone", "u-gone", [FINALIZER]),
            pod("gone-a1", "gone", "u-gone", [FINALIZER]),
            pod("gone-free", "gone", "u-gone", []),
            pod("live-a0", "live", "u-live", [FINALIZER]),
            pod("reused-a0", "reused", "u-old", [FINALIZER]),
        ]

    def get_eval(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.lookups.append((namespace, name))
        uids = {"live": "u-live", "reused": "u-new"}  # NB: same name, another eval now
        return {"metadata": {"name": name, "uid": uids[name]}} if name in uids else None

    def release_pods(self, namespace: str, pods: Sequence[Mapping[str, Any]]) -> None:
        self.released += [pod["metadata"]["name"] for pod in pods]


def test_pods_whose_eval_is_gone_are_released_at_start(
    served: Callable[[list[str]], None],
) -> None:
    """Held pods of a deleted eval (or of an earlier eval of the same name) are released,
    with one lookup per eval; those of a live eval and those nothing holds are not."""
    served([])
    api = StrandedApi()
    handlers.runtime.set_api(api)  # type: ignore[arg-type]
    try:
        handlers.release_stranded_pods()
    finally:
        handlers.runtime._api = None
    assert sorted(api.released) == ["gone-a0", "gone-a1", "reused-a0"]
    assert sorted(api.lookups) == [("ns", "gone"), ("ns", "live"), ("ns", "reused")]
