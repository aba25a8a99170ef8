"""The test cluster itself: versions, both node kinds, admission, audit log."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.utils import parse_quantity as _parse_quantity

from tests.cluster.kube_helpers import as_body, create_pod, raw_json

# NB: kubernetes.utils carries no annotations, even in the client's typed releases.
parse_quantity: Callable[[str], Decimal] = _parse_quantity


def test_server_and_tools_report_pinned_versions(cluster: Any, kubectl: Callable[..., str]) -> None:
    """The API server is v1.34.x and kubectl, helm, promtool and prometheus run."""
    version = json.loads(kubectl("version", "-o", "json"))
    assert version["serverVersion"]["gitVersion"].startswith("v1.34.")
    assert version["clientVersion"]["gitVersion"].startswith("v1.34.")
    for tool in (
        ["helm", "version", "--short"],
        ["promtool", "--version"],
        ["prometheus", "--version"],
    ):
        proc = subprocess.run(tool, env=cluster.env(), capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"{tool[0]}: {proc.stderr}"


def test_real_and_kwok_nodes_are_ready(core_v1: client.CoreV1Api) -> None:
    """One real kubelet node and at least one tainted kwok node are Ready."""
    listed = raw_json(core_v1.list_node(_preload_content=False))
    nodes: dict[str, dict[str, Any]] = {n["metadata"]["name"]: n for n in listed["items"]}

    def ready(node: dict[str, Any]) -> bool:
        conditions = node["status"].get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    real = nodes["passhat-node"]
    assert ready(real)
    assert real["metadata"]["labels"]["type"] == "real"
    # NB: other tests may add kwok nodes of their own; the standing ones are kwok-node-N.
    kwok = [n for name, n in nodes.items() if name.startswith("kwok-node-")]
    assert kwok, "no kwok node"
    for node in kwok:
        meta = node["metadata"]
        assert meta["annotations"]["kwok.x-k8s.io/node"] == "fake"
        assert ready(node), meta["name"]
        assert meta["labels"]["type"] == "kwok"
        assert any(
            t["key"] == "kwok.x-k8s.io/node" and t["effect"] == "NoSchedule"
            for t in node["spec"]["taints"]
        )
        assert parse_quantity(node["status"]["allocatable"]["pods"]) >= 1000


def test_restricted_namespace_admits_restricted_pod_and_rejects_privileged(
    core_v1: client.CoreV1Api, namespace: str, pod_manifest: Callable[..., dict[str, Any]]
) -> None:
    """PodSecurity `enforce=restricted` admits a restricted pod and rejects a privileged one."""
    core_v1.patch_namespace(
        namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    )
    restricted = pod_manifest("restricted", "true")
    restricted["spec"]["securityContext"] = {
        "runAsNonRoot": True,
        "runAsUser": 65534,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    restricted["spec"]["containers"][0]["securityContext"] = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    create_pod(core_v1, namespace, restricted, dry_run="All")

    privileged = pod_manifest("privileged", "true")
    privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    with pytest.raises(ApiException) as err:
        create_pod(core_v1, namespace, privileged, dry_run="All")
    assert err.value.status == 403
    assert "violates PodSecurity" in str(err.value.body)


def test_audit_log_records_writes_with_user_agent(
    cluster: Any, api_client: client.ApiClient, namespace: str, wait_for: Callable[..., Any]
) -> None:
    """Every API write lands in .cluster/logs/audit.log with its user agent."""
    agent = f"passhat-audit-test/{uuid.uuid4().hex[:8]}"
    audit = cluster.logs / "audit.log"
    offset = audit.stat().st_size if audit.exists() else 0
    api_client.user_agent = agent
    try:
        configmap = {"metadata": {"name": "audited"}, "data": {"k": "v"}}
        client.CoreV1Api(api_client).create_namespaced_config_map(
            namespace, as_body(configmap, client.V1ConfigMap)
        )
    finally:
        api_client.user_agent = "OpenAPI-Generator/python"

    def found() -> dict[str, Any] | None:
        with audit.open("rb") as f:
            # NB: read only what was appended (from the start if the log was rotated).
            f.seek(offset if f.seek(0, 2) >= offset else 0)
            for line in f:
                if agent.encode() in line:
                    event: dict[str, Any] = json.loads(line)
                    return event
        return None

    event = wait_for(found, 120, "the audit event of the configmap create")
    assert event["verb"] == "create"
    assert event["level"] == "Metadata"
    assert event["objectRef"]["resource"] == "configmaps"
    assert event["objectRef"]["namespace"] == namespace
    assert event["user"]["username"] == "admin"
