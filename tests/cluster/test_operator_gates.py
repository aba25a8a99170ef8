"""Release gates on the real cluster: `passhat report`'s exit codes in each state of an
eval (unfinished, --wait timing out, gate passed, gate failed, missing), and `passhat
compare` across a local run and a cluster eval (docs/scoring.md#exit-codes).

Two evals on kwok nodes share one script: tasks 0-2 always pass, task 3 passes its first
trial only. Until the Scripter runs, every trial pod runs forever (the evals cannot
finish); then each ends as scripted. "lenient" gates meanPassRate@1 >= 0.5 (0.875:
passes), "strict" gates passHatK@2 >= 0.9 (0.75: fails).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.cluster.operator_helpers import (
    OperatorProcess,
    Scripter,
    create_eval,
    eval_manifest,
    install_crd,
    passhat,
    wait_for_condition,
)
from tests.cluster.surface_helpers import module_namespace, shutdown

TASKS, TRIALS = 4, 2
GATES = {
    "lenient": {"metric": "meanPassRate", "k": 1, "min": 0.5},
    "strict": {"metric": "passHatK", "k": 2, "min": 0.9},
}


def script(task: int, trial: int, attempt: int) -> int:
    """Tasks 0-2 pass; task 3 passes trial 0 and fails trial 1."""
    return 1 if task == 3 and trial == 1 else 0


@dataclass
class Gated:
    """Two unfinished evals under a running operator."""

    namespace: str
    operator: OperatorProcess
    core: client.CoreV1Api


@pytest.fixture(scope="module")
def gated(
    cluster: Any,
    kubectl: Callable[..., str],
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Gated]:
    """Both evals created and seen by the operator (Complete=False), none finished."""
    install_crd(kubectl)
    log_dir: Path = tmp_path_factory.mktemp("gates")
    with module_namespace(core_v1, "gates") as namespace:
        operator = OperatorProcess(
            kubeconfig=cluster.kubeconfig,
            namespaces=[namespace],
            log_path=log_dir / "operator.log",
        )
        operator.start()
        try:
            for name, gate in GATES.items():
                manifest = eval_manifest(
                    name, tasks=TASKS, trials=TRIALS, parallelism=8, ks=[1, 2], gate=gate
                )
                create_eval(api_client, namespace, manifest)
            for name in GATES:
                wait_for_condition(
                    api_client,
                    namespace,
                    name,
                    "Complete",
                    value="False",
                    timeout=300,
                    operator=operator,
                )
            yield Gated(namespace, operator, core_v1)
        finally:
            shutdown(operator, kubectl, namespace)


def _local_run(cluster: Any, tmp_path: Path) -> Path:
    """A local run of the same task ids in which task-001 always fails and the rest pass."""
    doc = {
        "apiVersion": "passhat.dev/v1alpha1",
        "kind": "ConsistencyEval",
        "metadata": {"name": "local"},
        "spec": {
            "tasks": [{"id": f"task-{i:03d}"} for i in range(TASKS)],
            "trials": TRIALS,
            "ks": [1, 2],
            "trial": {
                "timeoutSeconds": 60,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "agent",
                                "image": "ignored:locally",
                                "command": ["sh", "-c", 'test "$PASSHAT_TASK_ID" != task-001'],
                            }
                        ]
                    }
                },
            },
        },
    }
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "local-run"
    done = subprocess.run(
        [sys.executable, "-m", "passhat", "run", str(path), "--out", str(out), "-q"],
        capture_output=True,
        text=True,
        env=cluster.env(),
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


def test_exit_codes_in_each_state(gated: Gated, cluster: Any) -> None:
    """3 while unfinished (and when --wait times out), 2 for a missing eval or a bad
    TIMEOUT; once the pods end, --wait returns 0 for the passing gate, 1 for the failing."""
    ns = gated.namespace
    unfinished = passhat(cluster, "report", "lenient", "-n", ns, "--format", "json")
    assert unfinished.returncode == 3, unfinished.stderr
    assert [row["k"] for row in json.loads(unfinished.stdout)] == [1, 2]
    timed_out = passhat(cluster, "report", "strict", "-n", ns, "--wait", "2s", "--no-intervals")
    assert timed_out.returncode == 3, timed_out.stderr
    assert f"passhat: {ns}/strict did not finish within 2s" in timed_out.stderr
    missing = passhat(cluster, "report", "nope", "-n", ns)
    assert missing.returncode == 2
    assert 'consistencyeval "nope" not found' in missing.stderr
    bad = passhat(cluster, "report", "strict", "-n", ns, "--wait", "soon")
    assert bad.returncode == 2 and "--wait: expected a duration" in bad.stderr

    with Scripter(gated.core, ns, script):
        passed = passhat(cluster, "report", "lenient", "-n", ns, "--wait", "10m")
        failed = passhat(
            cluster, "report", "strict", "-n", ns, "--wait", "10m", "--format", "markdown"
        )
    assert passed.returncode == 0, passed.stderr + gated.operator.log_tail()
    assert "passhat: gate passed: meanPassRate at k=1 is 0.8750 (min 0.5)" in passed.stderr
    assert failed.returncode == 1, failed.stderr + gated.operator.log_tail()
    assert "passhat: gate FAILED: passHatK at k=2 is 0.7500 (min 0.9)" in failed.stderr
    # the markdown report, for a PR comment, says the verdict in its title
    assert "75.0%" in failed.stdout
    assert "gate FAILED: passHatK at k=2 is 0.7500 (min 0.9)" in failed.stdout.splitlines()[0]
    # NB: finished evals answer at once, with or without --wait
    again = passhat(cluster, "report", "strict", "-n", ns, "--wait", "--format", "json")
    assert again.returncode == 1


def test_an_eval_that_cannot_run_exits_2(
    gated: Gated, cluster: Any, api_client: client.ApiClient
) -> None:
    """A template the operator refuses (ConfigError UnsafeTemplate): 2, and --wait does
    not wait for it."""
    manifest = eval_manifest("unsafe", tasks=1, trials=2, parallelism=1, gate=GATES["strict"])
    container = manifest["spec"]["trial"]["template"]["spec"]["containers"][0]
    container["securityContext"] = {"privileged": True}
    create_eval(api_client, gated.namespace, manifest)
    wait_for_condition(
        api_client, gated.namespace, "unsafe", "ConfigError", timeout=120, operator=gated.operator
    )
    refused = passhat(cluster, "report", "unsafe", "-n", gated.namespace, "--wait", "10m")
    assert refused.returncode == 2, refused.stderr
    assert "waiting for" not in refused.stderr


def test_compare_a_local_run_with_a_cluster_eval(
    gated: Gated, cluster: Any, tmp_path: Path
) -> None:
    """compare RUN_DIR ceval/NAME: task-001 newly passing, task-003 newly flaky, most
    significant first; and ceval/ against ceval/ of the same script: nothing changed."""
    ns = gated.namespace
    with Scripter(gated.core, ns, script):
        done = passhat(cluster, "report", "strict", "-n", ns, "--wait", "10m")
    assert done.returncode == 1, done.stderr
    run_dir = _local_run(cluster, tmp_path)
    compared = passhat(
        cluster, "compare", str(run_dir), "ceval/strict", "-n", ns, "--format", "json", "--k", "1"
    )
    assert compared.returncode == 0, compared.stderr
    document = json.loads(compared.stdout)
    assert (document["a"], document["b"]) == ("local-run", f"{ns}/strict")
    changes = [(c["task_id"], c["change"]) for c in document["changes"]]
    assert changes == [("task-001", "newly_passing"), ("task-003", "newly_flaky")]
    assert document["unchanged"] == 2
    assert document["by_k"][0]["tasks_paired"] == TASKS
    text = passhat(cluster, "compare", str(run_dir), "ceval/strict", "-n", ns)
    assert text.returncode == 0, text.stderr
    assert "task-001  newly passing  0/2" in text.stdout
    same = passhat(cluster, "compare", "ceval/lenient", "ceval/strict", "-n", ns)
    assert same.returncode == 0, same.stderr
    assert "No task's pass rate changed (4 paired tasks)." in same.stdout
    missing = passhat(cluster, "compare", str(run_dir), "ceval/nope", "-n", ns)
    assert missing.returncode == 2 and 'consistencyeval "nope" not found' in missing.stderr
