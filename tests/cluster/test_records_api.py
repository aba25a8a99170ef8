"""The records API through the real kube-apiserver's aggregation layer, with real users.

`passhat operator` runs as a host process with a directory store and the records API on
the node's IP; a selector-less Service with an EndpointSlice at that IP and port, and the
APIService `v1alpha1.records.passhat.dev` with the test's serving CA, make the
kube-apiserver proxy `/apis/records.passhat.dev/...` to it (the cluster routes aggregated
APIs to endpoint IPs: there is no kube-proxy). Records are written into the store directly
with `StoreLayout`, so the read path is tested apart from the archiver.

Tenancy: a user with `get pods/log` in namespace A reads A's trials and transcripts and is
refused B's; a user with every right on the evals but not pods/log is refused; nobody
reaches the server without the front proxy's certificate. The APIService is removed before
the operator stops (an unavailable APIService holds every namespace deletion).
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from passhat.operator.records_client import RecordsApiError, RecordsClient
from passhat.records import FileStore, StoreLayout
from tests.cluster.conftest import Cluster, fresh_namespace, wait_for
from tests.cluster.operator_helpers import (
    GROUP,
    PLURAL,
    VERSION,
    create_eval,
    install_crd,
    operator_in,
    wait_for_condition,
)
from tests.tls_helpers import load_ca, make_ca

API_SERVICE = "v1alpha1.records.passhat.dev"
SERVICE = "passhat-records-api"


@dataclass
class RecordsSetup:
    """What a test needs: namespaces, the store, the server's address, kubeconfigs."""

    ns_a: str
    ns_b: str
    store: FileStore
    node_ip: str
    port: int
    tmp: Path
    cluster: Cluster
    alice_kubeconfig: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        return int(sock.getsockname()[1])


def _node_ip(core: client.CoreV1Api) -> str:
    node = core.read_node("passhat-node")
    assert node.status is not None and node.status.addresses
    return next(a.address for a in node.status.addresses if a.type == "InternalIP")


def _user_kubeconfig(cluster: Cluster, tmp: Path, user: str, groups: list[str]) -> str:
    """A kubeconfig of a real user: a client cert of the test cluster's CA."""
    pki = cluster.root / ".cluster" / "pki"
    cert, key = load_ca(pki / "ca.crt", pki / "ca.key").issue_files(tmp, user, user, orgs=groups)
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": user, "user": {"client-certificate": cert, "client-key": key}}],
        "contexts": [
            {"name": user, "context": {"cluster": admin["clusters"][0]["name"], "user": user}}
        ],
        "current-context": user,
    }
    path = tmp / f"{user}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def archive(
    store: FileStore, namespace: str, name: str, uid: str, *, tasks: list[str], created: str
) -> None:
    """An eval's manifest, one record and one transcript per task (trial 0, attempts 0-1)."""
    layout = StoreLayout(namespace, name, uid)
    manifest = {
        "namespace": namespace,
        "name": name,
        "uid": uid,
        "creationTimestamp": created,
        "taskIds": tasks,
        "spec": {"trials": 1},
    }
    store.put(layout.eval_key, json.dumps(manifest).encode())
    for index, task in enumerate(tasks):
        for attempt in (1, 0):
            outcome = "infra_error" if attempt == 0 else "pass"
            record = {"task_id": task, "trial": 0, "attempt": attempt, "outcome": outcome}
            text = f"==> container agent <==\n{namespace}/{name} {task} attempt {attempt}\n"
            store.put(layout.transcript_key(index, 0, attempt), text.encode())
            store.put(layout.record_key(index, 0, attempt), json.dumps(record).encode())


def _manifests(setup_ns: str, node_ip: str, port: int, ca_pem: bytes, suffix: str) -> str:
    """The Service and its EndpointSlice at the operator's port, the APIService, the users' pass."""
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": setup_ns},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]},
        },
        # NB: the aggregator resolves a Service through its EndpointSlices (v1.34).
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{SERVICE}-node",
                "namespace": setup_ns,
                "labels": {"kubernetes.io/service-name": SERVICE},
            },
            "addressType": "IPv4",
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
            "endpoints": [{"addresses": [node_ip], "conditions": {"ready": True}}],
        },
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": API_SERVICE},
            "spec": {
                "group": "records.passhat.dev",
                "version": "v1alpha1",
                "service": {"name": SERVICE, "namespace": setup_ns, "port": 443},
                "caBundle": base64.b64encode(ca_pem).decode(),
                "groupPriorityMinimum": 1000,
                "versionPriority": 15,
            },
        },
        # What the chart grants every authenticated user: past the kube-apiserver's own check.
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"records-reader-{suffix}"},
            "rules": [
                {
                    "apiGroups": ["records.passhat.dev"],
                    "resources": ["evals/trials", "evals/transcript"],
                    "verbs": ["get"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"records-reader-{suffix}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"records-reader-{suffix}",
            },
            "subjects": [
                {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Group",
                    "name": "system:authenticated",
                }
            ],
        },
    ]
    return "\n---\n".join(yaml.safe_dump(o) for o in objects)


