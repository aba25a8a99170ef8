"""The operator's RBAC is exactly the calls it makes, and /metrics is fenced (#17 section 3).

`passhat.operator.kube.API_CALLS` lists every API call of the operator process with the
(group, resource, verb) it needs. The table is held to the code (each `Kube` method it
names exists, each HTTP method `Kube` sends has its verb in the table) and the chart to
the table: the rendered ClusterRole (cluster-wide mode) and each Role (namespaced mode)
grant exactly those, nothing more. The NetworkPolicy admits /metrics from the monitoring
namespace only.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from passhat.operator import kube
from passhat.operator.kube import API_CALLS, API_CALLS_CLUSTER_WIDE, API_CALLS_NAMESPACED, Kube
from tests.unit.test_chart_render import NAMESPACED, RELEASE, by_kind, render

Grant = tuple[str, str, str]
# The HTTP method of a request -> the RBAC verbs it may need (GET is get, list or watch).
_VERBS = {"GET": {"get", "list", "watch"}, "POST": {"create"}, "PATCH": {"patch"}}
_VERBS["DELETE"] = {"delete"}
_VERBS["PUT"] = {"update"}


def granted(role: dict[str, Any]) -> set[Grant]:
    """Every (group, resource, verb) a Role or ClusterRole grants."""
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def operator_roles(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The operator's own Roles and ClusterRoles (not the records API's reader role)."""
    return [
        o
        for o in objects
        if o["kind"] in ("Role", "ClusterRole") and o["metadata"]["name"] == f"{RELEASE}-passhat"
    ]


def test_the_table_names_real_methods_and_every_http_method_kube_sends() -> None:
    """Each `Kube.x` in API_CALLS exists, and each HTTP method `Kube` sends (found in its
    source) has a verb in the table."""
    for where in [*API_CALLS, *API_CALLS_CLUSTER_WIDE, *API_CALLS_NAMESPACED]:
        for method in re.findall(r"Kube\.(\w+)", where):
            assert hasattr(Kube, method), where
    source = Path(kube.__file__).read_text()
    sent: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and arg.value in _VERBS:
                    sent.add(arg.value)
            for keyword in node.keywords:
                if keyword.arg == "method" and isinstance(keyword.value, ast.Constant):
                    sent.add(str(keyword.value.value))
    assert sent == set(_VERBS)
    table_verbs = {verb for _, _, verb in API_CALLS.values()}
    for method in sent:
        assert _VERBS[method] & table_verbs, method


@pytest.mark.parametrize("sets", [(), NAMESPACED], ids=["cluster-wide", "namespaced"])
def test_the_chart_grants_exactly_the_calls_the_operator_makes(sets: tuple[str, ...]) -> None:
    """Cluster-wide: one ClusterRole with API_CALLS and kopf's CRD discovery, bound
    cluster-wide; namespaced: one ClusterRole with API_CALLS and the read and finalizer
    release of its own RoleBindings (by name), bound in each served namespace only. No
    ConfigMap list or watch anywhere."""
    roles = operator_roles(render(*sets))
    needed = set(API_CALLS.values())
    (role,) = roles
    assert role["kind"] == "ClusterRole"
    if not sets:
        assert granted(role) == needed | set(API_CALLS_CLUSTER_WIDE.values())
    else:
        # NB: bound only in the served namespaces (RoleBindings), never cluster-wide
        assert granted(role) == needed | set(API_CALLS_NAMESPACED.values())
        (binding_rule,) = [r for r in role["rules"] if r["resources"] == ["rolebindings"]]
        assert binding_rule["resourceNames"] == [f"{RELEASE}-passhat-served"]
    for role in roles:
        assert not {("", "configmaps", "list"), ("", "configmaps", "watch")} & granted(role)


