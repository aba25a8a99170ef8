"""Complete waits for every pod to be let go (docs/operator.md, *Phases and conditions*),
through the real `Kube` and its release pool on an in-memory API server: a keep that
keeps failing holds Complete back without waking a pass per 0.1 s; a released pod that
stays Terminating for someone else's finalizer does not hold it back. (Found in review.)
"""

from __future__ import annotations

import threading
import time
from typing import Any

from passhat.operator.config import OperatorConfig
from passhat.operator.loop import EvalLoop, PassState
from passhat.operator.pods import FINALIZER, LABEL_EVAL_UID, EvalRef
from passhat.operator.status import condition_status
from tests.unit.apiserver_fake import FakeServer, FakeServerKube
from tests.unit.test_operator_loop import spec


class RefusingPodPatches(FakeServer):
    """An admission policy (or any lasting error) refuses every pod PATCH."""

    def _pod(
        self, method: str, namespace: str, parts: list[str], query: dict[str, str], body: Any
    ) -> tuple[int, Any]:
        if method == "PATCH":
            return 403, {"message": "admission webhook denied the request"}
        return super()._pod(method, namespace, parts, query, body)


class ForeignFinalizer(FakeServer):
    """Someone else's finalizer on every pod: a deleted pod stays, Terminating."""

    def _create(self, namespace: str, body: Any) -> tuple[int, Any]:
        status, data = super()._create(namespace, body)
        pod = self.pods.get((namespace, body["metadata"]["name"]))
        if pod is not None:
            pod["metadata"].setdefault("finalizers", []).append("example.com/hold")
        return status, data


def drive(
    server: FakeServer, body: dict[str, Any], passes: int = 12
) -> tuple[list[PassState], list[str]]:
    """Create the eval's pods, end them all, then run `passes` passes 50 ms apart (the
    release pool runs in between); the pass states and the daemon wake-ups."""
    kube = FakeServerKube(server, OperatorConfig(status_interval_s=0.0, pod_cache=False))
    wakes: list[str] = []
    kube.on_released = wakes.append
    stored = server.add_eval("ns", "demo", body)
    loop = EvalLoop(kube, EvalRef("ns", "demo", stored["metadata"]["uid"]), config=kube._config)
    states: list[PassState] = []
    try:
        loop.run_pass()
        server.step(duration_s=0.0)
        for _ in range(passes):
            states.append(loop.run_pass().state)
            if states[-1] is PassState.DONE:
                break
            time.sleep(0.05)
    finally:
        kube.close()
    return states, wakes


def test_a_keep_that_keeps_failing_holds_complete_back_and_wakes_no_pass() -> None:
    server = RefusingPodPatches(latency_s=0.0)
    states, wakes = drive(server, spec(tasks=[{"id": "a"}], trials=2, ks=[1]))
    assert PassState.DONE not in states
    complete = next(c for c in server.status("ns", "demo")["conditions"] if c["type"] == "Complete")
    assert complete["status"] == "False"
    assert complete["message"] == "2/2 trial slots final; 2 pods wait to be kept or released"
    assert wakes == []  # NB: a failed keep is sent again by a later pass, not at once
    assert all(
        FINALIZER in pod["metadata"]["finalizers"] for pod in server.pods.values()
    )  # NB: held, not lost


def test_a_released_pod_left_terminating_by_another_finalizer_is_let_go() -> None:
    server = ForeignFinalizer(latency_s=0.0)
    states, _ = drive(server, spec(tasks=[{"id": "a"}], trials=2, ks=[1], podRetention="none"))
    assert states[-1] is PassState.DONE
    assert condition_status(server.status("ns", "demo"), "Complete") == "True"
    terminating = [pod["metadata"] for pod in server.pods.values()]
    assert len(terminating) == 2
    assert all(meta["deletionTimestamp"] for meta in terminating)
    assert all(meta["finalizers"] == ["example.com/hold"] for meta in terminating)


def test_a_release_in_flight_counts_for_the_eval_that_made_the_pod_not_its_label() -> None:
    """`Kube.releasing` (Complete, the release backlog) goes by the signed owner: a pod
    whose eval-uid label a user changed still counts for its eval, and for no other."""
    server = FakeServer(latency_s=0.0)
    kube = FakeServerKube(server, OperatorConfig(pod_cache=False))
    stored = server.add_eval("ns", "demo", spec(tasks=[{"id": "a"}], trials=1, ks=[1]))
    uid = stored["metadata"]["uid"]
    loop = EvalLoop(kube, EvalRef("ns", "demo", uid), config=kube._config)
    gate = threading.Event()
    try:
        loop.run_pass()
        ((_, name),) = server.pods
        pod = server.pods[("ns", name)]
        pod["metadata"]["labels"][LABEL_EVAL_UID] = "someone-else"

        def hold(_: Any) -> None:
            gate.wait(10)

        kube.settle("ns", keep=[], release=[pod], create=[], before=hold)
        assert kube.releasing("ns", uid) == 1
        assert kube.releasing("ns", "someone-else") == 0
    finally:
        gate.set()
        kube.close()