def _grants(ns_a: str) -> str:
    """alice (group team-a) may read pods' logs in A; bob may do anything with evals and
    their records paths in A, and get pods, but not pods/log."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "log-reader", "namespace": ns_a},
        "rules": [{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}],
    }
    bob_role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "eval-admin", "namespace": ns_a},
        "rules": [
            {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["*"]},
            {"apiGroups": ["records.passhat.dev"], "resources": ["*"], "verbs": ["*"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        ],
    }

    def binding(name: str, role_name: str, kind: str, subject: str) -> dict[str, Any]:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": ns_a},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": subject}],
        }

    objects = [
        role,
        bob_role,
        binding("team-a-logs", "log-reader", "Group", "team-a"),
        binding("bob-evals", "eval-admin", "User", "bob"),
    ]
    return "\n---\n".join(yaml.safe_dump(o) for o in objects)


@pytest.fixture
def records(
    cluster: Cluster,
    kubectl: Callable[..., str],
    core_v1: client.CoreV1Api,
    tmp_path: Path,
) -> Iterator[RecordsSetup]:
    """Two namespaces, the operator serving the records API, the APIService Available."""
    suffix = uuid.uuid4().hex[:6]
    store = FileStore(str(tmp_path / "store"))
    node_ip = _node_ip(core_v1)
    port = _free_port()
    serving_ca = make_ca("records-api-test-ca")
    with (
        fresh_namespace(core_v1, f"t-records-a-{suffix}") as ns_a,
        fresh_namespace(core_v1, f"t-records-b-{suffix}") as ns_b,
    ):
        cert, key = serving_ca.issue_files(
            tmp_path, "serving", f"{SERVICE}.{ns_a}.svc", dns=[f"{SERVICE}.{ns_a}.svc"], server=True
        )
        install_crd(kubectl)
        args = [
            "--records-store",
            f"file://{store.root}",
            "--records-api-port",
            str(port),
            "--records-api-cert",
            cert,
            "--records-api-key",
            key,
        ]
        with operator_in(cluster, kubectl, ns_b, tmp_path / "operator.log", extra_args=args) as op:
            kubectl(
                "apply", "-f", "-", input=_manifests(ns_a, node_ip, port, serving_ca.pem, suffix)
            )
            try:
                kubectl("apply", "-f", "-", input=_grants(ns_a))

                def available() -> bool:
                    op.assert_running()
                    out = kubectl("get", "apiservice", API_SERVICE, "-o", "json", check=False)
                    conditions = json.loads(out or "{}").get("status", {}).get("conditions", [])
                    return any(
                        c["type"] == "Available" and c["status"] == "True" for c in conditions
                    )

                wait_for(available, 120, f"APIService {API_SERVICE} Available")
                alice = _user_kubeconfig(cluster, tmp_path, "alice", ["team-a"])
                yield RecordsSetup(
                    ns_a, ns_b, store, node_ip, port, tmp_path, cluster, alice_kubeconfig=alice
                )
            finally:
                kubectl("delete", "apiservice", API_SERVICE, "--ignore-not-found", check=False)
                kubectl(
                    "delete",
                    "clusterrolebinding,clusterrole",
                    f"records-reader-{suffix}",
                    "--ignore-not-found",
                    check=False,
                )


def raw(cluster: Cluster, path: str, *as_user: str) -> tuple[bool, str]:
    """`kubectl get --raw PATH --as ...` as admin impersonating: (succeeded, stdout or stderr)."""
    proc = subprocess.run(
        [str(cluster.bin / "kubectl"), "get", "--raw", path, *as_user],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=cluster.env(),
    )
    return proc.returncode == 0, proc.stdout if proc.returncode == 0 else proc.stderr


def test_team_reads_its_own_records_and_transcripts(records: RecordsSetup) -> None:
    """alice (pods/log in A) reads A's trials, in task/trial/attempt order, and a transcript,
    through the kube-apiserver with her own client certificate; the eval itself never
    existed as an object (records outlive their eval)."""
    archive(
        records.store,
        records.ns_a,
        "ev",
        "uid-1",
        tasks=["t0", "t/1"],
        created="2026-01-01T00:00:00Z",
    )
    reader = RecordsClient(records.alice_kubeconfig)
    manifest, rows = reader.records(records.ns_a, "ev")
    assert manifest["uid"] == "uid-1" and manifest["taskIds"] == ["t0", "t/1"]
    assert [(r["task_id"], r["trial"], r["attempt"]) for r in rows] == [
        ("t0", 0, 0),
        ("t0", 0, 1),
        ("t/1", 0, 0),
        ("t/1", 0, 1),
    ]
    text = reader.transcript(records.ns_a, "ev", task_id="t/1", trial=0, attempt=1)
    assert text == f"==> container agent <==\n{records.ns_a}/ev t/1 attempt 1\n".encode()
    assert reader.transcript(records.ns_a, "ev", task_id="t/1", trial=0, attempt=7) is None


def test_other_namespace_and_missing_right_are_refused(records: RecordsSetup) -> None:
    """alice is refused B's records; bob (every right on A's evals, no pods/log) is refused
    A's; each refusal is a Forbidden Status naming the missing right."""
    archive(records.store, records.ns_a, "ev", "uid-a", tasks=["t"], created="2026-01-01T00:00:00Z")
    archive(records.store, records.ns_b, "ev", "uid-b", tasks=["t"], created="2026-01-01T00:00:00Z")
    reader = RecordsClient(records.alice_kubeconfig)
    with pytest.raises(RecordsApiError) as err:
        reader.records(records.ns_b, "ev")
    assert err.value.code == 403
    assert f'user "alice" cannot get pods/log in namespace "{records.ns_b}"' in str(err.value)
    with pytest.raises(RecordsApiError) as err:
        reader.transcript(records.ns_b, "ev", task_id="t", trial=0, attempt=0)
    assert err.value.code == 403
    base = f"/apis/records.passhat.dev/v1alpha1/namespaces/{records.ns_a}/evals/ev"
    ok, out = raw(records.cluster, f"{base}/trials", "--as", "bob")
    assert not ok and f'user "bob" cannot get pods/log in namespace "{records.ns_a}"' in out, out
    ok, out = raw(records.cluster, f"{base}/transcript?task=t&trial=0&attempt=0", "--as", "bob")
    assert not ok and "Forbidden" in out, out
    # impersonated alice, as kubectl --as sends her: the same answers as her certificate
    team_a = ["--as", "alice", "--as-group", "team-a"]
    ok, out = raw(records.cluster, f"{base}/trials", *team_a)
    assert ok and json.loads(out)["metadata"]["uid"] == "uid-a", out
    other = base.replace(records.ns_a, records.ns_b)
    ok, out = raw(records.cluster, f"{other}/trials", *team_a)
    assert not ok and "Forbidden" in out, out


