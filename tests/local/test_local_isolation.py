"""Each attempt gets a fresh empty directory, a clean environment and its own session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.local.local_helpers import RunEval, eval_doc, rows

# Trial 0 leaves a file behind; any trial that sees a file fails. The environment is
# dumped into the transcript. NB: `$$$$` is the shell's `$$` after Kubernetes' expansion.
SCRIPT = """
[ -z "$(ls -A)" ] || { echo "dirty: $(ls -A)"; exit 1; }
[ "$PWD" = "$HOME" ] && [ "$TMPDIR" = "$HOME" ] || exit 1
touch leftover "$TMPDIR/also-left"
env | sort
[ "$(ps -o sid= -p $$$$ | tr -d ' ')" = "$$$$" ] || { echo "not a session leader"; exit 1; }
"""


def test_fresh_directory_and_clean_environment(
    run_eval: RunEval, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No file or caller variable reaches a trial; PASSHAT_* and the container env do."""
    monkeypatch.setenv("SECRET_TOKEN", "leak")
    doc = eval_doc(
        SCRIPT,
        tasks=["t"],
        trials=3,
        parallelism=1,
        env=[{"name": "GREETING", "value": "hi"}, {"name": "BOTH", "value": "$(GREETING)!"}],
    )
    doc["spec"]["tasks"][0]["params"] = {"x": 1}
    proc, out = run_eval(doc)
    assert proc.returncode == 0, proc.stderr
    assert [r["outcome"] for r in rows(out)] == ["pass"] * 3
    text = (out / "transcripts" / "t" / "2-0.log").read_text()
    env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    assert "SECRET_TOKEN" not in env
    assert env["GREETING"] == "hi" and env["BOTH"] == "hi!"
    assert env["PASSHAT_EVAL"] == "t" and env["PASSHAT_TASK_ID"] == "t"
    assert json.loads(env["PASSHAT_TASK"]) == {"x": 1}
    assert (env["PASSHAT_TRIAL"], env["PASSHAT_ATTEMPT"]) == ("2", "0")
    assert "PATH" in env and "PASSHAT_RESULT" in env


def test_odd_trials_do_not_break_the_run(run_eval: RunEval) -> None:
    """A directory or a FIFO at $PASSHAT_RESULT, a deleted cwd, a read-only tree: cleaned up.

    (A FIFO with no writer left must not block the read of the result.)
    """
    script = """
    case "$PASSHAT_TRIAL" in
      0) mkdir "$PASSHAT_RESULT"; exit 0 ;;
      1) cd /; rm -rf "$HOME"; exit 1 ;;
      2) mkdir -p deep/er && touch deep/er/f && chmod -R a-w deep; exit 0 ;;
      3) mkfifo "$PASSHAT_RESULT"; exit 1 ;;
      *) [ -z "$(ls -A "$HOME")" ] && [ ! -e "$PASSHAT_RESULT" ] ;;
    esac
    """
    proc, out = run_eval(eval_doc(script, tasks=["t"], trials=6, parallelism=1))
    assert proc.returncode == 0, proc.stderr
    assert [r["outcome"] for r in rows(out)] == ["pass", "fail", "pass", "fail", "pass", "pass"]
