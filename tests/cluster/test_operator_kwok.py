"""The operator on kwok nodes: exact status, also across SIGKILLs and an API server restart.

Trial outcomes are scripted per (task, trial, attempt) by `operator_helpers.Scripter`
(see its module docstring), so the exact final ledger of every run is computed in
advance by `expected_ledger` and compared slot by slot with `status.ledger`.
"""

from __future__ import annotations

import random
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from passhat.stats import summarize_many
from passhat.trials.ledger import SlotLedger
from tests.cluster.operator_helpers import (
    OperatorProcess,
    Scripter,
    condition,
    create_eval,
    eval_manifest,
    expected_ledger,
    get_eval,
    held_pods,
    kept_attempts,
    ledger_attempts,
    progress_done,
    trial_pods,
    wait_for_condition,
)

FINALIZER = "passhat.dev/trial-accounting"
EVAL_FINALIZER = "passhat.dev/operator"  # kopf's, on a running eval


def script(task: int, trial: int, attempt: int) -> int:
    """Exit code per attempt: ~15% infra errors (75), else pass (0) / fail (1) by task."""
    draw = random.Random(f"{task}/{trial}/{attempt}").random()
    if draw < 0.15:
        return 75
    return 0 if draw < 0.15 + 0.85 * ((task % 5) + 1) / 6 else 1


def assert_exact(
    core: client.CoreV1Api,
    namespace: str,
    body: dict[str, Any],
    *,
    tasks: int,
    trials: int,
    retries: int,
    wait_for: Callable[..., Any],
) -> None:
    """status.ledger equals the script's ledger; summary and progress follow from it."""
    status = body["status"]
    expected = expected_ledger(script, tasks=tasks, trials=trials, retries=retries)
    ledger = SlotLedger.unpack(status["ledger"])
    assert ledger == expected
    task_ids = [f"task-{index:03d}" for index in range(tasks)]
    summaries = summarize_many(expected.tallies(task_ids), sorted({1, 3, trials}))
    assert [row["k"] for row in status["summary"]["byK"]] == [s.k for s in summaries]
    for row, summary in zip(status["summary"]["byK"], summaries, strict=True):
        assert row["passHatK"] == pytest.approx(summary.pass_hat_k, abs=1e-12)
        assert row["meanPassRate"] == pytest.approx(summary.mean_pass_rate, abs=1e-12)
        assert row["tasksScored"] == summary.tasks_scored
    assert status["summary"]["infraErrorRate"] == pytest.approx(summaries[0].infra_error_rate)
    assert status["progress"] == {
        "done": tasks * trials,
        "running": 0,
        "waiting": 0,
        "pending": 0,
        "retries": expected.retries,
    }
    # Finished pods are kept, like a Job's: one per recorded attempt, released, labelled.
    uid = body["metadata"]["uid"]
    wait_for(lambda: not held_pods(core, namespace, uid), 180, "every trial pod released")
    assert kept_attempts(core, namespace, uid) == ledger_attempts(expected)


def test_small_eval_completes_with_the_exact_status(
    operator: OperatorProcess,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    kubectl: Callable[..., str],
    namespace: str,
    wait_for: Callable[..., Any],
) -> None:
    """4 tasks x 3 trials with retried infra errors: status is exact, `kubectl wait` works."""
    create_eval(api_client, namespace, eval_manifest("small", tasks=4, trials=3, parallelism=4))
    with Scripter(core_v1, namespace, script):
        body = wait_for_condition(
            api_client, namespace, "small", "Complete", timeout=600, operator=operator
        )
    # NB: polled first, so a long-lived kubectl connection cannot fail on a loaded machine
    kubectl(
        "wait",
        "-n",
        namespace,
        "--for=condition=Complete",
        "--timeout=120s",
        "consistencyeval/small",
    )
    assert body["status"]["phase"] in ("Succeeded", "Failed")
    assert body["status"]["observedGeneration"] == body["metadata"]["generation"]
    assert_exact(core_v1, namespace, body, tasks=4, trials=3, retries=2, wait_for=wait_for)


@pytest.mark.timeout(1800)
def test_sigkilled_operator_loses_and_double_counts_nothing(
    operator: OperatorProcess,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    namespace: str,
    wait_for: Callable[..., Any],
) -> None:
    """25 tasks x 8 trials, the operator SIGKILLed 6 times mid-run: the exact status."""
    tasks, trials = 25, 8
    total = tasks * trials
    create_eval(
        api_client, namespace, eval_manifest("kills", tasks=tasks, trials=trials, parallelism=20)
    )
    kills = 0
    with Scripter(core_v1, namespace, script) as scripter:
        for share in (0.08, 0.2, 0.35, 0.5, 0.65, 0.8):
            target = int(total * share)
            wait_for(
                lambda target=target: (
                    progress_done(get_eval(api_client, namespace, "kills")) >= target
                    or condition(get_eval(api_client, namespace, "kills"), "Complete") == "True"
                ),
                600,
                f"{target} trial slots done",
                interval=0.2,
            )
            operator.assert_running()
            operator.kill()
            kills += 1
            time.sleep(random.Random(kills).uniform(0.0, 3.0))  # kwok keeps ending pods
            operator.start()
        body = wait_for_condition(
            api_client, namespace, "kills", "Complete", timeout=900, operator=operator
        )
    assert kills == 6
    assert scripter.reruns == []  # no attempt ran twice (a lost outcome would re-run it)
    assert_exact(core_v1, namespace, body, tasks=tasks, trials=trials, retries=2, wait_for=wait_for)
    leftovers = [
        pod["metadata"]["name"]
        for pod in trial_pods(core_v1, namespace)
        if FINALIZER in (pod["metadata"].get("finalizers") or [])
    ]
    assert leftovers == []


