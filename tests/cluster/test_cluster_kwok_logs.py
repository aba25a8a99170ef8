"""kwok fake nodes serve pod logs through the API server, like a kubelet.

hack/cluster/up.sh runs kwok's kubelet-like server on 127.0.0.1:10251 with a serving cert
of the cluster CA, and every fake node advertises that address and port; the API server
dials it for `pods/log` and checks the cert (`--kubelet-certificate-authority`). What a
pod logs comes from a kwok ClusterLogs object (kwok.x-k8s.io/v1alpha1) naming a
CRI-format log file; the benchmark's archive runs rely on it (docs/cluster.md).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.cluster.conftest import pod_manifest
from tests.cluster.kube_helpers import create_pod

KWOK_NODE_IP, KWOK_PORT = "127.0.0.1", 10251
STAMP = "2026-01-01T00:00:00.000000000Z"


def cri_log(lines: list[tuple[str, str]]) -> str:
    """A container log file in the CRI format: one `TIME STREAM F TEXT` line per line."""
    return "".join(f"{STAMP} {stream} F {text}\n" for stream, text in lines)


@pytest.fixture
def cluster_logs(
    kubectl: Callable[..., str], namespace: str, tmp_path: Path
) -> Iterator[Callable[[str], None]]:
    """`serve(text)`: kwok serves the CRI log `text` for every container in `namespace`."""
    name = f"test-{uuid.uuid4().hex[:8]}"

    def serve(text: str) -> None:
        path = tmp_path / f"{name}.log"
        path.write_text(text)
        manifest = {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "ClusterLogs",
            "metadata": {"name": name},
            "spec": {
                "selector": {"matchNamespaces": [namespace]},
                "logs": [{"logsFile": str(path)}],
            },
        }
        kubectl("apply", "-f", "-", input=json.dumps(manifest))

    yield serve
    kubectl("delete", "clusterlogs", name, "--ignore-not-found")


def phase(kubectl: Callable[..., str], namespace: str, name: str) -> str:
    return kubectl("get", "pod", "-n", namespace, name, "-o", "jsonpath={.status.phase}")


def test_fake_nodes_advertise_kwoks_server(kubectl: Callable[..., str]) -> None:
    """Every kwok node's InternalIP and kubelet port are kwok's loopback server."""
    nodes = json.loads(kubectl("get", "nodes", "-l", "type=kwok", "-o", "json"))["items"]
    assert nodes, "no kwok nodes"
    for node in nodes:
        status = node["status"]
        addresses = {a["type"]: a["address"] for a in status.get("addresses") or []}
        assert addresses.get("InternalIP") == KWOK_NODE_IP, node["metadata"]["name"]
        assert status["daemonEndpoints"]["kubeletEndpoint"]["Port"] == KWOK_PORT


def test_kwok_pod_log_comes_back_through_the_api_server(
    core_v1: client.CoreV1Api,
    kubectl: Callable[..., str],
    namespace: str,
    cluster_logs: Callable[[str], None],
    wait_for: Callable[..., Any],
) -> None:
    """`kubectl logs` of a finished kwok pod returns what its ClusterLogs file holds
    (stdout and stderr interleaved, the CRI framing stripped); limitBytes cuts it."""
    cluster_logs(cri_log([("stdout", "hello from a kwok pod"), ("stderr", "an error line")]))
    create_pod(core_v1, namespace, pod_manifest("logged", "exit 0", node="kwok", grace_s=0))
    wait_for(
        lambda: phase(kubectl, namespace, "logged") == "Succeeded",
        120,
        "the kwok pod to succeed",
    )
    out = kubectl("logs", "-n", namespace, "logged", "-c", "trial")
    assert out == "hello from a kwok pod\nan error line\n"
    head = kubectl("logs", "-n", namespace, "logged", "-c", "trial", "--limit-bytes", "5")
    assert head == "hello"


def test_a_100_kib_log_arrives_whole(
    core_v1: client.CoreV1Api,
    kubectl: Callable[..., str],
    namespace: str,
    cluster_logs: Callable[[str], None],
    wait_for: Callable[..., Any],
) -> None:
    """The size the benchmark archives (100 KiB per trial) comes back byte for byte."""
    lines = [("stdout", f"line {i:05d} " + "x" * 88) for i in range(1024)]  # 100 B each
    cluster_logs(cri_log(lines))
    create_pod(
        core_v1,
        namespace,
        pod_manifest(
            "big", "true", node="kwok", annotations={"passhat.dev/fake-run-forever": "true"}
        ),
    )
    wait_for(lambda: phase(kubectl, namespace, "big") == "Running", 120, "the kwok pod to run")
    data = kubectl("logs", "-n", namespace, "big", "-c", "trial")
    assert len(data) == 100 * 1024
    assert data == "".join(text + "\n" for _, text in lines)
