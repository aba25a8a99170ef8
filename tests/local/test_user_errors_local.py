"""User errors about a run directory: refused with one line, and no recorded trial lost.

Driven in-process through `passhat.cli.main` after one real (tiny) local run, these check
the two mistakes a user makes with an existing `--out`: running into it again without
`--resume`, and resuming a `trials.jsonl` damaged in the middle. Either way passhat must
stop with exit 2 and one line naming the file (and line), and leave every recorded trial
exactly as it was.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from passhat.cli import main
from tests.local.local_helpers import eval_doc, write_eval

TRIALS = 3


def _run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str]:
    """`passhat argv...` in-process; returns (exit code, stderr)."""
    code = main([str(arg) for arg in argv])
    return code, capsys.readouterr().err


def _finished_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    """A completed two-task run: (eval path, out dir)."""
    path = write_eval(tmp_path / "eval.yaml", eval_doc("exit 0", tasks=["a", "b"], trials=TRIALS))
    out = tmp_path / "out"
    code, err = _run(capsys, "run", path, "--out", out, "-q", "--format", "json")
    assert code == 0, err
    assert len((out / "trials.jsonl").read_text().splitlines()) == 2 * TRIALS
    return path, out


def _assert_one_error_line(err: str, expected: str) -> None:
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    assert err.startswith("passhat: error: ")
    assert expected in err, err


def test_existing_run_dir_without_resume_keeps_every_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Running into a finished run's --out without --resume: exit 2, trials.jsonl untouched."""
    path, out = _finished_run(tmp_path, capsys)
    before = (out / "trials.jsonl").read_bytes()
    code, err = _run(capsys, "run", path, "--out", out, "-q")
    assert code == 2
    _assert_one_error_line(err, f"{out}: a run directory already exists there; pass --resume")
    assert (out / "trials.jsonl").read_bytes() == before


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("cut", "not a trial record"),
        ("unknown outcome", "does not belong to this eval"),
        ("unknown task", "does not belong to this eval"),
    ],
)
def test_resume_on_a_corrupted_middle_line_names_it_and_keeps_every_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, expected: str
) -> None:
    """--resume on a trials.jsonl damaged mid-file: exit 2 naming file:line, nothing dropped."""
    path, out = _finished_run(tmp_path, capsys)
    journal = out / "trials.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    record = json.loads(lines[2])
    if damage == "cut":
        lines[2] = lines[2][:30] + "\n"
    elif damage == "unknown outcome":
        lines[2] = json.dumps({**record, "outcome": "passed"}) + "\n"
    else:
        lines[2] = json.dumps({**record, "task_id": "renamed"}) + "\n"
    journal.write_text("".join(lines))
    before = journal.read_bytes()
    code, err = _run(capsys, "run", path, "--out", out, "--resume", "-q")
    assert code == 2
    _assert_one_error_line(err, f"{journal}:3: {expected}")
    assert journal.read_bytes() == before


def test_resume_after_a_torn_last_line_keeps_every_complete_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A crash mid-write leaves a torn last line: --resume drops only it and reruns that slot."""
    path, out = _finished_run(tmp_path, capsys)
    journal = out / "trials.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(lines[:-1]) + lines[-1][:20])
    code, err = _run(capsys, "run", path, "--out", out, "--resume", "-q", "--format", "json")
    assert code == 0, err
    after = journal.read_text().splitlines(keepends=True)
    assert after[:-1] == lines[:-1]
    slots = {(json.loads(line)["task_id"], json.loads(line)["trial"]) for line in after}
    assert len(after) == len(slots) == 2 * TRIALS
