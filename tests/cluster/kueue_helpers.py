"""Helpers for tests that queue trials with the test cluster's real Kueue (hack/cluster/up.sh).

Kueue manages only namespaces labelled `passhat.dev/test-kueue: "true"` (its pod webhooks'
namespaceSelector and its managedJobsNamespaceSelector, docs/cluster.md), so a test that
wants Kueue labels its own namespace. Its cluster-scoped objects (ResourceFlavor,
ClusterQueue, WorkloadPriorityClass) are named after that namespace and deleted with it.

- `require_kueue()`: fail (never skip) when Kueue's health endpoint does not answer.
- `kueue_queue(...)`: a ResourceFlavor, a ClusterQueue with a quota of N pods (and
  preemption of lower priorities within it) and a LocalQueue `team` in the namespace;
  on exit the namespace's evals, then its pods, then the queues are deleted while Kueue
  still runs (its finalizers are on every pod and queue it manages).
- `pod_counts(core, namespace, uid)`: (admitted, waiting) live trial pods of an eval.
"""

from __future__ import annotations

import contextlib
import json
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.cluster.operator_helpers import delete_evals, eval_pods

KUEUE_NAMESPACE_LABEL = "passhat.dev/test-kueue"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
LOCAL_QUEUE = "team"
KUEUE_HEALTH = "http://127.0.0.1:9545/readyz"


def require_kueue() -> None:
    """Fail the test when the cluster's Kueue is not up (hack/cluster/up.sh starts it)."""
    try:
        with urllib.request.urlopen(KUEUE_HEALTH, timeout=5) as answer:
            if answer.status == 200:
                return
            problem = f"HTTP {answer.status}"
    except OSError as err:
        problem = str(err)
    pytest.fail(
        f"Kueue is not running ({KUEUE_HEALTH}: {problem}); hack/cluster/up.sh starts it, "
        "see .cluster/logs/kueue.log"
    )


def _apply(kubectl: Callable[..., str], *objects: dict[str, Any]) -> None:
    kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(obj) for obj in objects))


def _delete(kubectl: Callable[..., str], kind: str, name: str, namespace: str = "") -> None:
    where = ["-n", namespace] if namespace else []
    kubectl("delete", kind, name, *where, "--ignore-not-found", "--timeout=60s", check=False)
    # NB: a queue whose workloads linger keeps Kueue's finalizer: never leave it behind
    left = kubectl("get", kind, name, *where, "-o", "name", check=False).strip()
    if left:
        patch = '{"metadata":{"finalizers":null}}'
        kubectl("patch", kind, name, *where, "--type=merge", "-p", patch, check=False)


@contextlib.contextmanager
def kueue_queue(
    kubectl: Callable[..., str],
    core: client.CoreV1Api,
    namespace: str,
    *,
    pods: int,
    priorities: dict[str, int] | None = None,
) -> Iterator[str]:
    """LocalQueue `team` in `namespace` on a ClusterQueue of `pods` pods; yields its name.
    `priorities`: WorkloadPriorityClasses to create (name -> value)."""
    require_kueue()
    flavor = f"{namespace}-flavor"
    classes = dict(priorities or {})
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        for name, value in classes.items()
    ]
    objects += [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": namespace},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "pods"],
                        "flavors": [
                            {
                                "name": flavor,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "100"},
                                    {"name": "memory", "nominalQuota": "100Gi"},
                                    {"name": "pods", "nominalQuota": pods},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": namespace},
        },
    ]
    try:
        _apply(kubectl, *objects)
        yield LOCAL_QUEUE
    finally:
        delete_evals(kubectl, namespace)
        kubectl(
            "delete", "pods", "--all", "-n", namespace, "--wait=true", "--timeout=60s", check=False
        )
        _delete(kubectl, "localqueue", LOCAL_QUEUE, namespace)
        _delete(kubectl, "clusterqueue", namespace)
        _delete(kubectl, "resourceflavor", flavor)
        for name in classes:
            _delete(kubectl, "workloadpriorityclass", name)


def gated(pod: dict[str, Any]) -> bool:
    """Whether the pod still waits for Kueue's admission (any scheduling gate)."""
    return bool((pod.get("spec") or {}).get("schedulingGates"))


def pod_counts(core: client.CoreV1Api, namespace: str, uid: str) -> tuple[int, int]:
    """(admitted, waiting): the eval's live pods without and with a scheduling gate."""
    live = [
        pod
        for pod in eval_pods(core, namespace, uid)
        if (pod.get("status") or {}).get("phase") in ("Pending", "Running")
        and not pod["metadata"].get("deletionTimestamp")
    ]
    waiting = sum(1 for pod in live if gated(pod))
    return len(live) - waiting, waiting
