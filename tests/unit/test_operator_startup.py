"""What the operator does as it starts: kopf's scanning, and pods stranded by a missing eval."""

from __future__ import annotations

import datetime
import itertools
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import kopf
import pytest

from passhat import metrics
from passhat.operator import handlers
from passhat.operator.config import OperatorConfig
from passhat.operator.kube import ApiError
from passhat.operator.ownership import PodSigner
from passhat.operator.pods import FINALIZER, LABEL_EVAL_UID, EvalRef


@pytest.fixture
def served() -> Iterator[Callable[[list[str]], None]]:
    """Configure the runtime for some namespaces; restore it afterwards."""
    saved = (handlers.runtime.config, handlers.runtime.kubeconfig, handlers.runtime.namespaces)

    def serve(namespaces: list[str]) -> None:
        handlers.configure(OperatorConfig(), namespaces=namespaces)

    yield serve
    handlers.runtime.config, handlers.runtime.kubeconfig, handlers.runtime.namespaces = saved


def started_settings() -> kopf.OperatorSettings:
    """kopf's settings as the operator's start-up activity leaves them."""
    settings = kopf.OperatorSettings()
    handlers._settings(
        settings=settings,
        retry=0,
        started=datetime.datetime.now(datetime.UTC),
        runtime=datetime.timedelta(0),
        logger=logging.getLogger(__name__),
        memo=kopf.Memo(),
    )
    return settings


def test_scanning_is_off_when_serving_named_namespaces(
    served: Callable[[list[str]], None],
) -> None:
    """Namespaced: no cluster-wide scan (it would get 403s for a minute); cluster-wide: on."""
    for namespaces, disabled in (([], False), (["evals"], True)):
        served(namespaces)
        settings = started_settings()
        assert settings.scanning.disabled is disabled


def held(
    name: str, eval_name: str, uid: str, finalizers: list[str], *, marked: bool = True
) -> dict[str, Any]:
    """A listed trial pod of eval `eval_name`; made by the operator when `marked`."""
    pod = {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"pod-{name}",
            "labels": {LABEL_EVAL_UID: uid},
            "finalizers": finalizers,
            "ownerReferences": [{"name": eval_name, "uid": uid, "controller": True}],
        }
    }
    return PodSigner(OperatorConfig().pod_key).sign(pod) if marked else pod


class StrandedApi:
    """Trial pods of two evals, one of which is gone, and a look-alike of the gone one's
    that the operator did not make; records releases and lookups."""

    def __init__(self) -> None:
        self.released: list[str] = []
        self.lookups: list[tuple[str, str]] = []

    def list_held_pods(self, namespace: str | None) -> list[dict[str, Any]]:
        assert namespace is None
        return [
            held("forged-a0", "gone", "u-gone", [FINALIZER], marked=False),
            held("gone-a0", "gone", "u-gone", [FINALIZER]),
            held("gone-a1", "gone", "u-gone", [FINALIZER]),
            held("gone-free", "gone", "u-gone", []),
            held("live-a0", "live", "u-live", [FINALIZER]),
            held("reused-a0", "reused", "u-old", [FINALIZER]),
        ]

    def get_eval(
        self, namespace: str, name: str, *, not_older_than: str = ""
    ) -> dict[str, Any] | None:
        self.lookups.append((namespace, name))
        uids = {"live": "u-live", "reused": "u-new"}  # NB: same name, another eval now
        return {"metadata": {"name": name, "uid": uids[name]}} if name in uids else None

    def release_pods(self, namespace: str, pods: Sequence[Mapping[str, Any]]) -> None:
        self.released += [pod["metadata"]["name"] for pod in pods]


def sweep(api: StrandedApi) -> None:
    """Run the operator's start-up sweep against `api`."""
    handlers.runtime.set_api(api)  # type: ignore[arg-type]
    try:
        handlers.release_stranded_pods()
    finally:
        handlers.runtime._api = None


def test_pods_whose_eval_is_gone_are_released_at_start(
    served: Callable[[list[str]], None],
) -> None:
    """Held pods of a deleted eval (or of an earlier eval of the same name) are released,
    with one lookup per eval; those of a live eval, those nothing holds and a look-alike
    the operator did not make (listed first) are not."""
    served([])
    api = StrandedApi()
    sweep(api)
    assert sorted(api.released) == ["gone-a0", "gone-a1", "reused-a0"]
    assert sorted(api.lookups) == [("ns", "gone"), ("ns", "live"), ("ns", "reused")]


FINISHED = {"phase": "Succeeded", "conditions": [{"type": "Complete", "status": "True"}]}
STOPPED = {"phase": "Failed", "conditions": [{"type": "ConfigError", "status": "True"}]}


@pytest.mark.parametrize(
    ("status", "runs"),
    [
        ({}, True),
        ({"phase": "Running"}, True),
        ({"phase": "Pending", "conditions": [{"type": "ConfigError", "status": "True"}]}, True),
        ({"phase": "Failed", "conditions": [{"type": "Complete", "status": "True"}]}, False),
        (FINISHED, False),
        (STOPPED, False),
    ],
)
def test_the_daemon_runs_only_while_the_eval_is_unfinished(
    status: dict[str, Any], runs: bool
) -> None:
    """kopf holds its finalizer only for a running daemon, so a finished eval has none (like
    a Job) and can be deleted without an operator; a ConfigError that a fixed ConfigMap can
    still clear (Pending) keeps it running."""
    assert handlers._unfinished(status=status) is runs


