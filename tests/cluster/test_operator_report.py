"""A finished eval seen three ways: `passhat report`, the operator's /metrics, its Events.

A scripted eval on kwok nodes (flaky tasks, retried infra errors) runs to completion under
an operator that caps status lists at one task. The report read back from the cluster
must print exactly what `passhat score` prints for the equivalent `trials.jsonl`, with
every flaky task listed (not only the capped one in status); /metrics must show the
status's numbers and count each attempt once; Events must tell each retry and the
completion; deleting the eval must drop its series.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.cluster.operator_helpers import (
    OperatorProcess,
    Scripter,
    create_eval,
    eval_manifest,
    get_eval,
    install_crd,
    passhat,
    wait_for_condition,
)
from tests.cluster.surface_helpers import (
    http_get,
    metrics_port,
    module_namespace,
    sample,
    scrape,
    shutdown,
    tolerant,
)

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


@dataclass
class Scored:
    """A completed scripted eval and the operator that ran it (still running)."""

    namespace: str
    operator: OperatorProcess
    body: dict[str, Any]
    port: int


@pytest.fixture(scope="module")
def scored(
    cluster: Any,
    kubectl: Callable[..., str],
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Scored]:
    """Run the scripted eval to completion under an operator that lists one task at most."""
    install_crd(kubectl)
    log_dir: Path = tmp_path_factory.mktemp("report")
    with module_namespace(core_v1, "report") as namespace:
        operator = OperatorProcess(
            kubeconfig=cluster.kubeconfig,
            namespaces=[namespace],
            log_path=log_dir / "operator.log",
            extra_args=["--set", "max_listed_tasks=1"],
        )
        operator.start()
        try:
            manifest = eval_manifest("scored", tasks=TASKS, trials=TRIALS, parallelism=8, ks=KS)
            manifest["spec"]["retry"] = {"infraErrors": RETRIES, "backoffSeconds": 0}
            create_eval(api_client, namespace, manifest)
            with Scripter(core_v1, namespace, script):
                body = wait_for_condition(
                    api_client, namespace, "scored", "Complete", timeout=900, operator=operator
                )
            yield Scored(namespace, operator, body, metrics_port(operator))
        finally:
            shutdown(operator, kubectl, namespace)


def test_report_equals_score_on_the_same_rows(scored: Scored, cluster: Any, tmp_path: Path) -> None:
    """report --format json of the live eval == score --format json of its trial rows."""
    trials_file = tmp_path / "trials.jsonl"
    trials_file.write_text("".join(json.dumps(row) + "\n" for row in rows()))
    ks = [arg for k in KS for arg in ("--k", str(k))]
    score = passhat(cluster, "score", str(trials_file), *ks, "--format", "json")
    assert score.returncode == 0, score.stderr
    report = passhat(cluster, "report", "scored", "-n", scored.namespace, "--format", "json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout) == json.loads(score.stdout)
    flaky = json.loads(report.stdout)[0]["flaky"]
    assert sorted(flaky) == ["task-001", "task-002", "task-003"]
    status = scored.body["status"]
    assert len(status["flaky"]) == 1 and status["flakyCount"] == 3
    text = passhat(cluster, "report", "scored", "-n", scored.namespace)
    assert text.returncode == 0, text.stderr
    assert "task-002" in text.stdout


def test_metrics_follow_the_status(scored: Scored) -> None:
    """/metrics shows the status's numbers per k and counts every attempt once."""
    samples = scrape(scored.port)
    labels = {"namespace": scored.namespace, "eval": "scored"}
    status = scored.body["status"]
    for row in status["summary"]["byK"]:
        at_k = {**labels, "k": str(row["k"])}
        assert sample(samples, "passhat_pass_hat_k", **at_k) == pytest.approx(row["passHatK"])
        assert sample(samples, "passhat_pass_at_k", **at_k) == pytest.approx(row["passAtK"])
        assert sample(samples, "passhat_mean_pass_rate", **at_k) == pytest.approx(
            row["meanPassRate"]
        )
        assert sample(samples, "passhat_tasks_scored", **at_k) == row["tasksScored"]
    assert sample(samples, "passhat_flaky_tasks", **labels) == 3
    assert sample(samples, "passhat_infra_error_ratio", **labels) == pytest.approx(
        status["summary"]["infraErrorRate"]
    )
    assert sample(samples, "passhat_trials_running", **labels) == 0
    assert sample(samples, "passhat_gate_passed", **labels) is None
    by_outcome: dict[str, float] = {}
    for (name, pairs), value in samples.items():
        d = dict(pairs)
        if name == "passhat_trials_total" and d.get("namespace") == scored.namespace:
            by_outcome[d["outcome"]] = by_outcome.get(d["outcome"], 0) + value
    expected: dict[str, float] = {}
    for row in rows():
        expected[row["outcome"]] = expected.get(row["outcome"], 0) + 1
    assert by_outcome == expected
    assert http_get(scored.port, "/healthz") == (200, "ok")