@pytest.mark.timeout(1800)
def test_api_server_restart_mid_run(
    operator: OperatorProcess,
    cluster: Any,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    namespace: str,
    wait_for: Callable[..., Any],
) -> None:
    """The API server goes away mid-run and comes back: the eval still completes exactly."""
    tasks, trials = 10, 5
    create_eval(
        api_client, namespace, eval_manifest("restart", tasks=tasks, trials=trials, parallelism=10)
    )
    with Scripter(core_v1, namespace, script):
        wait_for(
            lambda: progress_done(get_eval(api_client, namespace, "restart")) >= 10,
            600,
            "10 trial slots done",
        )
        subprocess.run(
            [str(cluster.root / "hack" / "cluster" / "restart-apiserver.sh")],
            env=dict(cluster.env(), DOWN_SECONDS="5"),
            check=True,
            timeout=600,
            capture_output=True,
        )
        body = wait_for_condition(
            api_client, namespace, "restart", "Complete", timeout=900, operator=operator
        )
    operator.assert_running()
    assert_exact(core_v1, namespace, body, tasks=tasks, trials=trials, retries=2, wait_for=wait_for)


def test_deleting_an_eval_removes_its_pods(
    operator: OperatorProcess,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    namespace: str,
    wait_for: Callable[..., Any],
) -> None:
    """Deleting a running eval releases its pods' finalizers; they and the eval go away."""
    create_eval(api_client, namespace, eval_manifest("gone", tasks=3, trials=4, parallelism=5))
    wait_for(lambda: len(trial_pods(core_v1, namespace)) == 5, 300, "5 running trial pods")
    client.CustomObjectsApi(api_client).delete_namespaced_custom_object(
        "passhat.dev", "v1alpha1", namespace, "consistencyevals", "gone"
    )
    wait_for(lambda: get_eval(api_client, namespace, "gone") is None, 300, "the eval to be gone")
    wait_for(lambda: not trial_pods(core_v1, namespace), 300, "its pods to be gone")
    operator.assert_running()


def test_finished_pods_are_kept_until_the_eval_is_deleted(
    operator: OperatorProcess,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    namespace: str,
    wait_for: Callable[..., Any],
) -> None:
    """Every attempt's pod (the retried infra error's too) stays, released and labelled
    recorded; deleting one by hand changes nothing; the finished eval carries no finalizer
    (like a Job), so it is deleted with no operator running, and its deletion removes the
    rest."""

    def retry_first(task: int, trial: int, attempt: int) -> int:
        return 75 if (task, trial, attempt) == (0, 0, 0) else 0

    create_eval(api_client, namespace, eval_manifest("kept", tasks=2, trials=2, parallelism=4))
    with Scripter(core_v1, namespace, retry_first):
        body = wait_for_condition(
            api_client, namespace, "kept", "Complete", timeout=600, operator=operator
        )
    expected = expected_ledger(retry_first, tasks=2, trials=2, retries=2)
    assert SlotLedger.unpack(body["status"]["ledger"]) == expected
    uid = body["metadata"]["uid"]
    wait_for(lambda: not held_pods(core_v1, namespace, uid), 180, "every trial pod released")
    attempts = kept_attempts(core_v1, namespace, uid)
    assert attempts == ledger_attempts(expected)
    assert attempts == [(0, 0, 0), (0, 0, 1), (0, 1, 0), (1, 0, 0), (1, 1, 0)]
    pods = {p["metadata"]["name"]: p for p in trial_pods(core_v1, namespace)}
    for pod in pods.values():
        (owner,) = pod["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"]) == ("ConsistencyEval", uid)
    (first,) = [n for n, p in pods.items() if p["metadata"]["labels"]["passhat.dev/attempt"] == "1"]
    core_v1.delete_namespaced_pod(first, namespace)

    def hand_deleted_gone() -> bool:
        return first not in {p["metadata"]["name"] for p in trial_pods(core_v1, namespace)}

    wait_for(hand_deleted_gone, 120, "the hand-deleted pod to go")
    time.sleep(5)  # NB: its outcome is in status; nothing recounts or re-creates it
    after = get_eval(api_client, namespace, "kept")
    assert after is not None and after["status"] == body["status"]
    assert len(trial_pods(core_v1, namespace)) == len(pods) - 1

    def finalizers() -> list[str]:
        body = get_eval(api_client, namespace, "kept")
        assert body is not None
        return list(body["metadata"].get("finalizers") or [])

    wait_for(lambda: EVAL_FINALIZER not in finalizers(), 60, "kopf's finalizer to go")
    # An eval finished under an older passhat kept the finalizer: the operator drops it.
    client.CustomObjectsApi(api_client).patch_namespaced_custom_object(
        "passhat.dev", "v1alpha1", namespace, "consistencyevals", "kept",
        {"metadata": {"finalizers": [EVAL_FINALIZER]}},
    )  # fmt: skip
    wait_for(lambda: EVAL_FINALIZER not in finalizers(), 60, "the old finalizer to go")
    operator.assert_running()
    operator.stop()
    client.CustomObjectsApi(api_client).delete_namespaced_custom_object(
        "passhat.dev", "v1alpha1", namespace, "consistencyevals", "kept"
    )
    wait_for(lambda: get_eval(api_client, namespace, "kept") is None, 60, "the eval to be gone")
    wait_for(lambda: not trial_pods(core_v1, namespace), 300, "its kept pods to be collected")