def test_kopf_holds_the_eval_finalizer_only_for_the_daemon() -> None:
    """The deletion handler is optional, the daemon is filtered by `_unfinished`: no other
    handler makes kopf put its finalizer on an eval."""
    registry = kopf.get_default_registry()
    changing = [h for h in registry._changing.get_all_handlers() if h.requires_finalizer]
    assert changing == []
    (daemon,) = registry._spawning.get_all_handlers()
    assert daemon.when is handlers._unfinished


class FinishedApi(StrandedApi):
    """Adds an existing finished eval whose last pass left one pod held (or, `deleting`, a
    finished eval being deleted)."""

    def __init__(self, *, deleting: bool = False) -> None:
        super().__init__()
        self.deleting = deleting
        self.settled: list[tuple[list[str], list[str]]] = []

    def list_held_pods(self, namespace: str | None) -> list[dict[str, Any]]:
        return [*super().list_held_pods(namespace), held("done-a0", "done", "u-done", [FINALIZER])]

    def get_eval(
        self, namespace: str, name: str, *, not_older_than: str = ""
    ) -> dict[str, Any] | None:
        if name == "done":
            self.lookups.append((namespace, name))
            meta = {"name": name, "namespace": namespace, "uid": "u-done"}
            if self.deleting:
                meta["deletionTimestamp"] = "2026-12-03T12:00:00Z"
            return {"metadata": meta, "status": FINISHED}
        return super().get_eval(namespace, name)

    def list_pods(self, namespace: str, uid: str) -> list[dict[str, Any]]:
        return [pod for pod in self.list_held_pods(None) if pod["metadata"]["name"] == "done-a0"]

    def settle(
        self,
        namespace: str,
        *,
        keep: Sequence[Mapping[str, Any]],
        release: Sequence[Mapping[str, Any]],
        create: Sequence[Mapping[str, Any]],
        before: Any = None,
    ) -> list[str]:
        assert not create
        names = [[pod["metadata"]["name"] for pod in pods] for pods in (keep, release)]
        self.settled.append((names[0], names[1]))
        return []


def test_pods_a_finished_eval_left_held_are_settled_at_start(
    served: Callable[[list[str]], None],
) -> None:
    """A finished eval has no daemon; its leftovers get one pass at start, which lets them
    go (this pod ran nothing the ledger holds, so it is released, not kept)."""
    served([])
    api = FinishedApi()
    sweep(api)
    assert sorted(api.released) == ["gone-a0", "gone-a1", "reused-a0"]
    assert api.settled == [([], ["done-a0"])]


def test_pods_of_a_finished_eval_being_deleted_are_released_at_start(
    served: Callable[[list[str]], None],
) -> None:
    """A finished eval being deleted gets no `on.delete` (no finalizer needs it) and a pass
    over it does nothing: its held pods are released like a gone eval's."""
    served([])
    api = FinishedApi(deleting=True)
    sweep(api)
    assert sorted(api.released) == ["done-a0", "gone-a0", "gone-a1", "reused-a0"]
    assert api.settled == []


def test_eval_events_set_a_finished_evals_gauges_and_drop_a_deleted_evals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a restart no daemon writes a finished eval's status, so its watch events set
    its gauges; a deleted eval (a finished one goes without `on.delete`) is forgotten."""
    seen: list[tuple[str, str, str]] = []
    monkeypatch.setattr(
        metrics,
        "observe_status",
        lambda namespace, name, status: seen.append(("observe", namespace, name)),
    )
    monkeypatch.setattr(
        metrics, "forget_eval", lambda namespace, name: seen.append(("forget", namespace, name))
    )
    ref = EvalRef("ns", "e", "u")
    for kind, status in ((None, FINISHED), ("MODIFIED", {"phase": "Running"}), ("DELETED", {})):
        handlers.eval_event(kind, ref, status)
    assert seen == [("observe", "ns", "e"), ("forget", "ns", "e")]


def test_only_finished_or_deleted_evals_events_reach_the_handler() -> None:
    """A running eval's status writes are events too; its daemon already set the gauges."""
    assert handlers._finished_or_gone(status=FINISHED, type=None)
    assert handlers._finished_or_gone(status={"phase": "Running"}, type="DELETED")
    assert not handlers._finished_or_gone(status={"phase": "Running"}, type="MODIFIED")