@pytest.mark.parametrize("sets", [(), NAMESPACED], ids=["cluster-wide", "namespaced"])
def test_leases_are_read_and_written_by_name_only(sets: tuple[str, ...]) -> None:
    """The operator may get and update only its own Lease and the namespace claims
    (resourceNames), never another Lease (a controller-manager's, say); in namespaced mode
    a Role in the release namespace grants exactly that for the replicas' Lease."""
    objects = render(*sets)
    names = [f"{RELEASE}-passhat"] + ([f"{RELEASE}-passhat-leader"] if sets else [])
    roles = [o for o in objects if o["kind"] in ("Role", "ClusterRole")]
    lease_rules = [
        (o["metadata"]["name"], rule)
        for o in roles
        for rule in o["rules"]
        if rule["resources"] == ["leases"]
    ]
    assert {name for name, _ in lease_rules} == set(names)
    for _, rule in lease_rules:
        assert rule["apiGroups"] == ["coordination.k8s.io"]
        if rule["verbs"] != ["create"]:
            assert rule["verbs"] == ["get", "update"]
            assert rule["resourceNames"] == ["passhat-operator", f"{RELEASE}-passhat"]
    if sets:
        (leader,) = [o for o in roles if o["metadata"]["name"] == f"{RELEASE}-passhat-leader"]
        assert leader["metadata"]["namespace"] == "passhat-system"
        assert granted(leader) == {v for v in API_CALLS.values() if v[0] == "coordination.k8s.io"}


def test_metrics_admit_only_the_monitoring_namespace() -> None:
    """On by default: the operator pod's /metrics port admits the monitoring namespace's
    pods only (and the records API's port stays open to the kube-apiserver)."""
    (policy,) = by_kind(render(), "NetworkPolicy")
    (deployment,) = by_kind(render(), "Deployment")
    spec = policy["spec"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert spec["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert spec["policyTypes"] == ["Ingress"]
    metrics, records_api = spec["ingress"]
    assert metrics == {
        "from": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        ],
        "ports": [{"port": 8080, "protocol": "TCP"}],
    }
    assert records_api == {"ports": [{"port": 8443, "protocol": "TCP"}]}


def test_metrics_policy_values() -> None:
    """The monitoring namespace, extra peers and the metrics port are configurable; without
    the records API only /metrics is admitted; the policy can be turned off."""
    objects = render(
        "metrics.networkPolicy.monitoringNamespace=prom",
        "metrics.networkPolicy.extraFrom[0].ipBlock.cidr=10.0.0.0/16",
        "operator.metricsPort=9090",
        "recordsApi.enabled=false",
    )
    ((rule,),) = [p["spec"]["ingress"] for p in by_kind(objects, "NetworkPolicy")]
    assert rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "prom"}}},
        {"ipBlock": {"cidr": "10.0.0.0/16"}},
    ]
    assert rule["ports"] == [{"port": 9090, "protocol": "TCP"}]
    assert not by_kind(render("metrics.networkPolicy.enabled=false"), "NetworkPolicy")


def test_the_pod_key_is_a_kept_secret_mounted_into_the_operator() -> None:
    """The chart makes the key's Secret (kept on uninstall) and mounts it for
    --pod-key-file; with existingSecret it mounts that one and makes none."""
    objects = render("recordsApi.enabled=false")
    (secret,) = by_kind(objects, "Secret")
    assert secret["metadata"]["name"] == f"{RELEASE}-passhat-pod-key"
    assert secret["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert len(secret["data"]["key"]) >= 64
    (deployment,) = by_kind(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "--pod-key-file=/etc/passhat/pod-key/key" in container["args"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["pod-key"]["secret"]["secretName"] == secret["metadata"]["name"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["pod-key"] == {
        "name": "pod-key",
        "mountPath": "/etc/passhat/pod-key",
        "readOnly": True,
    }
    objects = render("recordsApi.enabled=false", "operator.podKey.existingSecret=mine")
    assert not by_kind(objects, "Secret")
    (deployment,) = by_kind(objects, "Deployment")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["pod-key"]["secret"]["secretName"] == "mine"
