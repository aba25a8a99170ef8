"""An agent's `$PASSHAT_RESULT` that is not a result JSON is ignored as documented (the exit
code decides), but never silently: trials.jsonl keeps `result_error` and stderr warns,
naming the task, trial, attempt and what was wrong (docs/local.md, Result JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from passhat.cli import main
from tests.local.local_helpers import eval_doc, write_eval


def test_ignored_result_is_named_in_journal_and_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = """
        case "$PASSHAT_TASK_ID" in
          typo) echo '{"outcome": "passed"}' > "$PASSHAT_RESULT"; exit 1 ;;
          good) echo '{"outcome": "pass"}' > "$PASSHAT_RESULT"; exit 1 ;;
          none) exit 0 ;;
        esac
    """
    path = write_eval(tmp_path / "eval.yaml", eval_doc(script, tasks=["typo", "good", "none"]))
    out = tmp_path / "out"
    code = main(["run", str(path), "--out", str(out), "-q", "--format", "json"])
    err = capsys.readouterr().err
    assert code == 0, err
    rows = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    by_task = {(r["task_id"], r["trial"]): r for r in rows}
    typo = by_task["typo", 0]
    assert typo["outcome"] == "fail" and typo["reason"] == "exit_code"
    assert typo["result_error"] == 'outcome: "passed" is not one of fail, infra_error, pass'
    assert "result_error" not in by_task["good", 0] and by_task["good", 0]["outcome"] == "pass"
    assert "result_error" not in by_task["none", 0]
    warning = (
        "passhat: warning: task typo trial 1 attempt 0: $PASSHAT_RESULT ignored, not a result "
        'JSON: outcome: "passed" is not one of fail, infra_error, pass; the exit code decided: '
        "fail\n"
    )
    assert warning in err
    assert err.count("$PASSHAT_RESULT ignored") == 2  # the typo task's two trials only
