"""Fixtures for the cluster tier: the real test cluster, clients, and a namespace per test.

Every test under tests/cluster needs the single-machine cluster of hack/cluster/up.sh.
The session fixture runs up.sh (idempotent: seconds when the cluster is already up) and
fails the run when it cannot start: a cluster test is never skipped. Each test gets its
own namespace, deleted afterwards with any pod finalizers stripped so kwok and the
kubelet can let the pods go.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from passhat.records.s3 import S3Store
from tests.cluster.kube_helpers import as_body
from tests.cluster.operator_helpers import OperatorProcess, operator_in
from tests.cluster.s3_helpers import S3Server

REPO = Path(__file__).resolve().parents[2]
CLUSTER_DIR = REPO / ".cluster"
KUBECONFIG = CLUSTER_DIR / "kubeconfig"
BIN = CLUSTER_DIR / "bin"
UP_TIMEOUT_S = float(os.environ.get("PASSHAT_UP_TIMEOUT", "3600"))

BUSYBOX = "localhost/passhat/busybox:test"
REAL_NODE = "passhat-node"
KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}

T = TypeVar("T")


# The modules that need the cluster to themselves (marked `alone`): hack/test.sh runs every
# other cluster module beside the unit and local tiers, then these one after another.
# Add a module here when it changes what every namespace sees: a Helm release (the
# APIService, the admission policy, the CRD of its chart), the records APIService, an API
# server restart, a killed S3 store; or when it needs Kueue (built in the background while
# the first phase runs). docs/development.md, "How CI runs the tiers".
ALONE = frozenset(
    {
        "test_admission_policy.py",  # a Helm release: its admission policy answers for all
        "test_helm_install.py",
        "test_helm_records.py",
        "test_prometheus_scrape.py",  # a Helm release
        "test_records_api.py",  # registers and removes the records APIService
        "test_operator_kwok.py",  # restarts the API server
        "test_operator_records.py",  # kills the S3 store
        "test_record_store_s3.py",  # the S3 store another module kills
        "test_operator_kueue.py",  # needs Kueue
        "test_operator_gradercheck_kueue.py",  # needs Kueue
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test in tests/cluster with `cluster`, and those of ALONE with `alone`."""
    here = Path(__file__).parent
    for item in items:
        path = Path(str(item.fspath))
        if here in path.parents:
            item.add_marker(pytest.mark.cluster)
            if path.name in ALONE:
                item.add_marker(pytest.mark.alone)


@dataclass(frozen=True)
class Cluster:
    """Where the running cluster's kubeconfig, tools and logs are."""

    root: Path
    kubeconfig: Path
    bin: Path
    logs: Path

    def env(self) -> dict[str, str]:
        """Environment for subprocesses: KUBECONFIG set, .cluster/bin first on PATH."""
        env = dict(os.environ)
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["PATH"] = f"{self.bin}:{env.get('PATH', '')}"
        return env


