"""An eval's inputs and its time are bounded on the real API server (#17 §2).

The tasks' ConfigMap is pinned when the eval starts: changed mid-run, the eval stops with
a ConfigError naming it, what was scored stays, and no pod ever runs the new tasks;
`passhat report` refuses to name changed tasks and reports again once the data is back.
`spec.activeDeadlineSeconds` ends an eval as a Job's: Failed, DeadlineExceeded, running
pods deleted, none created, what was scored kept. The operator is a real process; trial
pods run on kwok nodes and end when the test says.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from passhat.trials.ledger import SlotLedger, SlotState
from tests.cluster.kube_helpers import as_body, raw_json
from tests.cluster.operator_helpers import (
    RECORDED_LABEL,
    TRIAL_FINALIZER,
    OperatorProcess,
    create_eval,
    eval_manifest,
    get_eval,
    operator_in,
    passhat,
    progress_done,
    trial_pods,
    wait_for_condition,
)

TASKS = "- id: a\n- id: b\n- id: c\n- id: d\n"
CHANGED = "- id: z\n- id: b\n- id: c\n- id: d\n"


@pytest.fixture
def operator(
    cluster: Any, kubectl: Callable[..., str], namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """An operator with a 1 s resync, scoped to this test's namespace."""
    with operator_in(
        cluster,
        kubectl,
        namespace,
        tmp_path / "operator.log",
        extra_args=["--set", "resync_interval_s=1"],
    ) as process:
        yield process


def end_pod(core: client.CoreV1Api, namespace: str, suffix: str, code: int) -> str:
    """End the waiting kwok trial pod whose name ends in `suffix` with exit `code`."""
    (pod,) = [p for p in trial_pods(core, namespace) if p["metadata"]["name"].endswith(suffix)]
    name = str(pod["metadata"]["name"])
    patch = {
        "metadata": {
            "annotations": {
                "passhat.dev/fake-run-forever": "false",
                "passhat.dev/fake-exit-code": str(code),
            }
        }
    }
    core.patch_namespaced_pod(name, namespace, patch)
    return name


def events_of(core: client.CoreV1Api, namespace: str, uid: str, reason: str) -> list[Any]:
    response = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.uid={uid}", _preload_content=False
    )
    return [e for e in raw_json(response)["items"] if e["reason"] == reason]


def tasks_run(core: client.CoreV1Api, namespace: str) -> set[int]:
    return {int(p["metadata"]["labels"]["passhat.dev/task"]) for p in trial_pods(core, namespace)}


def none_held(core: client.CoreV1Api, namespace: str) -> bool:
    return not any(
        TRIAL_FINALIZER in (p["metadata"].get("finalizers") or [])
        for p in trial_pods(core, namespace)
    )


def test_config_map_changed_mid_run_is_a_config_error_keeping_what_was_scored(
    operator: OperatorProcess,
    cluster: Any,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    namespace: str,
    wait_for: Callable[..., Any],
) -> None:
    """4 tasks from ConfigMap suite, 2 at a time: status.taskSources pins its uid and
    resourceVersion; task a passes; then suite's data changes. The eval stops with
    ConfigError TasksChanged naming suite, keeps a's pass, deletes b's running pod and
    never creates one for c, d or z. `passhat report` refuses the changed ConfigMap and
    reports a's pass once the data is restored."""
    configmap = {"metadata": {"name": "suite"}, "data": {"tasks.yaml": TASKS}}
    suite = core_v1.create_namespaced_config_map(namespace, as_body(configmap, client.V1ConfigMap))
    manifest = eval_manifest("pinned", tasks=1, trials=1, parallelism=2, ks=[1])
    del manifest["spec"]["tasks"]
    manifest["spec"]["tasksFrom"] = [{"configMap": "suite"}]
    body = create_eval(api_client, namespace, manifest)
    wait_for(lambda: len(trial_pods(core_v1, namespace)) == 2, 120, "2 trial pods")
    status = (get_eval(api_client, namespace, "pinned") or {}).get("status") or {}
    (pin,) = status["taskSources"]
    meta = suite.metadata
    assert meta is not None
    assert pin["configMap"] == "suite" and pin["uid"] == meta.uid
    assert pin["resourceVersion"] == meta.resource_version
    assert len(pin["sha256"]) == 64

    kept = end_pod(core_v1, namespace, "-t0-0-a0", 0)
    wait_for(
        lambda: progress_done(get_eval(api_client, namespace, "pinned")) == 1, 120, "a recorded"
    )
    core_v1.patch_namespaced_config_map("suite", namespace, {"data": {"tasks.yaml": CHANGED}})
    stopped = wait_for_condition(
        api_client, namespace, "pinned", "ConfigError", timeout=120, operator=operator
    )
    status = stopped["status"]
    (error,) = [c for c in status["conditions"] if c["type"] == "ConfigError"]
    assert error["reason"] == "TasksChanged", error
    assert error["message"].startswith(
        'spec.tasksFrom: ConfigMap "suite" changed after the eval started'
    ), error
    assert status["phase"] == "Failed"
    assert status["progress"]["done"] == 1 and status["progress"]["running"] == 0
    ledger = SlotLedger.unpack(status["ledger"])
    assert ledger.state(0, 0) is SlotState.PASS and ledger.done == 1
    assert status["summary"]["byK"][0]["tasksScored"] == 1

    wait_for(lambda: none_held(core_v1, namespace), 120, "no pod holding our finalizer")
    wait_for(
        lambda: [p["metadata"]["name"] for p in trial_pods(core_v1, namespace)] == [kept],
        120,
        "only task a's pod left (b's deleted)",
    )
    (left,) = trial_pods(core_v1, namespace)
    assert left["metadata"]["labels"].get(RECORDED_LABEL) == "true"
    assert tasks_run(core_v1, namespace) == {0}
    assert events_of(core_v1, namespace, body["metadata"]["uid"], "ConfigError")

    refused = passhat(cluster, "report", "pinned", "-n", namespace)
    assert refused.returncode == 2, refused.stderr
    assert 'ConfigMap "suite" changed after the eval started' in refused.stderr
    assert "passhat trials pinned --out trials.jsonl" in refused.stderr
    core_v1.patch_namespaced_config_map("suite", namespace, {"data": {"tasks.yaml": TASKS}})
    report = passhat(cluster, "report", "pinned", "-n", namespace, "--format", "json")
    # NB: it reports again, and exits 2: the ConfigError stopped the eval for good (#21)
    assert report.returncode == 2, report.stderr
    (row,) = json.loads(report.stdout)
    assert (row["k"], row["tasks_scored"], row["mean_pass_rate"]) == (1, 1, 1.0)
    operator.assert_running()


