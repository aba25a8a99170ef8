"""`passhat score RUNDIR` and `passhat power --pilot DIR` take the run directory `passhat run`
names on its last line, as `compare`, `history`, `trials` and `transcripts` do; a tau2-bench
directory is still read as tau2-bench results (it has no trials.jsonl)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from passhat.cli import main
from tests.local.local_helpers import eval_doc, write_eval

TAU2_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "tau2" / "dir"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_score_and_power_read_a_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = '[ "$PASSHAT_TASK_ID" = good ] || exit $((PASSHAT_TRIAL % 2))'
    path = write_eval(tmp_path / "eval.yaml", eval_doc(script, tasks=["good", "flaky"], trials=4))
    out = tmp_path / "run"
    code, _, err = _cli(capsys, "run", path, "--out", out, "-q", "--format", "json")
    assert code == 0, err
    code, by_dir, err = _cli(capsys, "score", out, "--format", "json")
    assert code == 0, err
    _, by_file, _ = _cli(capsys, "score", out / "trials.jsonl", "--format", "json")
    assert json.loads(by_dir) == json.loads(by_file)
    code, _, err = _cli(capsys, "score", out, "--gate", "passHatK@2>=0.9")
    assert code == 1 and "gate FAILED: passHatK at k=2" in err
    code, plan, err = _cli(capsys, "power", "--pilot", out, "--diff", "0.2")
    assert code == 0 and "trials per task" in plan, err


def test_a_tau2_directory_is_still_tau2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "score", TAU2_DIR, "--format", "json")
    assert code == 0, err
    code, plan, err = _cli(capsys, "power", "--pilot", TAU2_DIR, "--diff", "0.2")
    assert code == 0 and "trials per task" in plan, err


def test_the_journal_name_matches_the_layout() -> None:
    """report cannot import records (layers), so it names trials.jsonl itself: the same."""
    from passhat.records.layout import TRIALS
    from passhat.report import commands

    assert commands.TRIALS == TRIALS
