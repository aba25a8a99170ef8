"""Helpers of the chart tests: a helm release of the local image and the example eval.

The helm and Prometheus tests install charts/passhat the way a user would, from the image
hack/image/build.sh imported into the node's containerd, in namespaced mode: the release
serves only the namespaces it creates, so operators started by other tests never compete
with it for an eval. The example eval (examples/eval.yaml) has known numbers, pinned here.

Every release archives its trials into the cluster's real S3 server (SeaweedFS, started by
hack/cluster/up.sh), below a prefix of its own: the chart's default store, a
PersistentVolumeClaim, would never bind on this cluster (it has no storage provisioner);
the claim itself is checked where it is the subject (test_helm_records).
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.s3_helpers import S3Server

REPO = Path(__file__).resolve().parents[2]
S3_ENV = REPO / ".cluster" / "s3.env"
CHART = REPO / "charts" / "passhat"
EXAMPLE = REPO / "examples" / "eval.yaml"
IMAGE_VALUES = (
    "image.repository=localhost/passhat/passhat",
    "image.tag=test",
    "image.pullPolicy=Never",
)
INSTALL_TIMEOUT_S = 300
EVAL_TIMEOUT_S = 900

# examples/eval.yaml: 4 tasks x 4 trials; c = 4, 2, 0, 4; one infra error per slot of the last.
EXPECTED_BY_K = {
    1: {"tasksScored": 4, "meanPassRate": 0.625, "passAtK": 0.625, "passHatK": 0.625},
    2: {"tasksScored": 4, "meanPassRate": 0.625, "passAtK": 17 / 24, "passHatK": 13 / 24},
    4: {"tasksScored": 4, "meanPassRate": 0.625, "passAtK": 0.75, "passHatK": 0.5},
}
EXPECTED_INFRA_ERROR_RATE = 0.2
EXPECTED_FLAKY = ["refund-over-limit"]
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


@dataclass(frozen=True)
class Release:
    """One installed release: its name, namespace, the namespace of its evals, one it does
    not serve, and a spare one it serves (with `serve_spare`) that a test may delete."""

    name: str
    namespace: str
    evals_namespace: str
    other_namespace: str
    spare_namespace: str

    @property
    def fullname(self) -> str:
        """The name of its Deployment, Service, ServiceAccount and roles."""
        return self.name if "passhat" in self.name else f"{self.name}-passhat"

    @property
    def service_account(self) -> str:
        """The operator's identity, as `kubectl auth can-i --as` takes it."""
        return f"system:serviceaccount:{self.namespace}:{self.fullname}"


def run(cmd: list[str], env: dict[str, str], *, timeout: float = 300) -> str:
    """Run a command; fail the test with its output when it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def ensure_image(env: dict[str, str]) -> None:
    """Build/import the operator image when containerd lacks this source tree's build."""
    run(["bash", str(REPO / "hack" / "image" / "build.sh")], env, timeout=3600)


def helm_args(release: Release, *sets: str, serve_spare: bool = False) -> list[str]:
    """`--set` arguments of the tests' release (local image, namespaced mode: the evals
    namespace, and the spare one too with `serve_spare`)."""
    served = [release.evals_namespace] + ([release.spare_namespace] if serve_spare else [])
    values = [*IMAGE_VALUES, f"watchNamespaces={{{','.join(served)}}}", *sets]
    return [arg for value in values for arg in ("--set", value)]


def s3_values(kubectl: Callable[..., str], release: Release) -> tuple[str, ...]:
    """`--set` values that archive into the test S3 server, with a credentials Secret
    made in the release's namespace (the operator reaches S3 on the node IP)."""
    server = S3Server.from_env_file(S3_ENV)
    kubectl(
        "create",
        "secret",
        "generic",
        "records-s3",
        "-n",
        release.namespace,
        f"--from-literal=AWS_ACCESS_KEY_ID={server.env['AWS_ACCESS_KEY_ID']}",
        f"--from-literal=AWS_SECRET_ACCESS_KEY={server.env['AWS_SECRET_ACCESS_KEY']}",
    )
    return (
        "records.store=s3",
        f"records.s3.endpoint={server.endpoint}",
        f"records.s3.bucket={server.bucket}",
        f"records.s3.prefix={records_prefix(release)}",
        f"records.s3.region={server.region}",
        "records.s3.credentialsSecret=records-s3",
    )


def records_prefix(release: Release) -> str:
    """The release's own prefix in the test bucket."""
    return f"helm/{release.name}"


@contextmanager
def installed_release(
    env: dict[str, str], kubectl: Callable[..., str], *sets: str, serve_spare: bool = False
) -> Iterator[Release]:
    """Install the chart (waiting for the operator to be Ready); uninstall and clean up
    after. Records go to the test S3 server unless `sets` choose a store; `serve_spare`:
    the spare namespace is made and served too."""
    suffix = uuid.uuid4().hex[:6]
    release = Release(
        name=f"ph-{suffix}",
        namespace=f"ph-system-{suffix}",
        evals_namespace=f"ph-evals-{suffix}",
        other_namespace=f"ph-other-{suffix}",
        spare_namespace=f"ph-spare-{suffix}",
    )
    spare = (release.spare_namespace,) if serve_spare else ()
    for ns in (release.namespace, release.evals_namespace, release.other_namespace, *spare):
        kubectl("create", "namespace", ns)
        kubectl(
            "label",
            "namespace",
            ns,
            "passhat.dev/test=true",
            *(f"{k}={v}" for k, v in RESTRICTED.items()),
        )
    if not any(value.startswith("records.store=") for value in sets):
        sets = (*s3_values(kubectl, release), *sets)
    try:
        run(
            [
                "helm",
                "install",
                release.name,
                str(CHART),
                "--namespace",
                release.namespace,
                *helm_args(release, *sets, serve_spare=serve_spare),
                "--wait",
                "--timeout",
                f"{INSTALL_TIMEOUT_S}s",
            ],
            env,
            timeout=INSTALL_TIMEOUT_S + 60,
        )
        yield release
    finally:
        cleanup(env, kubectl, release)


