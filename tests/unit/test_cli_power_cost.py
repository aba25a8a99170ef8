"""`passhat power --k K` from a pilot run directory: the plan for pass^K, priced by the
cost the pilot's trials reported (every attempt's, over its graded trials)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from passhat.cli import main


def _pilot(tmp_path: Path) -> Path:
    """A run directory: 10 tasks x 4 trials at $0.05, plus one infra attempt at $0.05."""
    run = tmp_path / "pilot"
    run.mkdir()
    lines = []
    for task in range(10):
        for trial in range(4):
            outcome = "pass" if (task + trial) % 3 else "fail"
            lines.append(
                {
                    "task_id": f"t{task}",
                    "trial": trial,
                    "attempt": 0,
                    "outcome": outcome,
                    "reason": "exit_code",
                    "exit_code": 0,
                    "duration_s": 1.0,
                    "final": True,
                    "cost_usd": 0.05,
                }
            )
    lines.append(dict(lines[0], attempt=1, outcome="infra_error", reason="evicted", final=False))
    (run / "trials.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run


def test_power_for_pass_hat_k_priced_from_the_pilot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """41 attempts x $0.05 over 40 graded trials: $0.05125 a trial; rows from n = k."""
    code = main(
        ["power", "--pilot", str(_pilot(tmp_path)), "--diff", "0.2", "--k", "2", "--format", "json"]
    )
    plan = json.loads(capsys.readouterr().out)
    assert code == 0 and plan["metric"] == "passHatK" and plan["k"] == 2
    assert plan["cost_per_trial_usd"] == pytest.approx(41 * 0.05 / 40)
    assert [row["trials"] for row in plan["rows"]] == [2, 4, 8, 16, 32]
    for row in plan["rows"]:
        assert row["total_trials"] == row["trials"] * row["tasks"]
        assert row["cost_usd"] == pytest.approx(row["total_trials"] * 41 * 0.05 / 40, abs=1e-4)


def test_text_plan_shows_the_dollars_and_an_explicit_price_wins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--cost-per-trial overrides the pilot's; the text table has a cost column."""
    code = main(
        [
            "power",
            "--pilot",
            str(_pilot(tmp_path)),
            "--diff",
            "0.2",
            "--trials",
            "4",
            "--cost-per-trial",
            "1.5",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "cost per agent" in out and "$1.5000 per graded trial" in out
    tasks = int(out.split("\n")[3].split()[1])
    assert f"${4 * tasks * 1.5:,.2f}" in out
