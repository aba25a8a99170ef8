"""The Helm chart renders what a shared cluster needs: both install modes, least privilege.

`helm lint --strict` and `helm template` run on charts/passhat with the helm that
hack/cluster builds (tests/unit/chart_helpers.py); the rendered objects are
checked as data, and bad values must be refused by values.schema.json before anything renders.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.unit.chart_helpers import CHART, KUBE_VERSION, helm

RELEASE = "ph"
RELEASE_NS = "passhat-system"


def render(*sets: str) -> list[dict[str, Any]]:
    """The chart's objects (without CRDs) for `--set` values."""
    args = ["template", RELEASE, str(CHART), "--namespace", RELEASE_NS]
    args += ["--kube-version", KUBE_VERSION]
    for value in sets:
        args += ["--set", value]
    return [doc for doc in yaml.safe_load_all(helm(*args).stdout) if doc]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The objects of one kind."""
    return [o for o in objects if o["kind"] == kind]


def operator_container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The operator container of the one Deployment."""
    (deployment,) = by_kind(objects, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


NAMESPACED = ("watchNamespaces={team-a,team-b}",)
# The records API's objects are checked apart (test_chart_records_api.py).
NO_RECORDS_API = "recordsApi.enabled=false"


@pytest.mark.parametrize("sets", [(), NAMESPACED], ids=["cluster-wide", "namespaced"])
def test_lint_strict_is_clean(sets: tuple[str, ...]) -> None:
    """`helm lint --strict` passes in both install modes, monitoring extras on."""
    extras = (
        "serviceMonitor.enabled=true",
        "prometheusRule.enabled=true",
        "dashboards.enabled=true",
    )
    args = ["lint", "--strict", str(CHART)]
    for value in (*sets, *extras):
        args += ["--set", value]
    out = helm(*args).stdout
    assert "1 chart(s) linted, 0 chart(s) failed" in out


def test_default_install_is_cluster_wide() -> None:
    """Without watchNamespaces: one ClusterRole + binding, no Roles, no --namespace (and
    the embedded record store's claim: test_chart_records_store.py)."""
    objects = render(NO_RECORDS_API)
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "NetworkPolicy",
        "PersistentVolumeClaim",
        "Secret",
        "Service",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    args = operator_container(objects)["args"]
    assert args[0] == "operator"
    assert "--metrics-port=8080" in args
    assert not [a for a in args if a.startswith("--namespace")]
    (binding,) = by_kind(objects, "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "ph-passhat", "namespace": RELEASE_NS}
    ]


def test_namespaced_mode_has_roles_only_in_watched_namespaces() -> None:
    """watchNamespaces gives a Role + RoleBinding per namespace and nothing cluster-wide."""
    objects = render(*NAMESPACED, NO_RECORDS_API)
    assert not by_kind(objects, "ClusterRole") and not by_kind(objects, "ClusterRoleBinding")
    roles = by_kind(objects, "Role")
    bindings = by_kind(objects, "RoleBinding")
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    for binding in bindings:
        assert binding["subjects"][0]["namespace"] == RELEASE_NS
    args = operator_container(objects)["args"]
    assert [a for a in args if a.startswith("--namespace")] == [
        "--namespace=team-a",
        "--namespace=team-b",
    ]


@pytest.mark.parametrize("sets", [(), NAMESPACED], ids=["cluster-wide", "namespaced"])
def test_rbac_is_least_privilege(sets: tuple[str, ...]) -> None:
    """No Secrets, no wildcards, no exec/eviction/escalation rights in any rule."""
    objects = render(*sets)
    rules = [rule for o in objects if o["kind"] in ("Role", "ClusterRole") for rule in o["rules"]]
    assert rules
    granted: set[tuple[str, str, str]] = set()
    for rule in rules:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    granted.add((group, resource, verb))
    resources = {resource for _, resource, _ in granted}
    assert not resources & {"secrets", "pods/exec", "pods/attach", "pods/eviction"}
    assert not {verb for _, _, verb in granted} & {"escalate", "bind", "impersonate"}
    for verb in ("get", "list", "watch", "create", "patch", "delete"):
        assert ("", "pods", verb) in granted
    assert ("passhat.dev", "consistencyevals/status", "patch") in granted
    assert ("", "configmaps", "get") in granted
    assert not {("", "configmaps", v) for v in ("list", "watch", "create")} & granted


def test_deployment_is_one_restricted_replica() -> None:
    """One replica, Recreate, probes on /healthz, resources, restricted security contexts."""
    objects = render(NO_RECORDS_API)
    (deployment,) = by_kind(objects, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = operator_container(objects)
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["readOnlyRootFilesystem"] is True
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert container["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]


def test_image_values_reach_the_pod() -> None:
    """image.repository, image.tag and image.pullPolicy (as the cluster tests set them)."""
    container = operator_container(
        render(
            "image.repository=localhost/passhat/passhat",
            "image.tag=test",
            "image.pullPolicy=Never",
        )
    )
    assert container["image"] == "localhost/passhat/passhat:test"
    assert container["imagePullPolicy"] == "Never"
    default = operator_container(render())["image"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert default.endswith(":" + chart["appVersion"])


def test_metrics_service_selects_the_operator() -> None:
    """The metrics Service's selector matches the pod's labels, on the named port."""
    objects = render(NO_RECORDS_API)
    (service,) = by_kind(objects, "Service")
    (deployment,) = by_kind(objects, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def test_monitoring_extras_render_when_enabled() -> None:
    """ServiceMonitor, PrometheusRule and the dashboard ConfigMap (label configurable)."""
    objects = render(
        "serviceMonitor.enabled=true",
        "prometheusRule.enabled=true",
        "dashboards.enabled=true",
        "dashboards.label=grafana_dashboard_custom",
        "dashboards.labelValue=yes",
    )
    (monitor,) = by_kind(objects, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    (rule,) = by_kind(objects, "PrometheusRule")
    alerts = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert alerts == {"PasshatGateFailing", "PasshatInfraErrorRatioHigh", "PasshatOperatorDown"}
    (configmap,) = by_kind(objects, "ConfigMap")
    assert configmap["metadata"]["labels"]["grafana_dashboard_custom"] == "yes"
    assert list(configmap["data"]) == ["passhat.json"]


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("replicaCount=2", "replicaCount"),
        ("image.pullPolicy=Sometimes", "pullPolicy"),
        ("watchNamespaces={Team_A}", "watchNamespaces"),
        ("operator.metricsPort=80", "metricsPort"),
        ("operator.allowPrivilegedTrials=yes", "allowPrivilegedTrials"),
        ("prometheusRule.infraErrorRatio.threshold=2", "threshold"),
        ("serviceMonitor.interval=often", "interval"),
        ("rbac.createSecrets=true", "createSecrets"),
    ],
)
def test_schema_refuses_bad_values(value: str, field: str) -> None:
    """values.schema.json refuses unknown keys and bad values, naming the field."""
    proc = helm(
        "template", RELEASE, str(CHART), "--kube-version", KUBE_VERSION, "--set", value, check=False
    )
    assert proc.returncode != 0
    assert "values don't meet the specifications of the schema" in proc.stderr
    assert field in proc.stderr


def test_every_value_is_commented() -> None:
    """Each key of values.yaml has a comment above it, or sits inside a commented value."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    ancestors: list[tuple[int, bool]] = []  # (indent, commented) of the enclosing keys
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "-")) or ":" not in stripped:
            continue
        indent = len(line) - len(line.lstrip())
        while ancestors and ancestors[-1][0] >= indent:
            ancestors.pop()
        commented = index > 0 and lines[index - 1].strip().startswith("#")
        section = stripped.endswith(":")  # a block of keys, each commented on its own
        inside_value = any(c for _, c in ancestors)
        assert commented or section or inside_value, f"values.yaml:{index + 1}: {stripped}"
        ancestors.append((indent, commented))


def test_renders_for_helms_default_kubernetes_version() -> None:
    """Without --kube-version, `helm template` assumes its own Kubernetes version; the chart's
    kubeVersion must accept it (hack/cluster builds helm with the ldflags that set it)."""
    version = helm("version", "--template", "{{.Version}}").stdout
    proc = helm("template", RELEASE, str(CHART), "--namespace", RELEASE_NS, check=False)
    assert proc.returncode == 0, f"helm {version}: {proc.stderr}"
