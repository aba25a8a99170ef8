"""`passhat transcripts SOURCE --task ID`: a task's transcripts and results, local or cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from passhat.records.layout import transcript_name
from tests.unit.records_fake import install, one_line_error, run, sample_client

FLAKY = transcript_name("flaky/one")


def test_stdout_has_each_attempt_under_a_header(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each attempt of the task prints under `==> PATH (...) <==`, its result JSON after."""
    install(monkeypatch, sample_client())
    code, out, err = run(capsys, "transcripts", "ev", "-n", "ns", "--task", "flaky/one")
    assert code == 0, err
    assert out.splitlines()[:4] == [
        f"==> transcripts/{FLAKY}/0-0.log (task flaky/one, trial 0, attempt 0: "
        "infra_error, oom_killed) <==",
        "log of flaky/one 0-0",
        f"==> transcripts/{FLAKY}/0-1.log (task flaky/one, trial 0, attempt 1: pass, result) <==",
        "log of flaky/one 0-1",
    ]
    assert f"==> results/{FLAKY}/0-1.json <==" in out
    assert '"score": 1.0' in out
    assert out.count("==> transcripts/") == 3


def test_trial_and_attempt_narrow_the_choice(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--trial and --attempt pick one attempt; only its transcript is fetched, from the
    eval whose records were read (its uid pinned)."""
    client = sample_client()
    install(monkeypatch, client)
    argv = ("transcripts", "ev", "-n", "ns", "--task", "flaky/one", "--trial", "0")
    code, out, err = run(capsys, *argv, "--attempt", "1")
    assert code == 0, err
    assert out.count("==> transcripts/") == 1
    assert [c for c in client.calls if c[0] == "transcript"] == [
        ("transcript", "flaky/one", "0", "1", "0000-1111")
    ]


def test_out_writes_the_run_directory_layout(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """--out DIR writes DIR/transcripts/<task>/<t>-<a>.log and DIR/results/... only."""
    install(monkeypatch, sample_client())
    argv = ("transcripts", "ev", "-n", "ns", "--task", "flaky/one", "--out", str(tmp_path / "o"))
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert out == ""
    files = sorted(str(p.relative_to(tmp_path / "o")) for p in (tmp_path / "o").rglob("*.*"))
    assert files == [
        f"results/{FLAKY}/0-1.json",
        f"transcripts/{FLAKY}/0-0.log",
        f"transcripts/{FLAKY}/0-1.log",
        f"transcripts/{FLAKY}/1-0.log",
    ]
    assert (tmp_path / "o" / "transcripts" / FLAKY / "1-0.log").read_text() == (
        "log of flaky/one 1-0\n"
    )
    assert "wrote 3 transcripts and 1 result files" in err


def test_missing_transcript_is_said(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attempt without an archived transcript prints `(no transcript)` and a note."""
    install(monkeypatch, sample_client())
    code, out, err = run(capsys, "transcripts", "ev", "-n", "ns", "--task", "steady")
    assert code == 0, err
    assert out.count("(no transcript)") == 1
    assert "1 of 2 attempts have no transcript in ns/ev" in err


def test_unknown_task_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unknown --task exits 2 naming it and the tasks there are."""
    install(monkeypatch, sample_client())
    code, _, err = run(capsys, "transcripts", "ev", "-n", "ns", "--task", "nope")
    one_line_error(code, err, "--task nope", "broken, flaky/one, steady")


def test_unknown_trial_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --trial the task does not have exits 2 naming it and the attempts there are."""
    install(monkeypatch, sample_client())
    code, _, err = run(capsys, "transcripts", "ev", "-n", "ns", "--task", "steady", "--trial", "5")
    one_line_error(code, err, "--trial 5", "0-0, 1-0")


def test_negative_trial_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """--trial -1 is refused by the parser (exit 2), before any source is read."""
    code, _, err = run(capsys, "transcripts", "x", "--task", "a", "--trial", "-1")
    assert code == 2
    assert "--trial: must be 0 or more" in err


def test_uid_picks_an_eval_and_is_refused_for_a_directory(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """--uid goes to the records API with every call; with a directory it is one line."""
    client = sample_client()
    install(monkeypatch, client)
    argv = ("transcripts", "ev", "-n", "ns", "--task", "steady", "--uid", "abc")
    code, _, err = run(capsys, *argv)
    assert code == 0, err
    assert {c[-1] for c in client.calls} == {"abc"}
    (tmp_path / "trials.jsonl").write_text("")
    code, _, err = run(capsys, "trials", str(tmp_path), "--uid", "abc")
    one_line_error(code, err, "--uid", str(tmp_path))
