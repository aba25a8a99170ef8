"""--resume names the file line of a record that does not fit, blank lines included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from passhat.cli import main
from tests.local.local_helpers import eval_doc, write_eval


def _record(task_id: str, trial: int) -> str:
    return json.dumps(
        {
            "task_id": task_id,
            "trial": trial,
            "attempt": 0,
            "outcome": "pass",
            "reason": "exit_code",
            "exit_code": 0,
            "duration_s": 0.01,
            "final": True,
        }
    )


def test_bad_record_after_blank_lines_names_its_file_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record of an unknown task on line 4 (after two blank lines) is reported as line 4."""
    path = write_eval(tmp_path / "eval.yaml", eval_doc("exit 0", tasks=["a", "b"], trials=2))
    out = tmp_path / "out"
    out.mkdir()
    journal = out / "trials.jsonl"
    lines = [_record("a", 0), "", "", _record("renamed", 0), _record("b", 0)]
    journal.write_text("\n".join(lines) + "\n")
    before = journal.read_bytes()
    code = main(["run", str(path), "--out", str(out), "--resume", "-q"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        f'passhat: error: {journal}:4: does not belong to this eval: task "renamed" is not '
        "in the eval\n"
    )
    assert journal.read_bytes() == before
