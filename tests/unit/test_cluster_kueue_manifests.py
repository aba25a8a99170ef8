"""hack/cluster/kueue_manifests.py: the test cluster's Kueue webhooks touch nothing but
Kueue's own kinds and the queued pods of namespaces that asked for Kueue."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "cluster" / "kueue_manifests.py"


def hook(name: str, group: str, resource: str) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"service": {"name": "webhook-service", "path": f"/mutate-{resource}"}},
        "rules": [{"apiGroups": [group], "resources": [resource], "operations": ["CREATE"]}],
        "failurePolicy": "Fail",
    }


def rewrite(what: str, docs: list[dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"PEM")
    out = subprocess.run(
        [sys.executable, str(SCRIPT), what, "--base", "https://127.0.0.1:9543", "--ca", str(ca)],
        input=yaml.safe_dump_all(docs),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def test_only_pod_and_kueue_webhooks_are_kept_and_pods_are_fenced(tmp_path: Path) -> None:
    """Job/Deployment webhooks are dropped; pod ones see only labelled namespaces and pods
    with a queue name; every webhook is called by URL with the cluster CA."""
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mutating-webhook-configuration"},
        "webhooks": [
            hook("mjob.kb.io", "batch", "jobs"),
            hook("mdeployment.kb.io", "apps", "deployments"),
            hook("mpod.kb.io", "", "pods"),
            hook("mworkload.kb.io", "kueue.x-k8s.io", "workloads"),
        ],
    }
    [out] = rewrite("webhooks", [config], tmp_path)
    assert out["metadata"] == {"name": "kueue-mutating-webhook-configuration"}
    assert [item["name"] for item in out["webhooks"]] == ["mpod.kb.io", "mworkload.kb.io"]
    pod, workload = out["webhooks"]
    assert pod["namespaceSelector"] == {"matchLabels": {"passhat.dev/test-kueue": "true"}}
    assert pod["objectSelector"] == {
        "matchExpressions": [{"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}]
    }
    assert "namespaceSelector" not in workload
    assert pod["clientConfig"] == {"url": "https://127.0.0.1:9543/mutate-pods", "caBundle": "UEVN"}


def test_crd_conversion_webhooks_are_called_by_url(tmp_path: Path) -> None:
    """A CRD converted by webhook names Kueue's URL and the CA; others are unchanged."""
    converted = {
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "workloads.kueue.x-k8s.io"},
        "spec": {
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"service": {"name": "s", "path": "/convert"}},
                    "conversionReviewVersions": ["v1"],
                },
            }
        },
    }
    plain = {"kind": "CustomResourceDefinition", "metadata": {"name": "x"}, "spec": {}}
    out = rewrite("crds", [converted, plain], tmp_path)
    assert out[0]["spec"]["conversion"]["webhook"] == {
        "clientConfig": {"url": "https://127.0.0.1:9543/convert", "caBundle": "UEVN"},
        "conversionReviewVersions": ["v1"],
    }
    assert out[1] == plain
