"""passhat trial / regrade: a command that cannot run is said, never silent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from passhat.api.errors import UsageError
from passhat.runner.regrade import find_transcripts, regrade, render_regrade
from passhat.runner.trial import run_trial


def test_agent_that_cannot_start_is_named_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`passhat trial -- agnet-typo` exited 75 and printed nothing."""
    code = run_trial(
        ["passhat-no-such-agent-xyz", "--flag"],
        transcript=str(tmp_path / "t.log"),
        result_path=str(tmp_path / "result.json"),
    )
    assert code == 75
    err = capsys.readouterr().err
    assert err == (
        "passhat trial: cannot run the agent 'passhat-no-such-agent-xyz': "
        "No such file or directory\n"
    )
    assert "cannot run the agent" in (tmp_path / "result.json").read_text()


def _run_dir(tmp_path: Path) -> Path:
    (tmp_path / "run" / "transcripts").mkdir(parents=True)
    (tmp_path / "run" / "transcripts" / "a.log").write_text("hello\n")
    return tmp_path / "run"


def test_grader_that_never_runs_is_an_error(tmp_path: Path) -> None:
    """--grader nonexistent-cmd printed "noise rate 0.000" and exited 0."""
    with pytest.raises(UsageError, match=r"the grader broke on all 2 gradings: .*exited 127"):
        regrade(str(_run_dir(tmp_path)), "passhat-no-such-grader-xyz", times=2)


def test_grader_infra_errors_are_in_the_text_report(tmp_path: Path) -> None:
    flag = tmp_path / "once"
    grader = f"if [ -e {flag} ]; then exit 0; else touch {flag}; echo boom >&2; exit 3; fi"
    result = regrade(str(_run_dir(tmp_path)), grader, times=3)
    text = render_regrade(result, "text")
    assert "grader infra errors: 1 of 3 gradings (not counted); e.g. the grader exited 3: boom" in (
        text
    )
    assert result.as_json()["infra_errors"] == 1


def test_regrade_skips_transcripts_that_are_not_regular_files(tmp_path: Path) -> None:
    """A FIFO named `*.log` under transcripts/ would block the grader's read: skipped."""
    transcripts = tmp_path / "transcripts" / "t"
    transcripts.mkdir(parents=True)
    (transcripts / "0-0.log").write_text("ok\n")
    os.mkfifo(transcripts / "1-0.log")
    assert find_transcripts(str(tmp_path)) == [str(transcripts / "0-0.log")]