def wait_for(pred: Callable[[], T | None], timeout: float, what: str, interval: float = 0.5) -> T:
    """Poll `pred` until it returns something truthy (returned); fail naming `what`."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = pred()
            if value:
                return value
        except (ApiException, urllib3.exceptions.HTTPError) as err:
            # NB: an API server restarted by a fault test answers again within the deadline.
            last_error = err
        if time.monotonic() >= deadline:
            suffix = f" (last error: {last_error})" if last_error else ""
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}{suffix}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    """The running test cluster (started by hack/cluster/up.sh when needed)."""
    up = REPO / "hack" / "cluster" / "up.sh"
    failure = ""
    # NB: a second try rides out a component another session is restarting right now.
    for _ in range(2):
        try:
            proc = subprocess.run(
                [str(up)], capture_output=True, text=True, timeout=UP_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"hack/cluster/up.sh did not finish within {UP_TIMEOUT_S:.0f}s")
        if proc.returncode == 0:
            break
        tail = "\n".join(proc.stderr.splitlines()[-40:])
        failure = f"hack/cluster/up.sh failed (exit {proc.returncode}):\n{tail}"
    else:
        pytest.fail(failure)
    return Cluster(root=REPO, kubeconfig=KUBECONFIG, bin=BIN, logs=CLUSTER_DIR / "logs")


@pytest.fixture(scope="session")
def api_client(cluster: Cluster) -> client.ApiClient:
    """A kubernetes ApiClient for the admin kubeconfig."""
    # NB: the client's config loaders carry no annotations, even in its typed releases.
    new_client: Callable[..., client.ApiClient] = config.new_client_from_config
    return new_client(config_file=str(cluster.kubeconfig))


@pytest.fixture(scope="session")
def core_v1(api_client: client.ApiClient) -> client.CoreV1Api:
    """CoreV1Api on the test cluster."""
    return client.CoreV1Api(api_client)


@pytest.fixture(scope="session")
def kubectl(cluster: Cluster) -> Callable[..., str]:
    """`kubectl(*args, input=None, check=True)` → stdout; fails the test on error."""

    def run(*args: str, input: str | None = None, check: bool = True) -> str:
        proc = subprocess.run(
            [str(cluster.bin / "kubectl"), *args],
            input=input,
            capture_output=True,
            text=True,
            env=cluster.env(),
            timeout=300,
            check=False,
        )
        if check and proc.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    return run


@pytest.fixture(scope="session")
def apply_manifest(kubectl: Callable[..., str]) -> Callable[..., list[dict[str, Any]]]:
    """`apply_manifest(text, namespace=None)`: kubectl apply YAML, return the objects."""

    def apply(text: str, namespace: str | None = None) -> list[dict[str, Any]]:
        args = ["apply", "-o", "json", "-f", "-"]
        if namespace:
            args += ["-n", namespace]
        out = json.loads(kubectl(*args, input=text))
        items: list[dict[str, Any]] = (
            out.get("items", [out]) if out.get("kind") == "List" else [out]
        )
        return items

    return apply


@pytest.fixture(name="wait_for", scope="session")
def wait_for_fixture() -> Callable[..., Any]:
    """`wait_for(pred, timeout, what)`: poll until pred() is truthy, return its value."""
    return wait_for


def _namespace_name(test_name: str) -> str:
    slug = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:40].strip("-")
    return f"t-{slug}-{uuid.uuid4().hex[:6]}"


def strip_pod_finalizers(core: client.CoreV1Api, namespace: str) -> None:
    """Remove every finalizer from every pod of `namespace` (so it can be deleted)."""
    for pod in core.list_namespaced_pod(namespace).items:
        meta = pod.metadata
        assert meta is not None and meta.name, f"a pod of {namespace} listed without a name"
        if meta.finalizers:
            try:
                core.patch_namespaced_pod(meta.name, namespace, {"metadata": {"finalizers": None}})
            except ApiException as err:
                if err.status != 404:
                    raise


def _retrying(action: Callable[[], None], what: str, timeout: float = 180) -> None:
    """Run `action`, retrying while the API server is unreachable (restarted by a fault test)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            action()
            return
        except (urllib3.exceptions.HTTPError, ApiException) as err:
            transient = not isinstance(err, ApiException) or (err.status or 0) >= 500
            if not transient or time.monotonic() >= deadline:
                pytest.fail(f"{what} failed: {err}")
            time.sleep(1)


