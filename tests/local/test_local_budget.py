"""`passhat run` with what the trials cost: a budget stop on the cost the trials report
leaves nothing running and loses no recorded attempt; each attempt's CPU seconds (and,
in a cgroup, its peak memory) are recorded; a budget stop skips the grader stability
check (docs/scoring.md#budget)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
import yaml

from passhat.local import cgroup
from tests.local.local_helpers import RunEval, eval_doc, passhat, rows
from tests.local.test_example_noisy_judge import EXAMPLE

# Trial 0 of every task ends at once; later trials report their cost and then take long:
# the budget is reached while they run.
SCRIPT = """
echo '{"outcome": "pass", "cost_usd": 0.1, "usage": {"input_tokens": 7, "output_tokens": 2}}' \\
  > "$PASSHAT_RESULT"
[ "$PASSHAT_TRIAL" = 0 ] || sleep 60
"""


def _processes_of(marker: str) -> list[int]:
    """Pids whose environment holds `marker` (PASSHAT_EVAL of a unique eval name)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


def test_a_reported_cost_stops_the_run_with_nothing_running_and_nothing_lost(
    run_eval: RunEval,
) -> None:
    """4 tasks at $0.10, maxCostUSD 0.35: the 4 first trials end and reach it, the second
    trials running (sleep 60) are killed and not recorded; exit 1 (a gate); no process of
    the eval is left; every recorded attempt, its result and its cost are kept."""
    name = f"budget-{uuid.uuid4().hex[:8]}"
    doc = eval_doc(
        SCRIPT,
        tasks=["a", "b", "c", "d"],
        trials=3,
        name=name,
        parallelism=8,
        budget={"maxCostUSD": 0.35},
        gate={"metric": "passHatK", "k": 1, "min": 0.5},
    )
    run, out = run_eval(doc, "--format", "json-full")
    assert run.returncode == 1, run.stderr
    assert "passhat: budget exhausted: the trials reported $0.4000" in run.stderr
    assert "running trials were stopped and not recorded" in run.stderr
    assert _processes_of(f"PASSHAT_EVAL={name}") == []
    recorded = rows(out)
    assert sorted((r["task_id"], r["trial"]) for r in recorded) == [(t, 0) for t in "abcd"]
    for record in recorded:
        assert record["cost_usd"] == 0.1 and record["usage"] == {
            "input_tokens": 7,
            "output_tokens": 2,
        }
        assert (out / "results" / record["task_id"] / "0-0.json").is_file()
        assert record["resources"]["cpu_seconds"] >= 0
    report = json.loads(run.stdout)
    assert report["usage"]["total"]["cost_usd"] == pytest.approx(0.4)
    assert report["usage"]["total"]["input_tokens"] == 28
    assert report["title"].endswith("budget exhausted; gate FAILED")
    # NB: what was scored is the report's, and `passhat score` of the journal sums alike
    again = passhat("score", out / "trials.jsonl", "--format", "json-full")
    assert json.loads(again.stdout)["usage"] == report["usage"]