def test_live_eval_uid_is_read_and_deleted_evals_fall_back_to_the_newest(
    records: RecordsSetup, api_client: client.ApiClient, kubectl: Callable[..., str]
) -> None:
    """With the eval alive its uid's records are read (live: true); once it is deleted the
    newest archived uid answers; ?uid= picks an older one."""
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConsistencyEval",
        "metadata": {"name": "ev"},
        "spec": {
            "tasks": [{"id": "t"}],
            "trials": 1,
            "trial": {"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}},
        },
    }
    live_uid = create_eval(api_client, records.ns_a, body)["metadata"]["uid"]
    archive(
        records.store, records.ns_a, "ev", live_uid, tasks=["live"], created="2026-01-01T00:00:00Z"
    )
    archive(
        records.store, records.ns_a, "ev", "newer", tasks=["new"], created="2026-06-01T00:00:00Z"
    )
    reader = RecordsClient(records.alice_kubeconfig)
    manifest, _ = reader.records(records.ns_a, "ev")
    assert manifest["uid"] == live_uid
    kubectl("delete", PLURAL, "ev", "-n", records.ns_a, "--wait=true")
    assert reader.records(records.ns_a, "ev")[0]["uid"] == "newer"
    assert reader.records(records.ns_a, "ev", uid=live_uid)[0]["taskIds"] == ["live"]


