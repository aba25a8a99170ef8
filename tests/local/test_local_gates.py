"""Release gates locally: `passhat run` and `passhat score --gate` share exit codes, and a
lowerBound gate fails where the estimate alone passes (docs/scoring.md#exit-codes)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.local.local_helpers import RunEval, eval_doc, passhat

# Nine tasks always pass, one always fails: pass^2 is exactly 0.9, but with ten tasks its
# 95% bootstrap interval over tasks reaches well below 0.9.
SCRIPT = 'test "$PASSHAT_TASK_ID" != bad'
TASKS = [f"t{i}" for i in range(9)] + ["bad"]


def _doc(**gate: object) -> dict[str, object]:
    return eval_doc(
        SCRIPT,
        tasks=TASKS,
        trials=2,
        ks=[1, 2],
        gate={"metric": "passHatK", "k": 2, "min": 0.9, **gate},
    )


def test_estimate_passes_where_the_lower_bound_fails(run_eval: RunEval) -> None:
    """The same trials: the estimate gate exits 0, the lowerBound gate exits 1 and says
    which bound missed; the report carries the intervals."""
    proc, _ = run_eval(_doc(), name="estimate")
    assert proc.returncode == 0, proc.stderr
    assert "passhat: gate passed: passHatK at k=2 is 0.9000 (min 0.9)" in proc.stderr

    proc, out = run_eval(_doc(statistic="lowerBound"), "--format", "text", name="bound")
    assert proc.returncode == 1, proc.stderr
    assert "passhat: gate FAILED: passHatK at k=2: lower bound 0." in proc.stderr
    assert "of its 95% interval (estimate 0.9000), min 0.9" in proc.stderr
    assert "90.0% [" in proc.stdout and "95% bootstrap intervals over tasks" in proc.stdout
    assert proc.stdout.splitlines()[0] == "passhat · t; gate FAILED"

    trials = out / "trials.jsonl"
    gate = "passHatK@2>=0.9"
    assert passhat("score", trials, "--gate", gate).returncode == 0
    scored = passhat("score", trials, "--gate", gate, "--gate-statistic", "lowerBound")
    assert scored.returncode == 1, scored.stderr
    # NB: the same seeded draw as the run's: the same bound, to the digit
    line = next(x for x in proc.stderr.splitlines() if "gate FAILED" in x)
    assert line in scored.stderr


def test_a_lower_confidence_lets_the_bound_pass(run_eval: RunEval, tmp_path: Path) -> None:
    """At confidence 0.5 the bound (the 25th percentile) clears 0.5: exit 0; the metrics
    textfile carries the intervals at that level."""
    metrics = tmp_path / "metrics.prom"
    doc = _doc(statistic="lowerBound", confidence=0.5, min=0.5)
    proc, _ = run_eval(doc, "--metrics-textfile", str(metrics))
    assert proc.returncode == 0, proc.stderr
    (_, row_2) = json.loads(proc.stdout)
    assert row_2["pass_hat_k"] == 0.9
    text = metrics.read_text()
    assert 'passhat_interval_bound{bound="high",eval="t",k="2",metric="pass_hat_k"' in text
    assert "passhat_gate_passed" in text


def test_score_gate_exit_codes(tmp_path: Path) -> None:
    """`passhat score --gate`: 0 passed, 1 failed, 2 for a gate it cannot parse (named)."""
    trials = tmp_path / "t.jsonl"
    trials.write_text(
        "".join(
            json.dumps({"task_id": t, "outcome": o}) + "\n"
            for t, o in [("a", "pass"), ("a", "pass"), ("b", "pass"), ("b", "fail")]
        )
    )
    assert passhat("score", trials, "--gate", "passHatK@2>=0.5").returncode == 0
    assert passhat("score", trials, "--gate", "passHatK@2>=0.6").returncode == 1
    assert passhat("score", trials, "--gate", "meanPassRate@1>=0.75").returncode == 0
    for bad, says in [
        ("passHatK@2>0.9", "expected METRIC@K>=MIN"),
        ("passhatk@2>=0.9", "unknown metric 'passhatk'"),
        ("passHatK@0>=0.9", "k: Input should be greater than or equal to 1"),
        ("passHatK@2>=1.5", "min: Input should be less than or equal to 1"),
    ]:
        proc = passhat("score", trials, "--gate", bad)
        assert proc.returncode == 2, (bad, proc.stderr)
        assert f"--gate {bad!r}: {says}" in proc.stderr, proc.stderr
    assert passhat("score", tmp_path / "missing.jsonl", "--gate", "passHatK@1>=0").returncode == 2
