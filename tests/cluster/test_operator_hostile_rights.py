"""A namespace admin deletes the operator's RoleBinding in their namespace; the operator
keeps serving every other namespace, and serves theirs again once its rights are back.

On the real API server with the operator as a process running as a service account whose
only rights are a RoleBinding in each of two namespaces (namespaced mode, as the chart
installs it). Kubernetes' `admin` role may delete RoleBindings in its namespace, and the
binding's finalizer is removable by the same right. Before session 14 a namespace without
rights stopped the operator for everyone: at start the stranded-pod sweep raised, and kopf
retried its start-up activity every 60 s without serving anything; running, kopf gave the
namespace's watch up after 8 retries and the whole operator exited. Now team-b's eval
completes, the operator is still running past the point where kopf gave up (about a
minute), and once team-a's binding is back its eval completes too.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import yaml
from kubernetes import client

from tests.cluster.conftest import Cluster, fresh_namespace
from tests.cluster.operator_helpers import (
    OperatorProcess,
    create_eval,
    delete_evals,
    eval_manifest,
    install_crd,
    wait_for_condition,
)

# What the operator calls in a served namespace (the chart's rules, without Leases).
RULES = [
    {
        "apiGroups": ["passhat.dev"],
        "resources": ["consistencyevals", "consistencyevals/status"],
        "verbs": ["get", "list", "watch", "patch", "update"],
    },
    {
        "apiGroups": [""],
        "resources": ["pods"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    {"apiGroups": [""], "resources": ["pods/log", "configmaps"], "verbs": ["get"]},
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
]
# kopf gave a call up after 8 retries, 54 s of backoff: watched well past that.
PAST_GIVING_UP_S = 90


def binding(namespace: str, role: str, account: tuple[str, str]) -> dict[str, object]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "passhat-operator", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "namespace": account[0], "name": account[1]}],
    }


def account_kubeconfig(kubectl: Callable[..., str], namespace: str, path: Path) -> Path:
    """A kubeconfig for service account `op` of `namespace` (a token of one hour)."""
    token = kubectl("create", "token", "op", "-n", namespace, "--duration=1h").strip()
    admin = json.loads(kubectl("config", "view", "--raw", "-o", "json"))
    cluster = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "op", "user": {"token": token}}],
        "contexts": [{"name": "op", "context": {"cluster": "c", "user": "op"}}],
        "current-context": "op",
    }
    assert base64.b64decode(cluster["certificate-authority-data"])  # NB: a real CA
    path.write_text(yaml.safe_dump(config))
    return path


@contextlib.contextmanager
def cluster_role(kubectl: Callable[..., str], name: str) -> Iterator[str]:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": RULES,
    }
    kubectl("apply", "-f", "-", input=yaml.safe_dump(role))
    try:
        yield name
    finally:
        kubectl("delete", "clusterrole", name, "--ignore-not-found", check=False)


def test_a_deleted_role_binding_costs_its_namespace_only(
    cluster: Cluster,
    kubectl: Callable[..., str],
    core_v1: client.CoreV1Api,
    api_client: client.ApiClient,
    tmp_path: Path,
) -> None:
    """team-a's binding deleted before the operator (re)starts: it starts, serves team-b
    and stays up; with the binding back, team-a's eval completes."""
    install_crd(kubectl)
    suffix = str(int(time.time()) % 100000)
    with (
        cluster_role(kubectl, f"passhat-test-rights-{suffix}") as role,
        fresh_namespace(core_v1, f"rights-a-{suffix}") as team_a,
        fresh_namespace(core_v1, f"rights-b-{suffix}") as team_b,
    ):
        kubectl("create", "serviceaccount", "op", "-n", team_b)
        for namespace in (team_a, team_b):
            kubectl(
                "apply", "-f", "-", input=yaml.safe_dump(binding(namespace, role, (team_b, "op")))
            )
        kubeconfig = account_kubeconfig(kubectl, team_b, tmp_path / "op.kubeconfig")
        kubectl("delete", "rolebinding", "passhat-operator", "-n", team_a)
        process = OperatorProcess(
            kubeconfig=kubeconfig, namespaces=[team_a, team_b], log_path=tmp_path / "op.log"
        )
        process.start()
        try:
            small = eval_manifest("small", tasks=2, trials=2, parallelism=4, scripted=False)
            create_eval(api_client, team_b, small)
            wait_for_condition(
                api_client, team_b, "small", "Complete", timeout=240, operator=process
            )
            deadline = time.monotonic() + PAST_GIVING_UP_S
            while time.monotonic() < deadline:
                process.assert_running()
                time.sleep(2)
            manifest_a = yaml.safe_dump(binding(team_a, role, (team_b, "op")))
            kubectl("apply", "-f", "-", input=manifest_a)
            create_eval(api_client, team_a, small)
            wait_for_condition(
                api_client, team_a, "small", "Complete", timeout=240, operator=process
            )
        finally:
            if process.proc is not None and process.proc.poll() is None:
                delete_evals(kubectl, team_a)
                delete_evals(kubectl, team_b)
            process.stop()