def test_deadline_ends_the_eval_keeping_what_was_scored(
    operator: OperatorProcess,
    cluster: Any,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    namespace: str,
    wait_for: Callable[..., Any],
) -> None:
    """3 tasks, 2 at a time, activeDeadlineSeconds 30: task 0 passes, task 1 still runs at
    the deadline. The eval ends Failed with Failed=True / Complete=False, reason
    DeadlineExceeded, the Job controller's words; task 0's pass is kept (status and
    `passhat report`), task 1's pod is deleted and task 2 never gets one."""
    manifest = eval_manifest("late", tasks=3, trials=1, parallelism=2, ks=[1])
    manifest["spec"]["activeDeadlineSeconds"] = 30
    body = create_eval(api_client, namespace, manifest)
    assert body["spec"].get("activeDeadlineSeconds") == 30, "the cluster's CRD pruned the field"
    wait_for(lambda: len(trial_pods(core_v1, namespace)) == 2, 60, "2 trial pods")
    kept = end_pod(core_v1, namespace, "-t0-0-a0", 0)
    wait_for(
        lambda: progress_done(get_eval(api_client, namespace, "late")) == 1, 60, "task 0 recorded"
    )
    ended = wait_for_condition(
        api_client, namespace, "late", "Failed", timeout=120, operator=operator
    )
    status = ended["status"]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Failed"]["reason"] == "DeadlineExceeded"
    assert conditions["Failed"]["message"] == (
        "ConsistencyEval was active longer than specified deadline (spec.activeDeadlineSeconds: 30)"
    )
    assert conditions["Complete"]["status"] == "False"
    assert conditions["Complete"]["reason"] == "DeadlineExceeded"
    assert status["phase"] == "Failed" and "completionTime" not in status
    assert status["progress"] == {"done": 1, "running": 0, "waiting": 0, "pending": 2, "retries": 0}
    assert status["summary"]["byK"][0]["tasksScored"] == 1

    wait_for(lambda: none_held(core_v1, namespace), 120, "no pod holding our finalizer")
    wait_for(
        lambda: [p["metadata"]["name"] for p in trial_pods(core_v1, namespace)] == [kept],
        120,
        "only task 0's pod left (task 1's deleted)",
    )
    assert tasks_run(core_v1, namespace) == {0}
    assert events_of(core_v1, namespace, body["metadata"]["uid"], "DeadlineExceeded")

    report = passhat(cluster, "report", "late", "-n", namespace, "--format", "json")
    # NB: exit 3, not finished: an eval stopped at its deadline has no verdict (#21)
    assert report.returncode == 3, report.stderr
    (row,) = json.loads(report.stdout)
    assert (row["k"], row["tasks_scored"], row["mean_pass_rate"]) == (1, 1, 1.0)
    operator.assert_running()
