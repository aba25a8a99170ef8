"""Trial pods a user changes or imitates on the real API server: never miscounted, never stuck.

The review that found these (session 7) saw: a user's pod carrying a slot's labels counted
as that trial's result; a trial pod relabelled as another trial counted for it; a trial pod
whose eval-uid label was removed stalling its slot forever (every pass re-created a name
that was taken) and keeping its finalizer after the eval was deleted.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from passhat.trials.ledger import SlotLedger, SlotState
from tests.cluster.kube_helpers import create_pod, raw_json
from tests.cluster.operator_helpers import (
    EVAL_UID_LABEL,
    RECORDED_LABEL,
    TRIAL_FINALIZER,
    OperatorProcess,
    Scripter,
    create_eval,
    eval_manifest,
    trial_pods,
    wait_for_condition,
)


def _named(core: client.CoreV1Api, namespace: str, suffix: str) -> dict[str, Any]:
    (pod,) = [p for p in trial_pods(core, namespace) if p["metadata"]["name"].endswith(suffix)]
    return pod


def test_forged_relabelled_and_unlabelled_pods_are_never_counted(
    operator: OperatorProcess,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    kubectl: Callable[..., str],
    namespace: str,
    wait_for: Callable[..., Any],
) -> None:
    """1 task x 4 trials, every pod waiting for its script. Before any ends: a user pod
    copies trial 0's labels (no owner), trial 1's pod is relabelled as trial 3, and trial
    2's pod loses its eval-uid label. Then every pod passes. The eval completes with every
    trial a pass of its own pod, the forged pod is not recorded, and no finalizer is left."""
    body = create_eval(
        api_client, namespace, eval_manifest("tamper", tasks=1, trials=4, parallelism=4)
    )
    uid = body["metadata"]["uid"]
    wait_for(lambda: len(trial_pods(core_v1, namespace)) == 4, 120, "4 trial pods")

    real = _named(core_v1, namespace, "-t0-0-a0")
    forged = copy.deepcopy(real["metadata"])
    create_pod(
        core_v1,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "forged",
                "labels": forged["labels"],
                "annotations": forged["annotations"],
            },
            "spec": {
                "nodeSelector": {"type": "kwok"},
                "tolerations": real["spec"]["tolerations"],
                "containers": [{"name": "agent", "image": "localhost/passhat/fake:1"}],
            },
        },
    )
    moved = _named(core_v1, namespace, "-t0-1-a0")["metadata"]["name"]
    core_v1.patch_namespaced_pod(
        moved, namespace, {"metadata": {"labels": {"passhat.dev/trial": "3"}}}
    )
    hidden = _named(core_v1, namespace, "-t0-2-a0")["metadata"]["name"]
    core_v1.patch_namespaced_pod(
        hidden, namespace, {"metadata": {"labels": {EVAL_UID_LABEL: None}}}
    )

    with Scripter(core_v1, namespace, lambda task, trial, attempt: 0):
        done = wait_for_condition(
            api_client, namespace, "tamper", "Complete", timeout=300, operator=operator
        )
    ledger = SlotLedger.unpack(done["status"]["ledger"])
    assert [ledger.state(0, trial) for trial in range(4)] == [SlotState.PASS] * 4
    # NB: the hidden pod's attempt is lost (its name was taken), the moved one's may be
    assert [ledger.attempts(0, trial) for trial in (0, 2, 3)] == [1, 2, 1]

    (forged_now,) = [p for p in trial_pods(core_v1, namespace) if p["metadata"]["name"] == "forged"]
    assert RECORDED_LABEL not in forged_now["metadata"]["labels"]

    def nothing_held() -> bool:
        pods = raw_json(core_v1.list_namespaced_pod(namespace, _preload_content=False))["items"]
        return not any(TRIAL_FINALIZER in (p["metadata"].get("finalizers") or []) for p in pods)

    wait_for(nothing_held, 120, "no pod holding the trial-accounting finalizer")
    assert all(
        p["metadata"]["labels"].get(EVAL_UID_LABEL) == uid for p in trial_pods(core_v1, namespace)
    )


def test_pods_stranded_without_the_operator_are_released_at_its_start(
    operator: OperatorProcess,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    kubectl: Callable[..., str],
    namespace: str,
    wait_for: Callable[..., Any],
) -> None:
    """The operator is gone; the user strips the eval's finalizer and deletes it; garbage
    collection deletes its running pods, which our finalizer holds in Terminating. When the
    operator starts again it releases them (no eval would ever start a watch there)."""
    create_eval(api_client, namespace, eval_manifest("stranded", tasks=1, trials=2, parallelism=2))
    wait_for(lambda: len(trial_pods(core_v1, namespace)) == 2, 120, "2 trial pods")
    operator.kill()
    kubectl(
        "patch", "ceval", "stranded", "-n", namespace, "--type=merge",
        "-p", '{"metadata":{"finalizers":null}}',
    )  # fmt: skip
    kubectl("delete", "ceval", "stranded", "-n", namespace, "--wait=true", "--timeout=60s")

    def terminating() -> list[str]:
        pods = trial_pods(core_v1, namespace)
        return [p["metadata"]["name"] for p in pods if p["metadata"].get("deletionTimestamp")]

    wait_for(lambda: len(terminating()) == 2, 120, "garbage collection deleting both pods")
    assert all(
        TRIAL_FINALIZER in p["metadata"]["finalizers"] for p in trial_pods(core_v1, namespace)
    )
    operator.start()
    wait_for(lambda: not trial_pods(core_v1, namespace), 120, "the stranded pods released and gone")


@pytest.mark.parametrize("when", ["foreground", "operator-down"])
def test_a_finished_evals_held_pod_is_released_when_the_eval_is_deleted(
    when: str,
    operator: OperatorProcess,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    namespace: str,
    wait_for: Callable[..., Any],
) -> None:
    """A finished eval whose last pass could not let one pod go (here: the pod is given its
    finalizer back and loses its recorded label) is deleted: `foreground` with the operator
    running (the pod blocks the eval's deletion), or with the operator down after it was
    killed before kopf dropped its finalizer. No `on.delete` runs for a finished eval and a
    pass over a deleted one does nothing: the pod watch, or the sweep at start, must still
    let the pod go, and the eval must go."""
    custom = client.CustomObjectsApi(api_client)
    create_eval(api_client, namespace, eval_manifest("held", tasks=2, trials=1, parallelism=2))
    with Scripter(core_v1, namespace, lambda task, trial, attempt: 0):
        wait_for_condition(
            api_client, namespace, "held", "Complete", timeout=300, operator=operator
        )

    def settled() -> bool:
        pods = trial_pods(core_v1, namespace)
        return len(pods) == 2 and all(not p["metadata"].get("finalizers") for p in pods)

    wait_for(settled, 120, "both kept pods released")
    name = trial_pods(core_v1, namespace)[0]["metadata"]["name"]
    held = {"metadata": {"labels": {RECORDED_LABEL: None}, "finalizers": [TRIAL_FINALIZER]}}
    if when == "foreground":
        core_v1.patch_namespaced_pod(name, namespace, held)
        custom.delete_namespaced_custom_object(
            "passhat.dev", "v1alpha1", namespace, "consistencyevals", "held",
            body=client.V1DeleteOptions(propagation_policy="Foreground"),
        )  # fmt: skip
    else:
        operator.kill()
        core_v1.patch_namespaced_pod(name, namespace, held)
        custom.patch_namespaced_custom_object(
            "passhat.dev", "v1alpha1", namespace, "consistencyevals", "held",
            {"metadata": {"finalizers": ["passhat.dev/operator"]}},
        )  # fmt: skip
        custom.delete_namespaced_custom_object(
            "passhat.dev", "v1alpha1", namespace, "consistencyevals", "held"
        )
        operator.start()

    def gone() -> bool:
        try:
            custom.get_namespaced_custom_object(
                "passhat.dev", "v1alpha1", namespace, "consistencyevals", "held"
            )
        except client.ApiException as err:
            return err.status == 404 and not trial_pods(core_v1, namespace)
        return False

    wait_for(gone, 120, "the eval and its pods to be gone")
    operator.assert_running()
