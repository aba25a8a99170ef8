"""TrialPolicy: the cluster admin's grants decide what a template may ask for beyond the
restricted profile, and each refusal names the chart value that would allow it."""

from __future__ import annotations

from typing import Any

import pytest

from passhat.operator.policy import TrialPolicy

S = "spec.trial.template.spec"


def template(**spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "agent", "image": "x"}], **spec}}


def test_nothing_is_granted_by_default() -> None:
    """A restricted template with ordinary scheduling fields runs anywhere."""
    plain = template(
        nodeSelector={"pool": "evals"},
        tolerations=[{"key": "evals", "operator": "Exists", "effect": "NoSchedule"}],
        priorityClassName="",
    )
    assert TrialPolicy().problems(plain, namespace="team-a") == []


def test_privileged_namespaces_lift_only_pod_security() -> None:
    """In a granted namespace root and privileged pass; the scheduling rules still hold."""
    unsafe = template(hostPID=True, nodeName="node-1")
    unsafe["spec"]["containers"][0]["securityContext"] = {"privileged": True, "runAsUser": 0}
    policy = TrialPolicy(privileged_namespaces=frozenset({"lab"}))
    assert policy.problems(unsafe, namespace="lab") == [
        f"{S}.nodeName: not allowed: it bypasses the scheduler and node taints; "
        "use nodeSelector or affinity"
    ]
    refused = policy.problems(unsafe, namespace="team-a")
    assert len(refused) == 4
    assert refused[-2].endswith(
        'trial pods must meet Pod Security "restricted"; only the cluster admin can grant '
        "namespace team-a more: chart value operator.privilegedNamespaces)"
    )


@pytest.mark.parametrize(
    "toleration",
    [{"operator": "Exists"}, {"operator": "Exists", "key": "", "effect": "NoExecute"}],
)
def test_tolerating_every_taint_needs_the_grant(toleration: dict[str, Any]) -> None:
    """`operator: Exists` without a key is refused unless operator.allowTolerateAll."""
    wide = template(tolerations=[{"key": "gpu", "operator": "Exists"}, toleration])
    assert TrialPolicy().problems(wide, namespace="a") == [
        f"{S}.tolerations[1]: operator Exists without a key tolerates every taint; allowed "
        "only with the chart value operator.allowTolerateAll (passhat operator "
        "--allow-tolerate-all)"
    ]
    assert TrialPolicy(tolerate_all=True).problems(wide, namespace="a") == []


def test_priority_and_runtime_classes_come_from_the_admins_lists() -> None:
    """A class not listed is refused naming the list and its chart value; a listed one runs."""
    classy = template(priorityClassName="system-node-critical", runtimeClassName="runc-host")
    policy = TrialPolicy(priority_classes=frozenset({"batch-low"}))
    assert policy.problems(classy, namespace="a") == [
        f"{S}.priorityClassName: system-node-critical is not an allowed priority class "
        "(allowed: batch-low); the cluster admin lists them in the chart value "
        "operator.allowedPriorityClasses (passhat operator --allow-priority-class NAME)",
        f"{S}.runtimeClassName: runc-host is not an allowed runtime class (allowed: none); "
        "the cluster admin lists them in the chart value operator.allowedRuntimeClasses "
        "(passhat operator --allow-runtime-class NAME)",
    ]
    granted = TrialPolicy(
        priority_classes=frozenset({"system-node-critical"}),
        runtime_classes=frozenset({"runc-host"}),
    )
    assert granted.problems(classy, namespace="a") == []


def test_unhashable_class_names_are_refused_not_a_crash() -> None:
    """A class name of the wrong type is refused (the API server would refuse it too)."""
    odd = template(priorityClassName={"name": "x"}, nodeName=["n"])
    assert len(TrialPolicy().problems(odd, namespace="a")) == 2


def test_kueue_workload_priority_class_comes_from_the_same_list() -> None:
    """The Kueue WorkloadPriorityClass label is held to operator.allowedPriorityClasses: a
    high one would preempt other teams' workloads in a shared queue."""
    labelled = template()
    labelled["metadata"] = {"labels": {"kueue.x-k8s.io/priority-class": "urgent", "team": "a"}}
    assert TrialPolicy(priority_classes=frozenset({"batch-low"})).problems(
        labelled, namespace="a"
    ) == [
        'spec.trial.template.metadata.labels["kueue.x-k8s.io/priority-class"]: urgent is '
        "not an allowed workload priority class (allowed: batch-low); the cluster admin "
        "lists them in the chart value operator.allowedPriorityClasses (passhat operator "
        "--allow-priority-class NAME)"
    ]
    granted = TrialPolicy(priority_classes=frozenset({"urgent"}))
    assert granted.problems(labelled, namespace="a") == []
    odd = template()
    odd["metadata"] = ["not", "a", "mapping"]
    assert TrialPolicy().problems(odd, namespace="a") == []
