"""The chart's admission rule (an eval needs its author's right to create pods), its values,
and the plain manifest for installs without Helm, kept equal to the chart's."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.unit.chart_helpers import CHART, KUBE_VERSION, REPO, helm
from tests.unit.test_chart_render import RELEASE, RELEASE_NS, by_kind, operator_container, render

PLAIN = REPO / "deploy" / "admission-policy.yaml"
CHECK = "authorizer.group('').resource('pods').namespace(request.namespace).check('create')"


def policy_objects(*sets: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The policy and its binding the chart renders."""
    objects = render(*sets)
    (policy,) = by_kind(objects, "ValidatingAdmissionPolicy")
    (binding,) = by_kind(objects, "ValidatingAdmissionPolicyBinding")
    return policy, binding


def test_on_by_default_checking_the_authors_pod_rights() -> None:
    """By default every eval CREATE, in every namespace, is checked with the author's own
    right to create pods in the eval's namespace, and refused (Deny) without it."""
    policy, binding = policy_objects()
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {
            "apiGroups": ["passhat.dev"],
            "apiVersions": ["*"],
            "operations": ["CREATE"],
            "resources": ["consistencyevals"],
        }
    ]
    assert "namespaceSelector" not in spec["matchConstraints"]
    (rule,) = spec["validations"]
    assert rule["expression"] == f"{CHECK}.allowed()"
    assert "request.userInfo.username" in rule["messageExpression"]
    assert "verb create, resource pods" in rule["messageExpression"]
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"],
        "validationActions": ["Deny"],
    }
    assert (
        policy["metadata"]["name"]
        == f"{RELEASE_NS}.{RELEASE}-passhat.eval-author-pod-rights.passhat.dev"
    )


def test_a_value_turns_it_off() -> None:
    """admissionPolicy.enabled=false renders neither object (and works before Kubernetes 1.30)."""
    args = ["template", RELEASE, str(CHART), "--kube-version", "1.29.0"]
    out = helm(*args, "--set", "admissionPolicy.enabled=false").stdout
    kinds = {doc["kind"] for doc in yaml.safe_load_all(out) if doc}
    assert not kinds & {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    refused = helm(*args, check=False)
    assert refused.returncode != 0 and "admissionPolicy.enabled=false" in refused.stderr


def test_plain_manifest_equals_the_chart() -> None:
    """deploy/admission-policy.yaml has the chart's policy and binding specs (names aside),
    so an install without Helm enforces the same rule."""
    policy, binding = policy_objects()
    plain = [doc for doc in yaml.safe_load_all(PLAIN.read_text()) if doc]
    assert [doc["kind"] for doc in plain] == [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    plain_policy, plain_binding = plain
    assert plain_policy["spec"] == policy["spec"]
    name = plain_policy["metadata"]["name"]
    assert plain_binding["spec"] == {**binding["spec"], "policyName": name}
    assert PLAIN.read_text().startswith("# The admission rule of charts/passhat/templates/")


def test_trial_grants_become_operator_flags() -> None:
    """The admin's grants reach `passhat operator` as flags, one per namespace or class."""
    args = operator_container(
        render(
            "operator.privilegedNamespaces={lab,gpu-lab}",
            "operator.allowedPriorityClasses={batch-low}",
            "operator.allowedRuntimeClasses={gvisor}",
            "operator.allowTolerateAll=true",
        )
    )["args"]
    assert [a for a in args if a.startswith("--allow")] == [
        "--allow-privileged-trials-in=lab",
        "--allow-privileged-trials-in=gpu-lab",
        "--allow-priority-class=batch-low",
        "--allow-runtime-class=gvisor",
        "--allow-tolerate-all",
    ]
    assert not [a for a in operator_container(render())["args"] if a.startswith("--allow")]


def test_the_global_privileged_switch_is_refused_naming_the_new_value() -> None:
    """operator.allowPrivilegedTrials=true (the old switch for every namespace) fails the
    render with a message naming operator.privilegedNamespaces."""
    proc = helm(
        "template",
        RELEASE,
        str(CHART),
        "--kube-version",
        KUBE_VERSION,
        "--set",
        "operator.allowPrivilegedTrials=true",
        check=False,
    )
    assert proc.returncode != 0
    assert "operator.privilegedNamespaces" in proc.stderr


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("operator.privilegedNamespaces={Team_A}", "privilegedNamespaces"),
        ("operator.allowedPriorityClasses={High Prio}", "allowedPriorityClasses"),
        ("operator.allowTolerateAll=maybe", "allowTolerateAll"),
        ("admissionPolicy.enabled=sometimes", "enabled"),
        ("admissionPolicy.scope=all", "scope"),
    ],
)
def test_schema_refuses_bad_grants(value: str, field: str) -> None:
    """values.schema.json refuses a bad grant before anything renders, naming it."""
    proc = helm(
        "template",
        RELEASE,
        str(CHART),
        "--kube-version",
        KUBE_VERSION,
        "--set",
        value,
        check=False,
    )
    assert proc.returncode != 0
    assert "values don't meet the specifications of the schema" in proc.stderr
    assert field in proc.stderr


def test_on_when_the_value_is_missing() -> None:
    """A release upgraded with --reuse-values from a chart without the key (Helm then keeps
    the old chart's defaults) still gets the policy, and no grant."""
    objects = render("admissionPolicy=null", "operator.privilegedNamespaces=null")
    assert by_kind(objects, "ValidatingAdmissionPolicy")
    assert not [a for a in operator_container(objects)["args"] if a.startswith("--allow")]
