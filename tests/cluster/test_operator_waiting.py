"""Evals that cannot get pods for now say why, keep waiting, and recover (like a Job).

The review of session 7 saw a namespace ResourceQuota (or a LimitRange, or a missing
service account) leave an eval `Running` with phantom running pods and no event, and an
unschedulable trial pod leave it `Running` forever without a word.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.cluster.kube_helpers import as_body, raw_json
from tests.cluster.operator_helpers import (
    OperatorProcess,
    Scripter,
    create_eval,
    eval_manifest,
    get_eval,
    operator_in,
    trial_pods,
    wait_for_condition,
)


@pytest.fixture
def operator(
    cluster: Any, kubectl: Callable[..., str], namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """An operator with a 1 s resync and a 2 s unschedulable grace, scoped to `namespace`."""
    log = tmp_path / "operator.log"
    with operator_in(
        cluster,
        kubectl,
        namespace,
        log,
        extra_args=["--set", "resync_interval_s=1", "--set", "unschedulable_grace_s=2"],
    ) as process:
        yield process


def _events(core: client.CoreV1Api, namespace: str, uid: str) -> list[dict[str, Any]]:
    response = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.uid={uid}", _preload_content=False
    )
    items: list[dict[str, Any]] = raw_json(response)["items"]
    return items


def test_quota_refusal_is_an_event_and_the_eval_recovers(
    operator: OperatorProcess,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    namespace: str,
    wait_for: Callable[..., Any],
) -> None:
    """pods=0 quota: one QuotaExceeded event and CreateRefused=True with the API server's
    message, no pod, no phantom running count (from the next pass on), creates backing
    off; once the quota is gone it completes and CreateRefused turns False."""
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-pods"},
        "spec": {"hard": {"pods": "0"}},
    }
    core_v1.create_namespaced_resource_quota(namespace, as_body(quota, client.V1ResourceQuota))
    body = create_eval(
        api_client, namespace, eval_manifest("quota", tasks=1, trials=2, parallelism=2)
    )
    uid = body["metadata"]["uid"]

    def refused() -> list[dict[str, Any]]:
        return [e for e in _events(core_v1, namespace, uid) if e["reason"] == "QuotaExceeded"]

    wait_for(lambda: refused(), 120, "a QuotaExceeded event")
    (event,) = refused()
    assert event["type"] == "Warning" and "exceeded quota" in event["message"], event

    def status() -> dict[str, Any]:
        return dict((get_eval(api_client, namespace, "quota") or {}).get("status") or {})

    # NB: the pass that met the refusal had already written its status; the next one
    # counts no pod that does not exist
    wait_for(lambda: (status().get("progress") or {}).get("running") == 0, 60, "running 0")
    assert status().get("phase") in ("Pending", "Running")
    body = wait_for_condition(
        api_client, namespace, "quota", "CreateRefused", timeout=60, operator=operator
    )
    (refusal,) = [c for c in body["status"]["conditions"] if c["type"] == "CreateRefused"]
    assert refusal["reason"] == "QuotaExceeded" and "exceeded quota" in refusal["message"]
    assert trial_pods(core_v1, namespace) == []
    operator.assert_running()

    core_v1.delete_namespaced_resource_quota("no-pods", namespace)
    with Scripter(core_v1, namespace, lambda task, trial, attempt: 0):
        done = wait_for_condition(
            api_client, namespace, "quota", "Complete", timeout=300, operator=operator
        )
    assert done["status"]["progress"]["done"] == 2
    (refusal,) = [c for c in done["status"]["conditions"] if c["type"] == "CreateRefused"]
    assert (refusal["status"], refusal["reason"]) == ("False", "Created")
    assert len(refused()) == 1  # NB: one event per 10 minutes, not one per refused pass


def test_unschedulable_pod_is_reported_and_the_eval_waits(
    operator: OperatorProcess,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    namespace: str,
    wait_for: Callable[..., Any],
) -> None:
    """A trial pod no node can hold (5000 CPUs): a TrialPodUnschedulable event with the
    scheduler's reason; the eval stays Running, its pod counted as running."""
    manifest = eval_manifest("huge", tasks=1, trials=1, parallelism=1)
    container = manifest["spec"]["trial"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": "5000"}}
    body = create_eval(api_client, namespace, manifest)
    uid = body["metadata"]["uid"]

    def unschedulable() -> list[dict[str, Any]]:
        events = _events(core_v1, namespace, uid)
        return [e for e in events if e["reason"] == "TrialPodUnschedulable"]

    wait_for(lambda: unschedulable(), 120, "a TrialPodUnschedulable event")
    (event,) = unschedulable()
    assert "Insufficient cpu" in event["message"], event
    status = (get_eval(api_client, namespace, "huge") or {}).get("status") or {}
    assert status.get("phase") == "Running" and status["progress"]["running"] == 1, status