@pytest.fixture
def namespace(core_v1: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for this test; deleted (pods' finalizers stripped) afterwards."""
    with fresh_namespace(core_v1, _namespace_name(request.node.name)) as name:
        yield name


@pytest.fixture
def operator(
    cluster: Cluster, kubectl: Callable[..., str], namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """A running operator scoped to this test's namespace (CRD installed); its log in
    tmp_path. A module that needs other settings defines its own `operator`."""
    with operator_in(cluster, kubectl, namespace, tmp_path / "operator.log") as process:
        yield process


@contextmanager
def fresh_namespace(
    core: client.CoreV1Api, name: str, *, labels: dict[str, str] | None = None
) -> Iterator[str]:
    """Namespace `name`, labelled a test namespace, once its default service account exists;
    afterwards its pods' finalizers are stripped and it is deleted (each step retried
    while the API server is briefly unreachable)."""
    body = {"metadata": {"name": name, "labels": {"passhat.dev/test": "true", **(labels or {})}}}
    _retrying(lambda: _create_namespace(core, body), f"creating namespace {name}")
    wait_for(
        lambda: _has_default_sa(core, name), 300, f"default service account in namespace {name}"
    )
    try:
        yield name
    finally:
        _retrying(lambda: strip_pod_finalizers(core, name), f"stripping finalizers in {name}")
        _retrying(lambda: _delete_namespace(core, name), f"deleting namespace {name}")
        # NB: finalizers added after the first strip (by a controller under test) would
        # keep the namespace Terminating forever; strip once more after a short while.
        time.sleep(0.5)
        _retrying(lambda: strip_pod_finalizers(core, name), f"stripping finalizers in {name}")


def _create_namespace(core: client.CoreV1Api, body: dict[str, Any]) -> None:
    try:
        core.create_namespace(as_body(body, client.V1Namespace))
    except ApiException as err:
        if err.status != 409:  # NB: 409 = a retry after a lost response
            raise


def _delete_namespace(core: client.CoreV1Api, name: str) -> None:
    try:
        core.delete_namespace(name)
    except ApiException as err:
        if err.status != 404:
            raise


def _has_default_sa(core: client.CoreV1Api, namespace: str) -> bool:
    try:
        core.read_namespaced_service_account("default", namespace)
    except ApiException as err:
        if err.status == 404:
            return False
        raise
    return True


def pod_manifest(
    name: str,
    command: str,
    *,
    node: str = "real",
    memory_limit: str | None = None,
    annotations: dict[str, str] | None = None,
    finalizers: list[str] | None = None,
    image: str = BUSYBOX,
    pull_policy: str = "Never",
    deadline_s: int | None = None,
    grace_s: int = 2,
) -> dict[str, Any]:
    """A one-container busybox pod running `sh -c command` on the real node or a kwok node."""
    container: dict[str, Any] = {
        "name": "trial",
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": ["sh", "-c", command],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
    }
    if memory_limit:
        container["resources"]["limits"] = {"memory": memory_limit}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": grace_s,
        "automountServiceAccountToken": False,
        "containers": [container],
        "nodeSelector": {"type": node},
    }
    if node == "kwok":
        spec["tolerations"] = [KWOK_TOLERATION]
    if deadline_s is not None:
        spec["activeDeadlineSeconds"] = deadline_s
    metadata: dict[str, Any] = {"name": name, "annotations": annotations or {}}
    if finalizers:
        metadata["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def as_yaml(obj: dict[str, Any]) -> str:
    """YAML text of a manifest (for apply_manifest)."""
    return yaml.safe_dump(obj, sort_keys=False)


@pytest.fixture(name="pod_manifest", scope="session")
def pod_manifest_fixture() -> Callable[..., dict[str, Any]]:
    """`pod_manifest(name, command, node="real"|"kwok", ...)` → a busybox pod manifest."""
    return pod_manifest


@pytest.fixture(name="strip_pod_finalizers", scope="session")
def strip_pod_finalizers_fixture(core_v1: client.CoreV1Api) -> Callable[[str], None]:
    """`strip_pod_finalizers(namespace)`: remove all finalizers from the namespace's pods."""
    return lambda namespace: strip_pod_finalizers(core_v1, namespace)


@pytest.fixture(scope="session")
def s3_server(cluster: Cluster) -> Iterator[S3Server]:
    """The cluster's S3 server (SeaweedFS, from `.cluster/s3.env`); its credentials and
    endpoint are in this process's environment for the session (operators started by
    tests inherit them)."""
    path = cluster.root / ".cluster" / "s3.env"
    if not path.is_file():
        pytest.fail(f"{path} is missing: hack/cluster/up.sh did not start the S3 server")
    try:
        server = S3Server.from_env_file(path)
    except ValueError as err:
        pytest.fail(str(err))
    with pytest.MonkeyPatch.context() as patch:
        for name, value in server.env.items():
            patch.setenv(name, value)
        # NB: boto3 must never look for credentials off this machine.
        patch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        yield server


@pytest.fixture
def s3_store(s3_server: S3Server, request: pytest.FixtureRequest) -> Iterator[S3Store]:
    """An S3Store on the cluster's bucket below a prefix of this test's own; the
    prefix's objects are deleted afterwards."""
    prefix = "tests/" + _namespace_name(request.node.name)
    yield s3_server.store(prefix)
    s3_server.delete_prefix(prefix)
