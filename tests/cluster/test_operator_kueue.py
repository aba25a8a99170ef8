"""Trials queued by the test cluster's real Kueue (v0.17.0, plain-pod integration).

The eval names a LocalQueue (`spec.queueName`); Kueue gates each trial pod at creation and
admits it when its ClusterQueue has quota. These tests pin what docs/operator.md promises
for a queue: quota and `parallelism` together bound what runs and passhat keeps at most
max(1, running) pods waiting (never floods the queue); a pod waiting for admission is
`waiting`, not running, and its wait is no part of `timeoutSeconds`; a trial Kueue
preempts for a higher-priority workload is an infra error `preempted`, retried, never
scored. Kueue not running fails these tests (never skips them).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from passhat.trials.ledger import SlotLedger, SlotState
from tests.cluster.conftest import REAL_NODE, fresh_namespace, wait_for
from tests.cluster.kube_helpers import as_body, raw_json
from tests.cluster.kueue_helpers import (
    KUEUE_NAMESPACE_LABEL,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    gated,
    kueue_queue,
    pod_counts,
    require_kueue,
)
from tests.cluster.operator_helpers import (
    KWOK_TOLERATION,
    OperatorProcess,
    Scripter,
    condition,
    create_eval,
    eval_manifest,
    eval_pods,
    expected_ledger,
    get_eval,
    operator_in,
)

BUSYBOX = "localhost/passhat/busybox:test"


@pytest.fixture
def namespace(core_v1: client.CoreV1Api) -> Iterator[str]:
    """A fresh namespace that Kueue manages (labelled for it); `operator` serves it."""
    require_kueue()
    name = f"t-kueue-{uuid.uuid4().hex[:6]}"
    with fresh_namespace(core_v1, name, labels={KUEUE_NAMESPACE_LABEL: "true"}) as created:
        yield created


@pytest.fixture
def operator(
    cluster: Any, kubectl: Callable[..., str], namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """The conftest's operator, reporting a pod Pending unschedulable after 5 s (60 s by
    default): a pod gated by Kueue for longer must still not be reported."""
    settings = ["--set", "unschedulable_grace_s=5", "--set", "unschedulable_event_interval_s=5"]
    with operator_in(
        cluster, kubectl, namespace, tmp_path / "operator.log", extra_args=settings
    ) as process:
        yield process


def kwok_pod(name: str, *, labels: dict[str, str], duration: str) -> dict[str, Any]:
    """A pod on a kwok node that runs `duration` and succeeds."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"passhat.dev/fake-duration": duration},
        },
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"type": "kwok"},
            "tolerations": [KWOK_TOLERATION],
            "containers": [{"name": "c", "image": "localhost/passhat/fake:1"}],
        },
    }


def create_pod(core: client.CoreV1Api, namespace: str, body: dict[str, Any]) -> None:
    core.create_namespaced_pod(namespace, as_body(body, client.V1Pod))


def read_pod(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, Any]:
    pod: dict[str, Any] = raw_json(
        core.read_namespaced_pod(name, namespace, _preload_content=False)
    )
    return pod


def pod_phase(core: client.CoreV1Api, namespace: str, name: str) -> str:
    return str((read_pod(core, namespace, name).get("status") or {}).get("phase"))


