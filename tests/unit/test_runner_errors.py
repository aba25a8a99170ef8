"""passhat trial: a command that cannot run is said, never silent."""

from __future__ import annotations

from pathlib import Path

import pytest

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