def test_without_a_gate_a_budget_stop_exits_3_and_max_attempts_starts_no_more(
    run_eval: RunEval, tmp_path: Path
) -> None:
    """maxAttempts 3 of 4 slots, parallelism 4: only 3 attempts ever start, all recorded,
    exit 3 (not finished, no gate); --resume with a raised budget finishes the run."""
    doc = eval_doc(
        'echo \'{"outcome": "pass", "cost_usd": 0.01}\' > "$PASSHAT_RESULT"',
        tasks=["a", "b"],
        trials=2,
        budget={"maxAttempts": 3},
    )
    run, out = run_eval(doc)
    assert run.returncode == 3, run.stderr
    assert "spec.budget.maxAttempts is 3" in run.stderr
    assert len(rows(out)) == 3
    assert len(list((out / "transcripts").rglob("*.log"))) == 3
    # NB: --resume under a raised budget runs the one slot left, nothing twice
    doc["spec"]["budget"] = {"maxAttempts": 10}
    path = tmp_path / "raised.yaml"
    path.write_text(yaml.safe_dump(doc))
    resumed = passhat("run", path, "--out", out, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert sorted((r["task_id"], r["trial"]) for r in rows(out)) == [
        ("a", 0),
        ("a", 1),
        ("b", 0),
        ("b", 1),
    ]


def test_a_bad_reported_cost_is_named_and_the_attempt_kept(
    run_eval: RunEval, tmp_path: Path
) -> None:
    """A negative cost: a warning naming the task, trial, attempt and field; the attempt
    is recorded with its outcome; the run's numbers are as without the bad report; the
    metrics textfile has the cost and the CPU seconds."""
    doc = eval_doc(
        """
        if [ "$PASSHAT_TASK_ID" = b ]; then cost=-1; else cost=0.5; fi
        echo "{\\"outcome\\": \\"pass\\", \\"cost_usd\\": $cost}" > "$PASSHAT_RESULT"
        """,
        tasks=["a", "b"],
        trials=1,
    )
    metrics = tmp_path / "passhat.prom"
    run, out = run_eval(doc, "--format", "json-full", "--metrics-textfile", str(metrics))
    assert run.returncode == 0, run.stderr
    assert (
        "passhat: warning: task b trial 0 attempt 0: result JSON cost_usd: -1 is negative"
        in run.stderr
    )
    text = metrics.read_text()
    assert 'passhat_cost_usd{eval="t",namespace="local"} 0.5' in text
    assert 'passhat_cpu_seconds{eval="t",namespace="local"}' in text
    by_task = {r["task_id"]: r for r in rows(out)}
    assert by_task["b"]["outcome"] == "pass" and "cost_usd" not in by_task["b"]
    assert by_task["b"]["spend_error"] == "cost_usd: -1 is negative"
    usage = json.loads(run.stdout)["usage"]["total"]
    assert usage["cost_usd"] == 0.5 and usage["invalid_attempts"] == 1


@pytest.mark.skipif(cgroup.detect() is None, reason="needs a writable memory cgroup (root)")
def test_peak_memory_comes_from_the_attempts_cgroup(run_eval: RunEval) -> None:
    """With a memory limit each attempt runs in a cgroup: its peak covers what it held
    (a 64 MiB buffer), and the pool's reused cgroups start each attempt afresh."""
    hold = "python3 -c 'b = bytearray(64 * 2**20); b[::4096] = b\"x\" * (len(b) // 4096)'"
    small = "python3 -c 'pass'"
    doc = eval_doc(
        f'if [ "$PASSHAT_TRIAL" = 0 ]; then {hold}; else {small}; fi',
        tasks=["a"],
        trials=3,
        parallelism=1,
        resources={"limits": {"memory": "512Mi"}},
    )
    run, out = run_eval(doc)
    assert run.returncode == 0, run.stderr
    by_trial = {r["trial"]: r["resources"] for r in rows(out)}
    assert by_trial[0]["peak_memory_bytes"] >= 64 * 2**20
    assert "cgroup" in by_trial[0]["source"]
    assert by_trial[1]["peak_memory_bytes"] < 48 * 2**20  # NB: reset, not trial 0's peak
    assert all(r["cpu_seconds"] > 0 for r in by_trial.values())


def test_a_budget_stop_skips_the_grader_stability_check(tmp_path: Path) -> None:
    """The noisy-judge example with a stability check and maxAttempts 4: stopped, the
    check does not run (no regrade, no grader-check.json), the gate fails (exit 1)."""
    body = yaml.safe_load((EXAMPLE / "eval.yaml").read_text())
    body["spec"]["gate"] = {"metric": "meanPassRate", "k": 1, "min": 0.5}
    body["spec"]["grading"]["stabilityCheck"] = {"sample": 16, "times": 3, "maxNoiseRate": 0.5}
    body["spec"]["budget"] = {"maxAttempts": 4}
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump(body))
    out = tmp_path / "out"
    run = passhat("run", path, "--out", out)
    assert run.returncode == 1, run.stderr
    assert "the grader stability check is skipped" in run.stderr
    assert "grader stable" not in run.stderr and "grader NOT stable" not in run.stderr
    assert not (out / "grader-check.json").exists()
    assert len(rows(out)) == 4