def test_events_tell_retries_and_completion(
    scored: Scored, core_v1: client.CoreV1Api, wait_for: Callable[..., Any]
) -> None:
    """kubectl describe tells the story: one Started event, TrialRetried bursts that count
    every retried attempt once (one event per burst, not per pod), one Completed event."""
    uid = scored.body["metadata"]["uid"]
    infra_rows = sum(1 for row in rows() if row["outcome"] == "infra_error")

    def story() -> tuple[dict[str, int], int] | None:
        events = core_v1.list_namespaced_event(
            scored.namespace, field_selector=f"involvedObject.uid={uid}"
        ).items
        counts: dict[str, int] = {}
        retried = 0
        for event in events:
            if event.reason is None:
                continue  # NB: counts toward no reason the test asks about
            counts[event.reason] = counts.get(event.reason, 0) + (event.count or 1)
            if event.reason == "TrialRetried":
                retried += int(str(event.message).split(" ", 1)[0]) * (event.count or 1)
        done = retried >= infra_rows and "Completed" in counts
        return (counts, retried) if done else None

    counts, retried = wait_for(tolerant(story), 180, "every TrialRetried and the Completed event")
    assert retried == infra_rows
    assert counts["TrialRetried"] <= infra_rows
    assert counts["Started"] == 1
    assert counts["Completed"] == 1


def test_a_restarted_operator_serves_the_finished_evals_gauges(
    scored: Scored, api_client: client.ApiClient, wait_for: Callable[..., Any]
) -> None:
    """No daemon runs for a finished eval, so no status write sets its gauges after a
    restart: its watch event does. And kopf puts no finalizer back on it."""
    old_port = scored.port
    scored.operator.stop()
    scored.operator.start()
    # NB: the log is appended to; the restarted process logs its own (random) port
    scored.port = wait_for(
        lambda: (port := metrics_port(scored.operator)) != old_port and port,
        120,
        "the restarted operator's metrics port",
    )
    labels = {"namespace": scored.namespace, "eval": "scored"}
    status = scored.body["status"]

    def gauges() -> dict[int, float] | None:
        samples = scrape(scored.port)
        found = {
            row["k"]: sample(samples, "passhat_pass_hat_k", **labels, k=str(row["k"]))
            for row in status["summary"]["byK"]
        }
        return None if None in found.values() else found  # type: ignore[return-value]

    found = wait_for(gauges, 120, "the finished eval's gauges on the restarted operator")
    assert found == {row["k"]: pytest.approx(row["passHatK"]) for row in status["summary"]["byK"]}
    assert sample(scrape(scored.port), "passhat_flaky_tasks", **labels) == 3
    body = get_eval(api_client, scored.namespace, "scored")
    assert body is not None and "passhat.dev/operator" not in (
        body["metadata"].get("finalizers") or []
    )


def test_deleting_the_eval_drops_its_series(
    scored: Scored, api_client: client.ApiClient, wait_for: Callable[..., Any]
) -> None:
    """Once the eval is deleted, none of its series remain on /metrics (a finished eval has
    no finalizer: its DELETED watch event drops them)."""
    client.CustomObjectsApi(api_client).delete_namespaced_custom_object(
        "passhat.dev", "v1alpha1", scored.namespace, "consistencyevals", "scored"
    )

    def gone() -> bool:
        return not [
            name for name, pairs in scrape(scored.port) if ("namespace", scored.namespace) in pairs
        ]

    wait_for(gone, 180, "the deleted eval's series to leave /metrics")


def test_report_of_a_missing_eval_is_one_line(scored: Scored, cluster: Any) -> None:
    """A missing eval: exit 2 and one line naming it, never a traceback."""
    result = passhat(cluster, "report", "nope", "-n", scored.namespace)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "nope" in lines[0] and scored.namespace in lines[0], result.stderr


def test_sigterm_stops_the_operator_cleanly(scored: Scored) -> None:
    """SIGTERM (a Deployment rollout, Ctrl-C) ends `passhat operator` with exit code 0."""
    proc = scored.operator.proc
    assert proc is not None and proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 0, scored.operator.log_tail()
