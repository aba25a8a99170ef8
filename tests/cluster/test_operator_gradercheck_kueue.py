"""Grader pods of a queued eval go through the test cluster's real Kueue as its trial pods
do, also when the queue is named by the template's label rather than `spec.queueName`.

Before session 14 a grader pod got the queue label only from `spec.queueName`: with the
queue in the template's label (which `queue_of` honours for trial pods), every grader pod
ran outside the ClusterQueue's quota; and up to `parallelism` grader pods were parked in
the queue at once. Here: 2 tasks x 2 trials regraded twice (8 grader pods) at parallelism
8 on a queue with quota for 2 pods: every grader pod is managed by Kueue, never more than
2 run and 2 wait at once, and the check ends stable; kept, no grader pod holds its
transcript any more.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from passhat.operator.gradercheck import ANNOTATION_TRANSCRIPT, LABEL_GRADING
from tests.cluster.conftest import Cluster, fresh_namespace
from tests.cluster.kueue_helpers import (
    KUEUE_NAMESPACE_LABEL,
    QUEUE_LABEL,
    gated,
    kueue_queue,
    require_kueue,
)
from tests.cluster.operator_helpers import (
    OperatorProcess,
    condition,
    create_eval,
    eval_pods,
    get_eval,
    operator_in,
)
from tests.cluster.test_operator_gradercheck import HONEST_JUDGE, checked_eval

# Kueue's pod webhook labels every pod it manages.
MANAGED_LABEL = "kueue.x-k8s.io/managed"
TIMEOUT_S = 480


@pytest.fixture
def queued(
    cluster: Cluster, kubectl: Callable[..., str], core_v1: client.CoreV1Api, tmp_path: Path
) -> Iterator[tuple[str, OperatorProcess]]:
    """A namespace Kueue manages and an operator serving it."""
    require_kueue()
    name = f"t-kgrader-{uuid.uuid4().hex[:6]}"
    with (
        fresh_namespace(core_v1, name, labels={KUEUE_NAMESPACE_LABEL: "true"}) as namespace,
        operator_in(cluster, kubectl, namespace, tmp_path / "operator.log") as process,
    ):
        yield namespace, process


def grader_pods(core: client.CoreV1Api, namespace: str, uid: str) -> list[dict[str, Any]]:
    return [
        pod
        for pod in eval_pods(core, namespace, uid)
        if LABEL_GRADING in (pod["metadata"].get("labels") or {})
    ]


def test_grader_pods_are_queued_by_the_templates_queue_label(
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    kubectl: Callable[..., str],
    queued: tuple[str, OperatorProcess],
) -> None:
    """Queue named by the template's label only: every grader pod carries it and Kueue
    manages it; at most 2 grader pods admitted and 2 waiting at once; GraderStable."""
    namespace, operator = queued
    with kueue_queue(kubectl, core_v1, namespace, pods=2) as queue:
        manifest = checked_eval("kgrader", HONEST_JUDGE)
        manifest["spec"]["parallelism"] = 8
        template = manifest["spec"]["trial"]["template"]
        template["metadata"] = {"labels": {QUEUE_LABEL: queue}}
        uid = create_eval(api_client, namespace, manifest)["metadata"]["uid"]
        most = {"admitted": 0, "waiting": 0}
        seen: dict[str, dict[str, Any]] = {}
        body: dict[str, Any] | None = None
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            pods = grader_pods(core_v1, namespace, uid)
            seen.update({pod["metadata"]["name"]: pod for pod in pods})
            live = [
                pod
                for pod in pods
                if (pod.get("status") or {}).get("phase") in ("Pending", "Running")
                and not pod["metadata"].get("deletionTimestamp")
            ]
            waiting = sum(1 for pod in live if gated(pod))
            most["admitted"] = max(most["admitted"], len(live) - waiting)
            most["waiting"] = max(most["waiting"], waiting)
            body = get_eval(api_client, namespace, "kgrader")
            if condition(body, "Complete") == "True":
                break
            operator.assert_running()
            time.sleep(0.5)
        else:
            status = (body or {}).get("status") or {}
            pytest.fail(f"the eval did not complete: {status}\n{operator.log_tail()}")
        assert len(seen) == 8, sorted(seen)
        for name, pod in seen.items():
            labels = pod["metadata"].get("labels") or {}
            assert labels.get(QUEUE_LABEL) == queue, (name, labels)
            assert labels.get(MANAGED_LABEL) == "true", (name, labels)
        assert most["admitted"] <= 2, most
        assert most["waiting"] <= 2, f"grader pods flooded the queue: {most}"
        assert body is not None
        check = body["status"]["graderCheck"]
        assert check["graderErrors"] == 0 and check["stable"] is True, check
        assert condition(body, "GraderStable") == "True"
        # NB: kept, a grader pod no longer holds its transcript (etcd, `get pods`)
        kept = grader_pods(core_v1, namespace, uid)
        assert [p["metadata"]["annotations"].get(ANNOTATION_TRANSCRIPT) for p in kept] == [""] * 8
