"""spec.podRetention on the real API server (issue #22): the finished trial pods an eval
keeps. `none` deletes every pod once its outcome is in status, `failed` keeps the pods of
attempts that did not pass (the retried infra error's too); either way the ledger is the
script's exactly, and nothing is created again or counted twice after the deletions.
Pods on kwok nodes, ended by the Scripter (docs/operator.md#pod-retention-specpodretention).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from passhat.trials.ledger import SlotLedger
from tests.cluster.conftest import wait_for
from tests.cluster.operator_helpers import (
    OperatorProcess,
    Scripter,
    create_eval,
    eval_manifest,
    eval_pods,
    expected_ledger,
    get_eval,
    wait_for_condition,
)


def script(task: int, trial: int, attempt: int) -> int:
    """Task 0 trial 0's first attempt an infra error (retried), task 1 trial 1 a fail."""
    if (task, trial, attempt) == (0, 0, 0):
        return 75
    return 1 if (task, trial) == (1, 1) else 0


def left(core: client.CoreV1Api, namespace: str, uid: str) -> list[tuple[int, int, int]]:
    """(task, trial, attempt) of the eval's pods not being deleted, sorted."""
    found = []
    for pod in eval_pods(core, namespace, uid):
        meta: dict[str, Any] = pod["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        labels = meta["labels"]
        found.append(
            (
                int(labels["passhat.dev/task"]),
                int(labels["passhat.dev/trial"]),
                int(labels["passhat.dev/attempt"]),
            )
        )
    return sorted(found)


@pytest.mark.parametrize(
    ("retention", "kept"),
    [("none", []), ("failed", [(0, 0, 0), (1, 1, 0)])],
)
def test_pod_retention_deletes_what_it_says_and_counts_stay_exact(
    retention: str,
    kept: list[tuple[int, int, int]],
    operator: OperatorProcess,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    namespace: str,
) -> None:
    name = f"keep-{retention}"
    manifest = eval_manifest(name, tasks=2, trials=2, parallelism=4)
    manifest["spec"]["podRetention"] = retention
    create_eval(api_client, namespace, manifest)
    with Scripter(core_v1, namespace, script):
        body = wait_for_condition(
            api_client, namespace, name, "Complete", timeout=600, operator=operator
        )
    assert body["spec"].get("podRetention") == retention, "the CRD pruned spec.podRetention"
    expected = expected_ledger(script, tasks=2, trials=2, retries=2)
    assert SlotLedger.unpack(body["status"]["ledger"]) == expected
    uid = body["metadata"]["uid"]
    wait_for(lambda: left(core_v1, namespace, uid) == kept, 120, f"only {kept} left")
    time.sleep(5)  # NB: nothing is created again, nothing recounted
    assert left(core_v1, namespace, uid) == kept
    after = get_eval(api_client, namespace, name)
    assert after is not None
    assert after["status"]["ledger"] == body["status"]["ledger"]
    assert after["status"]["progress"] == body["status"]["progress"]
    assert after["status"]["summary"] == body["status"]["summary"]
    operator.assert_running()
