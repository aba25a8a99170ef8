"""An Inspect task as passhat trials on the real node: `passhat init inspect` writes the eval,
the operator runs each trial as a pod of an Inspect image built offline here
(hack/inspect-image/build.sh: inspect-ai from PyPI, this checkout's passhat, the fixture
task), and the eval's pass^k equals what `passhat score` prints for the same task run by
`inspect eval --epochs 3` on this machine.

Needs inspect-ai locally too (to list the samples and run the epochs): `inspect` on PATH
or PASSHAT_TEST_INSPECT; skipped without it. The namespace enforces Pod Security
`restricted`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.cluster.operator_helpers import (
    REPO,
    OperatorProcess,
    create_eval,
    install_crd,
    passhat,
    wait_for_condition,
)
from tests.cluster.surface_helpers import module_namespace, shutdown

IMAGE = "localhost/passhat/inspect:test"
TASKS = REPO / "tests" / "fixtures" / "inspect" / "tasks.py"
INSPECT = os.environ.get("PASSHAT_TEST_INSPECT") or shutil.which("inspect")
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}
KS = ("--k", "1", "--k", "2", "--k", "3")

pytestmark = pytest.mark.skipif(INSPECT is None, reason="inspect-ai is not installed")


@pytest.fixture(scope="module")
def inspect_image() -> str:
    """The Inspect trial image, built and imported into the cluster's containerd."""
    done = subprocess.run(
        [str(REPO / "hack" / "inspect-image" / "build.sh")],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return IMAGE


@pytest.fixture(scope="module")
def namespace(
    cluster: Any,
    kubectl: Callable[..., str],
    core_v1: client.CoreV1Api,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, OperatorProcess]]:
    """A restricted namespace with an operator serving it."""
    install_crd(kubectl)
    log_dir: Path = tmp_path_factory.mktemp("inspect")
    with module_namespace(core_v1, "inspect", labels=RESTRICTED) as name:
        operator = OperatorProcess(
            kubeconfig=cluster.kubeconfig,
            namespaces=[name],
            log_path=log_dir / "operator.log",
            extra_args=["--set", "resync_interval_s=2"],
        )
        operator.start()
        try:
            yield name, operator
        finally:
            shutdown(operator, kubectl, name)


def _init_manifest(cluster: Any, image: str) -> dict[str, Any]:
    assert INSPECT is not None
    done = passhat(
        cluster, "init", "inspect", f"{TASKS}@trials", "--trials", "3", *KS,
        "--image", image, "--path-in-image", "/app/tasks.py", "--inspect-command", INSPECT,
        "--name", "inspect-trials", "--timeout", "300",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    manifest: dict[str, Any] = yaml.safe_load(done.stdout)
    pod = manifest["spec"]["trial"]["template"]["spec"]
    # NB: the real node of the test cluster: no pulls, small requests
    pod["nodeSelector"] = {"type": "real"}
    pod["terminationGracePeriodSeconds"] = 2
    (container,) = pod["containers"]
    container["imagePullPolicy"] = "Never"
    container["resources"] = {
        "requests": {"cpu": "50m", "memory": "128Mi"},
        "limits": {"memory": "1Gi"},
    }
    manifest["spec"]["retry"] = {"infraErrors": 2, "backoffSeconds": 0}
    return manifest


def test_inspect_trials_on_the_real_node(
    cluster: Any,
    api_client: client.ApiClient,
    inspect_image: str,
    namespace: tuple[str, OperatorProcess],
    tmp_path: Path,
) -> None:
    """The operator runs the init'd eval with the Inspect image; its pass^k per k is the
    one `passhat score` computes from `inspect eval --epochs 3` of the same task, the
    Inspect sample error of one first attempt is an infra error, retried, and each
    attempt's CPU seconds and peak memory reach `status.usage`."""
    assert INSPECT is not None
    name, operator = namespace
    manifest = _init_manifest(cluster, inspect_image)
    create_eval(api_client, name, manifest)
    done = wait_for_condition(
        api_client, name, "inspect-trials", "Complete", timeout=900, operator=operator
    )
    # what the trials used, as `passhat trial` read it from its container's cgroup at exit
    # (passhat/runner/resources.py) and the termination message carried it to the status
    usage = done["status"]["usage"]
    assert usage["measuredAttempts"] == 10, usage
    assert usage["cpuSeconds"] > 0 and usage["peakMemoryBytes"] > 32 * 2**20, usage
    report = passhat(cluster, "report", "inspect-trials", "-n", name, *KS, "--format", "json")
    assert report.returncode == 0, report.stderr
    by_cluster = json.loads(report.stdout)

    logs = tmp_path / "logs"
    subprocess.run(
        [INSPECT, "eval", f"{TASKS}@trials", "--model", "none", "--epochs", "3",
         "--log-dir", str(logs), "--display", "none"],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (log,) = logs.glob("*.eval")
    score = passhat(cluster, "score", str(log), *KS, "--format", "json")
    assert score.returncode == 0, score.stderr
    # NB: wobbly's first attempt raises under passhat (an Inspect sample error), retried:
    # one infra error of 10 attempts, which inspect --epochs never saw
    assert [row.pop("infra_error_rate") for row in by_cluster] == [0.1, 0.1, 0.1]
    assert by_cluster == [
        {key: value for key, value in row.items() if key != "infra_error_rate"}
        for row in json.loads(score.stdout)
    ]
    by_k = {row["k"]: row for row in by_cluster}
    # the plan of tasks.py@trials: steady 3/3, wobbly 2/3, broken 0/3
    assert by_k[3]["pass_hat_k"] == pytest.approx(1 / 3)