CLUSTER_SCOPED = (
    "validatingadmissionpolicies,validatingadmissionpolicybindings,apiservices,"
    "clusterroles,clusterrolebindings"
)


def cleanup(env: dict[str, str], kubectl: Callable[..., str], release: Release) -> None:
    """Delete the evals (while the operator runs), uninstall, drop the namespaces."""
    namespaces = (release.evals_namespace, release.other_namespace, release.spare_namespace)
    for ns in namespaces:
        kubectl("delete", "consistencyevals", "--all", "-n", ns, "--wait=false", check=False)
    uninstall = ["helm", "uninstall", release.name, "-n", release.namespace, "--wait"]
    done = subprocess.run(
        [*uninstall, "--timeout", "180s"], capture_output=True, env=env, timeout=240, check=False
    )
    if done.returncode != 0:
        # NB: a failed drain hook must not leave the release's cluster-wide objects (its
        # APIService would stall every namespace deletion on the cluster)
        subprocess.run(
            [*uninstall, "--no-hooks", "--timeout", "120s"],
            capture_output=True, env=env, timeout=180, check=False,
        )  # fmt: skip
    # NB: what an uninstall that failed both times left cluster-wide: the admission policy
    # would judge every other test's namespace, the APIService stall namespace deletions
    kubectl(
        "delete", CLUSTER_SCOPED, "-l", f"app.kubernetes.io/instance={release.name}",
        "--ignore-not-found", "--wait=false", check=False,
    )  # fmt: skip
    for ns in namespaces:
        release_finalizers(kubectl, ns)
    for ns in (release.namespace, *namespaces):
        kubectl("delete", "namespace", ns, "--wait=false", check=False)
    if S3_ENV.is_file():
        S3Server.from_env_file(S3_ENV).delete_prefix(records_prefix(release))


def release_finalizers(kubectl: Callable[..., str], namespace: str) -> None:
    """Strip finalizers from the evals and pods left in `namespace` (operator gone)."""
    for kind in ("consistencyevals", "pods"):
        names = kubectl("get", kind, "-n", namespace, "-o", "name", check=False).split()
        for name in names:
            kubectl(
                "patch", name, "-n", namespace, "--type=merge",
                "-p", '{"metadata":{"finalizers":null}}', check=False,
            )  # fmt: skip


def example_eval(name: str, trials: int | None = None) -> str:
    """examples/eval.yaml renamed to `name`; with `trials`, its first task only, that often."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["metadata"]["name"] = name
    if trials is not None:
        spec = doc["spec"]
        spec.update(tasks=spec["tasks"][:1], trials=trials, ks=[1])
        spec.pop("gate", None)
    return yaml.safe_dump(doc, sort_keys=False)


def get_eval(kubectl: Callable[..., str], namespace: str, name: str) -> dict[str, Any]:
    """The eval as the API server has it."""
    obj: dict[str, Any] = json.loads(
        kubectl("get", "consistencyeval", name, "-n", namespace, "-o", "json")
    )
    return obj


def wait_complete(
    kubectl: Callable[..., str], namespace: str, name: str, timeout: float = EVAL_TIMEOUT_S
) -> dict[str, Any]:
    """Poll until the eval's Complete condition is True; return its status."""
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = get_eval(kubectl, namespace, name).get("status") or {}
        for condition in status.get("conditions") or []:
            if condition.get("type") == "Complete" and condition.get("status") == "True":
                return status
        time.sleep(2)
    pytest.fail(
        f"eval {namespace}/{name} not Complete after {timeout:.0f}s; last status:\n"
        + json.dumps({k: v for k, v in status.items() if k != "ledger"}, indent=1)[:3000]
    )


def flaky_ids(status: dict[str, Any]) -> list[str]:
    """The flaky task ids of a status (items may be ids or objects with an id)."""
    return [
        f if isinstance(f, str) else str(f.get("id") or f.get("taskId"))
        for f in status.get("flaky") or []
    ]


def assert_example_numbers(status: dict[str, Any]) -> None:
    """The example eval's status carries exactly its known numbers."""
    by_k = {row["k"]: row for row in status["summary"]["byK"]}
    assert sorted(by_k) == sorted(EXPECTED_BY_K)
    for k, expected in EXPECTED_BY_K.items():
        for field, value in expected.items():
            assert by_k[k][field] == pytest.approx(value, abs=1e-6), (k, field, by_k[k])
    assert status["summary"]["infraErrorRate"] == pytest.approx(EXPECTED_INFRA_ERROR_RATE)
    assert flaky_ids(status) == EXPECTED_FLAKY
    gate = status["gate"]
    assert gate["passed"] is False
    assert gate["value"] == pytest.approx(13 / 24, abs=1e-6)
