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
        "Job",
        "Lease",
        "NetworkPolicy",
        "PersistentVolumeClaim",
        "PodDisruptionBudget",
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


def test_namespaced_mode_has_rights_only_in_watched_namespaces() -> None:
    """watchNamespaces gives a RoleBinding per namespace to a ClusterRole that grants
    nothing by itself (no ClusterRoleBinding), each binding holding the operator-rights
    finalizer (a namespace being deleted keeps it until the operator let go: rights.py);
    a Role + RoleBinding for the leader Lease in the release namespace."""
    objects = render(*NAMESPACED, NO_RECORDS_API)
    assert not by_kind(objects, "ClusterRoleBinding")
    (cluster_role,) = by_kind(objects, "ClusterRole")
    roles = by_kind(objects, "Role")
    bindings = by_kind(objects, "RoleBinding")
    assert [r["metadata"]["namespace"] for r in roles] == [RELEASE_NS]
    served = sorted(bindings, key=lambda b: b["metadata"]["namespace"])
    assert [b["metadata"]["namespace"] for b in served] == [RELEASE_NS, "team-a", "team-b"]
    for binding in served[1:]:
        assert binding["metadata"]["name"] == "ph-passhat-served"
        assert binding["metadata"]["finalizers"] == ["passhat.dev/operator-rights"]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": cluster_role["metadata"]["name"],
        }
    assert "--rights-binding=ph-passhat-served" in operator_container(objects)["args"]
    loose = render(*NAMESPACED, NO_RECORDS_API, "drainOnUninstall=false")
    assert all("finalizers" not in b["metadata"] for b in by_kind(loose, "RoleBinding"))
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


def test_deployment_is_two_restricted_replicas_electing_a_leader() -> None:
    """Two replicas electing a leader on the chart's Lease, rolling updates that start a
    standby first, a PodDisruptionBudget; without election one replica and Recreate.
    Probes on /healthz, resources, restricted security contexts."""
    objects = render(NO_RECORDS_API)
    (deployment,) = by_kind(objects, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    (lease,) = by_kind(objects, "Lease")
    assert lease["metadata"] == {**lease["metadata"], "name": "ph-passhat", "namespace": RELEASE_NS}
    assert "spec" not in lease  # NB: the operator's to write; helm never patches it
    args = operator_container(objects)["args"]
    assert f"--lease={RELEASE_NS}/ph-passhat" in args
    assert {"--lease-duration=10", "--renew-deadline=7", "--retry-period=2"} <= set(args)
    (pdb,) = by_kind(objects, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= (
        spec["template"]["metadata"]["labels"].items()
    )
    # NB: the default record store is a ReadWriteOnce claim: both replicas on its node
    (term,) = spec["template"]["spec"]["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == pdb["spec"]["selector"]["matchLabels"]
    (s3,) = by_kind(render(NO_RECORDS_API, "records.store=none"), "Deployment")
    assert "affinity" not in s3["spec"]["template"]["spec"]
    single = render(NO_RECORDS_API, "leaderElection.enabled=false")
    (one,) = by_kind(single, "Deployment")
    assert one["spec"]["replicas"] == 1 and one["spec"]["strategy"] == {"type": "Recreate"}
    assert not by_kind(single, "Lease") and not by_kind(single, "PodDisruptionBudget")
    assert not [a for a in operator_container(single)["args"] if a.startswith("--lease")]
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
        ("replicas=2", "replicas"),
        ("replicaCount=0", "replicaCount"),
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


def test_values_of_an_older_release_get_the_day2_defaults() -> None:
    """`helm upgrade --reuse-values` from 0.3.x keeps only the old values: without the new
    keys (null here deletes them) the chart still renders, with their defaults."""
    objects = render(
        NO_RECORDS_API,
        "leaderElection=null",
        "podDisruptionBudget=null",
        "drainOnUninstall=null",
        "drainTimeoutSeconds=null",
        "replicaCount=null",
    )
    (deployment,) = by_kind(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert f"--lease={RELEASE_NS}/ph-passhat" in operator_container(objects)["args"]
    assert by_kind(objects, "PodDisruptionBudget") and by_kind(objects, "Lease")
    (job,) = by_kind(objects, "Job")
    assert job["spec"]["activeDeadlineSeconds"] == 300


def test_uninstall_runs_the_drain_first() -> None:
    """A pre-delete hook Job runs `passhat operator drain` with the operator's account,
    arguments (namespaces, Lease, RoleBinding, record store) and pod key, restricted like
    the operator; deleted once it succeeded. drainOnUninstall=false drops it."""
    objects = render(*NAMESPACED, NO_RECORDS_API, "records.store=none")
    (job,) = by_kind(objects, "Job")
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "pre-delete"
    assert annotations["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
    pod = job["spec"]["template"]["spec"]
    (deployment,) = by_kind(objects, "Deployment")
    operator = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == operator["serviceAccountName"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["args"][:2] == ["operator", "drain"]
    shared = [a for a in operator_container(objects)["args"] if not a.startswith("--metrics")]
    assert container["args"][2:] == shared[1:]
    assert "--rights-binding=ph-passhat-served" in container["args"]
    assert container["securityContext"] == operator_container(objects)["securityContext"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["pod-key"] == {v["name"]: v for v in operator["volumes"]}["pod-key"]
    assert not by_kind(render(NO_RECORDS_API, "drainOnUninstall=false"), "Job")