def test_a_pass_in_flight_brings_no_series_of_a_forgotten_eval_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kopf drops its finalizer on the final status, so the eval may be deleted (and its
    series dropped) before the pass that wrote that status reports it: it is not observed
    once the eval is forgotten."""
    seen: list[str] = []
    monkeypatch.setattr(
        metrics, "observe_status", lambda namespace, name, status: seen.append(name)
    )
    ref = EvalRef("ns", "e", "u-forget")
    handlers.runtime.wakers[ref.uid] = (None, None)  # type: ignore[assignment]
    try:
        handlers._on_status(ref, FINISHED)
        handlers.eval_event("DELETED", ref, {})
        handlers._on_status(ref, FINISHED)
    finally:
        handlers.runtime.wakers.pop(ref.uid, None)
    assert seen == ["e"]


class RightsGoneApi(StrandedApi):
    """Namespaced mode: no rights left in `team-a` (its admin deleted the operator's
    RoleBinding there); team-b holds a stranded pod of a gone eval."""

    def list_held_pods(self, namespace: str | None) -> list[dict[str, Any]]:
        if namespace == "team-a":
            raise ApiError("list", 403, 'pods is forbidden: ... in the namespace "team-a"')
        pod = held("gone-a0", "gone", "u-gone", [FINALIZER], marked=False)
        pod["metadata"]["namespace"] = "team-b"
        return [PodSigner(OperatorConfig().pod_key).sign(pod)]


def test_a_namespace_without_rights_does_not_stop_the_start(
    served: Callable[[list[str]], None], caplog: pytest.LogCaptureFixture
) -> None:
    """A 403 in one served namespace skips that namespace (a warning names it); the
    others are swept. Before, the sweep raised, kopf retried the start-up activity every
    60 s and never served any namespace: a tenant's namespace admin who deleted the
    operator's RoleBinding took the operator from everyone at its next restart."""
    served(["team-a", "team-b"])
    api = RightsGoneApi()
    with caplog.at_level(logging.WARNING, logger="passhat.operator.handlers"):
        sweep(api)
    assert api.released == ["gone-a0"]
    assert any("team-a" in record.getMessage() for record in caplog.records)


def test_kopf_never_gives_an_api_call_up(served: Callable[[list[str]], None]) -> None:
    """kopf's retry delays never run out (a watch given up stops the whole operator: a
    403 in one namespace stopped it for all): kopf's own first eight, then 30 s, afresh
    for each call."""
    served(["team-a", "team-b"])
    settings = started_settings()
    backoffs = settings.networking.error_backoffs
    assert not isinstance(backoffs, int | float)
    first = list(itertools.islice(iter(backoffs), 1000))
    assert first[:8] == [1, 1, 2, 3, 5, 8, 13, 21] and first[8:] == [30.0] * 992
    assert list(itertools.islice(iter(backoffs), 3)) == [1, 1, 2]  # NB: afresh


def _python(script: str, arg: object, env: Mapping[str, str] | None = None) -> list[str]:
    """What `script` prints, run with `arg` in a fresh interpreter (malloc settings are
    per process), split on whitespace."""
    done = subprocess.run(
        [sys.executable, "-c", script, str(arg)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, **(env or {})},
    )
    return done.stdout.split()


_ARENAS = """
import ctypes, sys, tempfile, threading
from passhat.operator.main import bound_malloc_arenas

print(bound_malloc_arenas(int(sys.argv[1])))
barrier = threading.Barrier(12)

def work() -> None:
    blocks = [bytearray(4096) for _ in range(64)]  # NB: beyond pymalloc: glibc's malloc
    barrier.wait()  # NB: all alive at once, or an ended thread's arena is reused
    del blocks

threads = [threading.Thread(target=work) for _ in range(12)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
with tempfile.NamedTemporaryFile("r") as out:
    stream = ctypes.c_void_p(libc.fopen(out.name.encode(), b"w"))
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    print(out.read().count("<heap nr="))
"""


@pytest.mark.parametrize(
    ("arenas", "env", "capped"),
    [(2, {}, True), (0, {}, False), (2, {"MALLOC_ARENA_MAX": "64"}, False)],
)
def test_the_operator_caps_glibcs_malloc_arenas(
    arenas: int, env: dict[str, str], capped: bool
) -> None:
    """`malloc_arena_max` (2): 12 threads allocating at once share 2 arenas, where
    glibc's default gives each its own; 0, or $MALLOC_ARENA_MAX set, leaves glibc alone."""
    applied, heaps = _python(_ARENAS, arenas, env)
    assert applied == str(capped)
    assert (int(heaps) <= 2) is capped, heaps


_TRIM = """
import sys, time
from passhat.operator.main import trim_malloc_every

def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20

blocks = [bytearray(8192) for _ in range(20_000)]  # NB: beyond pymalloc: glibc's heap
kept = blocks[::64]  # NB: live chunks all along the heap: nothing on its top to give back
del blocks
before = rss_mib()
print(trim_malloc_every(float(sys.argv[1])) is not None)
time.sleep(0.5)
print(before - rss_mib())
"""


@pytest.mark.parametrize(("interval_s", "trims"), [(0.05, True), (0.0, False)])
def test_the_operator_gives_free_heap_pages_back(interval_s: float, trims: bool) -> None:
    """`malloc_trim_interval_s`: the pages of ~150 MiB freed between live chunks leave the
    RSS within the interval; 0 leaves them."""
    started, freed_mib = _python(_TRIM, interval_s)
    assert started == str(trims)
    assert (float(freed_mib) > 100) is trims, freed_mib
