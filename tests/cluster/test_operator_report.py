"""`passhat report NAME` on a live eval equals `passhat score` on the same trial rows.

A scripted eval on kwok nodes (flaky tasks, retried infra errors) runs to completion under
an operator that caps status lists at one task; the report read back from the cluster
must then print exactly what `passhat score` prints for the equivalent `trials.jsonl`,
with every flaky task listed (not only the capped one in status).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.cluster.operator_helpers import (
    OperatorProcess,
    Scripter,
    create_eval,
    eval_manifest,
    install_crd,
    wait_for_condition,
)
from tests.cluster.surface_helpers import shutdown

TASKS, TRIALS, RETRIES = 6, 4, 2
KS = [1, 3, 4]


def script(task: int, trial: int, attempt: int) -> int:
    """Task t passes its first t % 5 trials; every third slot's first attempt is exit 75."""
    if attempt == 0 and (task + trial) % 3 == 0:
        return 75
    return 0 if trial < task % 5 else 1


def rows() -> list[dict[str, Any]]:
    """The trials.jsonl rows the script implies: one per attempt, infra errors included."""
    out = []
    for task in range(TASKS):
        for trial in range(TRIALS):
            for attempt in range(RETRIES + 1):
                code = script(task, trial, attempt)
                outcome = {0: "pass", 1: "fail", 75: "infra_error"}[code]
                out.append(
                    {
                        "task_id": f"task-{task:03d}",
                        "trial": trial,
                        "attempt": attempt,
                        "outcome": outcome,
                    }
                )
                if code != 75:
                    break
    return out


def passhat(cluster: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the `passhat` CLI of this interpreter against the test cluster."""
    return subprocess.run(
        [sys.executable, "-c", "import sys; from passhat.cli import main; sys.exit(main())", *args],
        capture_output=True,
        text=True,
        env=cluster.env(),
        timeout=300,
        check=False,
    )


@pytest.fixture
def operator(
    cluster: Any, kubectl: Callable[..., str], namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """An operator for this namespace that lists at most one task in status lists."""
    install_crd(kubectl)
    process = OperatorProcess(
        kubeconfig=cluster.kubeconfig,
        namespaces=[namespace],
        log_path=tmp_path / "operator.log",
        extra_args=["--set", "max_listed_tasks=1"],
    )
    process.start()
    try:
        yield process
    finally:
        shutdown(process, kubectl, namespace)


def test_report_equals_score_on_the_same_rows(
    operator: OperatorProcess,
    cluster: Any,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    namespace: str,
    tmp_path: Path,
) -> None:
    """report --format json of the live eval == score --format json of its trial rows."""
    manifest = eval_manifest("scored", tasks=TASKS, trials=TRIALS, parallelism=8, ks=KS)
    manifest["spec"]["retry"] = {"infraErrors": RETRIES, "backoffSeconds": 0}
    create_eval(api_client, namespace, manifest)
    with Scripter(core_v1, namespace, script):
        body = wait_for_condition(
            api_client, namespace, "scored", "Complete", timeout=600, operator=operator
        )
    trials_file = tmp_path / "trials.jsonl"
    trials_file.write_text("".join(json.dumps(row) + "\n" for row in rows()))
    ks = [arg for k in KS for arg in ("--k", str(k))]
    score = passhat(cluster, "score", str(trials_file), *ks, "--format", "json")
    assert score.returncode == 0, score.stderr
    report = passhat(cluster, "report", "scored", "-n", namespace, "--format", "json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout) == json.loads(score.stdout)
    flaky = json.loads(report.stdout)[0]["flaky"]
    assert sorted(flaky) == ["task-001", "task-002", "task-003"]
    assert len(body["status"]["flaky"]) == 1 and body["status"]["flakyCount"] == 3
    text = passhat(cluster, "report", "scored", "-n", namespace)
    assert text.returncode == 0, text.stderr
    assert "task-002" in text.stdout


def test_report_of_a_missing_eval_is_one_line(cluster: Any, namespace: str) -> None:
    """A missing eval: exit 2 and one line naming it, never a traceback."""
    result = passhat(cluster, "report", "nope", "-n", namespace)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "nope" in lines[0] and namespace in lines[0], result.stderr