def admitted_and_running(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    pod = read_pod(core, namespace, name)
    return not gated(pod) and (pod.get("status") or {}).get("phase") == "Running"


def eval_where(
    api: client.ApiClient, namespace: str, name: str, pred: Callable[[dict[str, Any]], bool]
) -> dict[str, Any] | None:
    """The eval when `pred` holds for it, else None (for wait_for)."""
    body = get_eval(api, namespace, name)
    return body if body is not None and pred(body) else None


def progress(body: dict[str, Any] | None) -> dict[str, Any]:
    return dict(((body or {}).get("status") or {}).get("progress") or {})


def script(task: int, trial: int, attempt: int) -> int:
    """Task 0 passes, task 1 fails its trial 1, task 2 hits an infra error (exit 75) on its
    first attempt of trial 0, task 3 fails every trial."""
    if task == 3 or (task == 1 and trial == 1):
        return 1
    if (task, trial, attempt) == (2, 0, 0):
        return 75
    return 0


def test_quota_of_two_pods_bounds_an_eval_at_parallelism_8(
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    kubectl: Callable[..., str],
    namespace: str,
    operator: OperatorProcess,
) -> None:
    """4 tasks x 3 trials at parallelism 8 on a queue with quota for 2 pods: never more
    than 2 trial pods admitted at once, never more than 2 waiting in the queue (a flood
    would park 6), status counts admitted pods as running and gated ones as waiting, and
    the eval ends with exactly the script's numbers."""
    with kueue_queue(kubectl, core_v1, namespace, pods=2) as queue:
        manifest = eval_manifest("quota", tasks=4, trials=3, parallelism=8, duration="2s")
        manifest["spec"]["queueName"] = queue
        uid = create_eval(api_client, namespace, manifest)["metadata"]["uid"]
        most = {"admitted": 0, "waiting": 0, "status_running": 0, "status_waiting": 0}
        body: dict[str, Any] | None = None
        with Scripter(core_v1, namespace, script):
            deadline = time.monotonic() + 420
            while time.monotonic() < deadline:
                admitted, waiting = pod_counts(core_v1, namespace, uid)
                body = get_eval(api_client, namespace, "quota")
                seen = progress(body)
                most["admitted"] = max(most["admitted"], admitted)
                most["waiting"] = max(most["waiting"], waiting)
                most["status_running"] = max(most["status_running"], seen.get("running", 0))
                most["status_waiting"] = max(most["status_waiting"], seen.get("waiting", 0))
                if condition(body, "Complete") == "True":
                    break
                operator.assert_running()
                time.sleep(0.25)
            else:
                pytest.fail(f"the eval did not complete: {progress(body)}\n{operator.log_tail()}")
        assert most["admitted"] == 2, most
        assert most["waiting"] <= 2, f"passhat flooded the queue: {most}"
        assert most["status_running"] <= 2 and most["status_waiting"] >= 1, most
        assert body is not None
        status = body["status"]
        expected = expected_ledger(script, tasks=4, trials=3, retries=2)
        assert SlotLedger.unpack(status["ledger"]) == expected
        assert status["progress"] == {
            "done": 12,
            "running": 0,
            "waiting": 0,
            "pending": 0,
            "retries": 1,
        }
        assert sum(status["summary"]["infraErrorsByReason"].values()) == 1
        assert status["summary"]["byK"][0]["meanPassRate"] == pytest.approx((3 + 2 + 3 + 0) / 12)


def test_kueue_preemption_is_a_retried_infra_error_never_scored(
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    kubectl: Callable[..., str],
    namespace: str,
    operator: OperatorProcess,
) -> None:
    """A higher-priority workload takes the queue's one pod of quota from a running trial:
    Kueue evicts it (TerminationTarget, WorkloadEvictedDueToPreempted); passhat records an
    infra error `preempted`, retries the trial once the quota is back, and scores only the
    retry."""
    high = f"{namespace}-high"
    with kueue_queue(kubectl, core_v1, namespace, pods=1, priorities={high: 1000}) as queue:
        manifest = eval_manifest("preempt", tasks=1, trials=1, parallelism=1, duration="15s")
        manifest["spec"]["queueName"] = queue
        uid = create_eval(api_client, namespace, manifest)["metadata"]["uid"]
        with Scripter(core_v1, namespace, lambda task, trial, attempt: 0):
            first = wait_for(
                lambda: next(
                    (
                        pod["metadata"]["name"]
                        for pod in eval_pods(core_v1, namespace, uid)
                        if not gated(pod) and (pod.get("status") or {}).get("phase") == "Running"
                    ),
                    None,
                ),
                120,
                "the first attempt admitted and running",
            )
            assert first.endswith("-a0")
            labels = {QUEUE_LABEL: queue, PRIORITY_LABEL: high}
            create_pod(core_v1, namespace, kwok_pod("urgent", labels=labels, duration="5s"))
            wait_for(
                lambda: condition(get_eval(api_client, namespace, "preempt"), "Complete") == "True",
                240,
                "the eval to complete after the preemption",
            )
        assert pod_phase(core_v1, namespace, "urgent") == "Succeeded"
        status = (get_eval(api_client, namespace, "preempt") or {})["status"]
        ledger = SlotLedger.unpack(status["ledger"])
        assert (ledger.state(0, 0), ledger.attempts(0, 0)) == (SlotState.PASS, 2)
        assert status["summary"]["infraErrorsByReason"] == {"preempted": 1}
        assert status["summary"]["infraErrorRate"] == pytest.approx(0.5)
        assert status["progress"]["retries"] == 1
        by_k = status["summary"]["byK"][0]
        assert (by_k["tasksScored"], by_k["meanPassRate"]) == (1, 1.0)


def test_waiting_twice_the_timeout_for_admission_is_not_a_timeout(
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    kubectl: Callable[..., str],
    namespace: str,
    operator: OperatorProcess,
) -> None:
    """A trial (timeoutSeconds 10, on the real node) waits ~25 s behind another workload
    for the queue's one pod of quota: meanwhile the eval shows it waiting, not running
    (status and `kubectl get ceval`); admitted, it runs and passes, no timeout."""
    with kueue_queue(kubectl, core_v1, namespace, pods=1) as queue:
        blocker = kwok_pod("blocker", labels={QUEUE_LABEL: queue}, duration="25s")
        create_pod(core_v1, namespace, blocker)
        wait_for(
            lambda: admitted_and_running(core_v1, namespace, "blocker"), 60, "the blocker admitted"
        )
        manifest = {
            "apiVersion": "passhat.dev/v1alpha1",
            "kind": "ConsistencyEval",
            "metadata": {"name": "patient"},
            "spec": {
                "tasks": [{"id": "quick"}],
                "trials": 1,
                "parallelism": 1,
                "queueName": queue,
                "retry": {"infraErrors": 2, "backoffSeconds": 0},
                "trial": {
                    "timeoutSeconds": 10,
                    "template": {
                        "spec": {
                            "nodeSelector": {"type": "real"},
                            "terminationGracePeriodSeconds": 2,
                            "containers": [
                                {
                                    "name": "agent",
                                    "image": BUSYBOX,
                                    "imagePullPolicy": "Never",
                                    "command": ["sh", "-c", "sleep 3; exit 0"],
                                    "resources": {
                                        "requests": {"cpu": "10m", "memory": "16Mi"},
                                        "limits": {"memory": "48Mi"},
                                    },
                                }
                            ],
                        }
                    },
                },
            },
        }
        uid = create_eval(api_client, namespace, manifest)["metadata"]["uid"]
        waiting = wait_for(
            lambda: eval_where(
                api_client, namespace, "patient", lambda body: progress(body).get("waiting") == 1
            ),
            60,
            "the eval to show its trial waiting for admission",
        )
        assert progress(waiting)["running"] == 0 and waiting["status"]["phase"] == "Pending"
        shown = kubectl("get", "ceval", "patient", "-n", namespace)
        header, row = shown.splitlines()[:2]
        assert row.split()[header.split().index("WAITING")] == "1", shown
        assert pod_counts(core_v1, namespace, uid) == (0, 1)
        body = wait_for(
            lambda: eval_where(
                api_client, namespace, "patient", lambda body: condition(body, "Complete") == "True"
            ),
            180,
            "the eval to complete once the trial is admitted",
        )
        status = body["status"]
        assert not status["summary"].get("infraErrorsByReason")
        ledger = SlotLedger.unpack(status["ledger"])
        assert (ledger.state(0, 0), ledger.attempts(0, 0)) == (SlotState.PASS, 1)
        [pod] = eval_pods(core_v1, namespace, uid)
        assert pod["spec"]["nodeName"] == REAL_NODE
        created = _epoch(pod["metadata"]["creationTimestamp"])
        started = _epoch(pod["status"]["startTime"])
        assert started - created >= 2 * 10, "the trial did not wait 2x its timeout"
        # NB: gated 20+ s, four times the operator's unschedulable grace: waiting, not stuck
        events = core_v1.list_namespaced_event(
            namespace, field_selector=f"involvedObject.uid={uid}", _preload_content=False
        )
        reasons = [e["reason"] for e in raw_json(events)["items"]]
        assert "TrialPodUnschedulable" not in reasons, reasons


def _epoch(stamp: str) -> float:
    from passhat.trials.classify_pod import parse_timestamp

    value = parse_timestamp(stamp)
    assert value is not None, stamp
    return value
