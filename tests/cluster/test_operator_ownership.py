"""Only the operator's own pods count, and only they are touched, on the real API server.

Another user of the namespace (impersonated: pod rights, no eval rights) creates pods
that look like an eval's trial pods in every way they can: the eval's labels, a controller
owner reference to it, the operator's finalizer, the creation mark copied from a real
trial pod, and, for one of them, the predictable name of a trial the operator has not yet
created. Neither pod is counted, patched or deleted: the squatted trial's attempt is lost
(a TrialPodNameTaken event names the pod) and its next attempt decides it, and when the
eval is deleted the operator does not take its finalizer off them.
"""

from __future__ import annotations

import copy
import subprocess
import time
from collections.abc import Callable
from typing import Any

import yaml
from kubernetes import client

from passhat.operator.pods import EvalRef, PodKey, pod_name
from passhat.trials.ledger import SlotLedger, SlotState
from tests.cluster.kube_helpers import grant, raw_json
from tests.cluster.operator_helpers import (
    RECORDED_LABEL,
    TRIAL_FINALIZER,
    OperatorProcess,
    Scripter,
    create_eval,
    eval_manifest,
    trial_pods,
    wait_for_condition,
)

MALLORY = "mallory@example.com"


def grant_pods(kubectl: Callable[..., str], namespace: str, user: str) -> None:
    """`user` may create, read and list pods in `namespace`, and nothing else."""
    rule = {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list"]}
    grant(kubectl, namespace, user, name="pods", rules=[rule])


def create_as(cluster: Any, user: str, namespace: str, manifest: dict[str, Any]) -> None:
    """`kubectl --as USER create -f -`: fails the test when refused."""
    proc = subprocess.run(
        [str(cluster.bin / "kubectl"), "--as", user, "-n", namespace, "create", "-f", "-"],
        input=yaml.safe_dump(manifest),
        capture_output=True,
        text=True,
        env=cluster.env(),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def look_alike(real: dict[str, Any], name: str, *, trial: int) -> dict[str, Any]:
    """A pod as like trial pod `real` as another user can make it, named `name`, with
    `real`'s labels (as trial `trial`), owner reference, finalizer and creation mark."""
    meta = real["metadata"]
    owner = {
        key: value
        for key, value in meta["ownerReferences"][0].items()
        if key != "blockOwnerDeletion"  # NB: needs rights on the eval itself
    }
    labels = {**meta["labels"], "passhat.dev/trial": str(trial)}
    spec = real["spec"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                **meta["annotations"],
                "passhat.dev/fake-run-forever": "true",
            },
            "finalizers": [TRIAL_FINALIZER],
            "ownerReferences": [owner],
        },
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": spec["nodeSelector"],
            "tolerations": spec["tolerations"],
            "securityContext": spec["securityContext"],
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "agent",
                    "image": "localhost/passhat/fake:1",
                    "securityContext": spec["containers"][0]["securityContext"],
                }
            ],
        },
    }


def pod_json(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, Any] | None:
    """The pod as stored, or None."""
    for pod in trial_pods(core, namespace):
        if pod["metadata"]["name"] == name:
            return pod
    return None


def test_another_users_look_alikes_are_neither_counted_nor_deleted(
    cluster: Any,
    operator: OperatorProcess,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    kubectl: Callable[..., str],
    namespace: str,
    wait_for: Callable[..., Any],
) -> None:
    """1 task x 2 trials, one at a time. While trial 0 runs, mallory (pod rights only)
    creates trial 1's attempt-0 pod herself, and a second look-alike under another name.
    Both pass; the operator counts neither: trial 0 is its own pod's fail, trial 1 is
    decided by attempt 1 under a new name, and both of mallory's pods keep their uid,
    labels and finalizer, also after the eval is deleted."""
    grant_pods(kubectl, namespace, MALLORY)
    body = create_eval(
        api_client, namespace, eval_manifest("owned", tasks=1, trials=2, parallelism=1)
    )
    ref = EvalRef(namespace, "owned", body["metadata"]["uid"])
    wait_for(lambda: len(trial_pods(core_v1, namespace)) == 1, 120, "trial 0's pod")
    (real,) = trial_pods(core_v1, namespace)
    assert real["metadata"]["name"] == pod_name(ref, PodKey(0, 0, 0))
    squatted = pod_name(ref, PodKey(0, 1, 0))
    create_as(cluster, MALLORY, namespace, look_alike(real, squatted, trial=1))
    create_as(cluster, MALLORY, namespace, look_alike(real, "mallory-copy", trial=0))
    before = {
        name: copy.deepcopy(pod_json(core_v1, namespace, name))
        for name in (squatted, "mallory-copy")
    }

    def script(task: int, trial: int, attempt: int) -> int:
        return 1 if trial == 0 else 0  # NB: mallory's pods pass; trial 0 itself fails

    with Scripter(core_v1, namespace, script):
        done = wait_for_condition(
            api_client, namespace, "owned", "Complete", timeout=300, operator=operator
        )
    ledger = SlotLedger.unpack(done["status"]["ledger"])
    assert [ledger.state(0, trial) for trial in (0, 1)] == [SlotState.FAIL, SlotState.PASS]
    assert [ledger.attempts(0, trial) for trial in (0, 1)] == [1, 2]

    for name, was in before.items():
        now = pod_json(core_v1, namespace, name)
        assert was is not None and now is not None, name
        assert now["metadata"]["uid"] == was["metadata"]["uid"], name
        assert now["metadata"]["finalizers"] == [TRIAL_FINALIZER], name
        assert RECORDED_LABEL not in now["metadata"]["labels"], name
        assert now["metadata"].get("deletionTimestamp") is None, name

    events = raw_json(
        core_v1.list_namespaced_event(
            namespace,
            field_selector="involvedObject.name=owned",
            _preload_content=False,
        )
    )["items"]
    reasons = {event["reason"]: event["message"] for event in events}
    assert f"pod {squatted} holds the name of task task-000 trial 1 attempt 0" in reasons.get(
        "TrialPodNameTaken", ""
    ), reasons
    assert "ForeignTrialPod" in reasons, reasons

    kubectl("delete", "ceval", "owned", "-n", namespace, "--wait=false")
    own = [pod_name(ref, PodKey(0, 0, 0)), pod_name(ref, PodKey(0, 1, 1))]

    def collected() -> bool:
        """The eval's own pods gone, mallory's being deleted (their owner is gone)."""
        if any(pod_json(core_v1, namespace, name) is not None for name in own):
            return False
        pods = [pod_json(core_v1, namespace, name) for name in before]
        return all(pod and pod["metadata"].get("deletionTimestamp") for pod in pods)

    wait_for(collected, 120, "garbage collection of the eval's pods")
    time.sleep(10)  # NB: the operator's pod watch sees them deleted, with no eval left
    operator.assert_running()
    for name in before:
        # NB: our finalizer, which mallory put there, is not ours to take off: they stay
        # Terminating until she (or the namespace's deletion in teardown) removes it.
        now = pod_json(core_v1, namespace, name)
        assert now is not None and now["metadata"]["finalizers"] == [TRIAL_FINALIZER], name