def test_nobody_reaches_the_server_without_the_front_proxy_cert(records: RecordsSetup) -> None:
    """Straight to the server's port: no client cert (even claiming system:masters in
    X-Remote-* headers) is 401; a client cert of the cluster CA (admin) fails the TLS
    handshake: only the front-proxy CA's cert is accepted."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    path = f"/apis/records.passhat.dev/v1alpha1/namespaces/{records.ns_a}/evals/ev/trials"
    conn = http.client.HTTPSConnection(records.node_ip, records.port, context=ctx, timeout=10)
    conn.request(
        "GET", path, headers={"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}
    )
    response = conn.getresponse()
    body = json.loads(response.read())
    conn.close()
    assert response.status == 401 and body["reason"] == "Unauthorized", body
    pki = records.cluster.root / ".cluster" / "pki"
    ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    conn = http.client.HTTPSConnection(records.node_ip, records.port, context=ctx, timeout=10)
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
        conn.request("GET", path)
        conn.getresponse().read()
    conn.close()


def test_discovery_through_the_aggregator(
    records: RecordsSetup, kubectl: Callable[..., str]
) -> None:
    """kubectl sees the group and its two subresources."""
    out = kubectl("get", "--raw", "/apis/records.passhat.dev/v1alpha1")
    names = {r["name"] for r in json.loads(out)["resources"]}
    assert names == {"evals/trials", "evals/transcript"}


def test_archived_attempts_read_back_after_the_eval_is_gone(
    records: RecordsSetup,
    api_client: client.ApiClient,
    kubectl: Callable[..., str],
    core_v1: client.CoreV1Api,
) -> None:
    """End to end with the archiver: an eval on the real node (the operator serves B)
    archives its attempts with their real logs; carol, who may read pods' logs in B, reads
    them through the API; after the eval and its pods are deleted she still does."""
    log_role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "log-reader", "namespace": records.ns_b},
        "rules": [{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}],
    }
    log_binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "carol-logs", "namespace": records.ns_b},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "log-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "carol"}],
    }
    kubectl(
        "apply", "-f", "-", input="\n---\n".join(yaml.safe_dump(o) for o in (log_role, log_binding))
    )
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConsistencyEval",
        "metadata": {"name": "e2e"},
        "spec": {
            "tasks": [{"id": "alpha"}, {"id": "beta/two"}],
            "trials": 1,
            "parallelism": 2,
            "trial": {
                "timeoutSeconds": 120,
                "template": {
                    "spec": {
                        "nodeSelector": {"type": "real"},
                        "containers": [
                            {
                                "name": "agent",
                                "image": "localhost/passhat/busybox:test",
                                "imagePullPolicy": "Never",
                                "command": ["sh", "-c", 'echo "transcript of $PASSHAT_TASK_ID"'],
                                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                            }
                        ],
                    }
                },
            },
        },
    }
    uid = create_eval(api_client, records.ns_b, body)["metadata"]["uid"]
    wait_for_condition(api_client, records.ns_b, "e2e", "Complete", timeout=240)
    carol = RecordsClient(_user_kubeconfig(records.cluster, records.tmp, "carol", []))

    def read() -> tuple[dict[str, Any], list[Any]]:
        manifest, rows = carol.records(records.ns_b, "e2e")
        return manifest, [(r["task_id"], r["trial"], r["attempt"], r["outcome"]) for r in rows]

    manifest, rows = read()
    assert manifest["uid"] == uid and manifest["taskIds"] == ["alpha", "beta/two"]
    assert rows == [("alpha", 0, 0, "pass"), ("beta/two", 0, 0, "pass")]
    text = carol.transcript(records.ns_b, "e2e", task_id="beta/two", trial=0, attempt=0)
    assert text is not None and b"transcript of beta/two" in text, text
    kubectl("delete", PLURAL, "e2e", "-n", records.ns_b, "--wait=true", "--timeout=120s")
    wait_for(
        lambda: not core_v1.list_namespaced_pod(records.ns_b).items, 120, "the eval's pods gone"
    )
    assert read() == (manifest, rows)
    again = carol.transcript(records.ns_b, "e2e", task_id="beta/two", trial=0, attempt=0)
    assert again == text


def test_regrade_reads_a_cluster_eval_whose_pods_are_gone(
    records: RecordsSetup,
    api_client: client.ApiClient,
    kubectl: Callable[..., str],
    core_v1: client.CoreV1Api,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`passhat regrade NAME -n NS` after the eval and its pods are deleted: dave (pods/log
    in B) regrades the archived transcripts of the graded attempts only (beta's exit-75
    attempts are skipped), and a grader noisy on gamma's transcripts names exactly them."""
    from passhat import cli

    grant = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "regrade-log-reader", "namespace": records.ns_b},
            "rules": [{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "dave-logs", "namespace": records.ns_b},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "regrade-log-reader",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "dave"}],
        },
    ]
    kubectl("apply", "-f", "-", input="\n---\n".join(yaml.safe_dump(o) for o in grant))
    agent = (
        'echo "transcript of $PASSHAT_TASK_ID"; '
        'case "$PASSHAT_TASK_ID" in beta) [ "$PASSHAT_ATTEMPT" = 0 ] && exit 75; exit 1 ;; '
        "esac; exit 0"
    )
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConsistencyEval",
        "metadata": {"name": "rg"},
        "spec": {
            "tasks": [{"id": "alpha"}, {"id": "beta"}, {"id": "gamma"}],
            "trials": 2,
            "parallelism": 3,
            "retry": {"infraErrors": 2, "backoffSeconds": 0},
            "trial": {
                "timeoutSeconds": 120,
                "template": {
                    "spec": {
                        "nodeSelector": {"type": "real"},
                        "containers": [
                            {
                                "name": "agent",
                                "image": "localhost/passhat/busybox:test",
                                "imagePullPolicy": "Never",
                                "command": ["sh", "-c", agent],
                                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                            }
                        ],
                    }
                },
            },
        },
    }
    noisy_on_gamma = (
        'if grep -q "transcript of gamma"; then exit $((PASSHAT_GRADING % 2)); fi; exit 0'
    )
    # NB: the spec's grader is what --pods runs (the local regrade gives its own command)
    body["spec"]["grading"] = {
        "grader": {
            "image": "localhost/passhat/busybox:test",
            "command": ["sh", "-c", noisy_on_gamma],
        }
    }
    create_eval(api_client, records.ns_b, body)
    wait_for_condition(api_client, records.ns_b, "rg", "Complete", timeout=300)
    kubectl("delete", PLURAL, "rg", "-n", records.ns_b, "--wait=true", "--timeout=120s")
    wait_for(
        lambda: not core_v1.list_namespaced_pod(records.ns_b).items, 120, "the eval's pods gone"
    )
    dave = _user_kubeconfig(records.cluster, records.tmp, "dave", [])
    argv = ["regrade", "rg", "-n", records.ns_b, "--kubeconfig", dave, "--times", "2"]
    code = cli.main([*argv, "--grader", noisy_on_gamma, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert report["source"] == f"{records.ns_b}/rg"
    assert (report["transcripts"], report["graded_attempts"]) == (6, 6)
    assert (report["infra_attempts_skipped"], report["missing_transcripts"]) == (2, 0)
    assert [(n["task_id"], n["trial"], n["original"]) for n in report["noisy"]] == [
        ("gamma", 0, "pass"),
        ("gamma", 1, "pass"),
    ]
    assert report["noise_rate"] == 2 / 6 and report["grader_errors"] == 0

    # --pods: the same sample graded in pods of the spec's grader in the eval's namespace,
    # made with dave's own rights (refused until he may create pods there)
    pods_argv = [*argv, "--pods", "--timeout", "60", "--format", "json"]
    assert cli.main(pods_argv) == 2
    assert "--pods: cannot create the grader pod in namespace" in capsys.readouterr().err
    rights = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "regrade-log-reader", "namespace": records.ns_b},
        "rules": [
            {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "delete"]},
        ],
    }
    kubectl("apply", "-f", "-", input=yaml.safe_dump(rights))
    # NB: a Role takes a moment to reach the authorizer
    time.sleep(2)
    code = cli.main(pods_argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    in_pods = json.loads(out)
    assert (in_pods["transcripts"], in_pods["grader_errors"]) == (6, 0), in_pods
    assert in_pods["noise_rate"] == 2 / 6
    assert [(n["task_id"], n["trial"]) for n in in_pods["noisy"]] == [("gamma", 0), ("gamma", 1)]
    left = core_v1.list_namespaced_pod(records.ns_b, label_selector="passhat.dev/regrade")
    assert all(p.metadata and p.metadata.deletion_timestamp for p in left.items), left.items
