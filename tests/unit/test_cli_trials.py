"""`passhat trials SOURCE`: every attempt as trials.jsonl, from a directory or a cluster eval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from passhat.operator.records_source import is_eval_name
from tests.unit.records_fake import install, jsonl_records, one_line_error, run, sample_client


def write_run(directory: Path) -> list[dict[str, object]]:
    """A run directory by hand: three attempts, one an OOM kill with a message."""
    records: list[dict[str, object]] = [
        {"task_id": "a", "trial": 0, "attempt": 0, "outcome": "infra_error",
         "reason": "oom_killed", "exit_code": 137, "duration_s": 0.5, "final": False},
        {"task_id": "a", "trial": 0, "attempt": 1, "outcome": "pass", "reason": "result",
         "exit_code": 0, "duration_s": 0.5, "final": True, "message": "all good"},
        {"task_id": "b", "trial": 0, "attempt": 0, "outcome": "fail", "reason": "exit_code",
         "exit_code": 1, "duration_s": 0.5, "final": True},
    ]  # fmt: skip
    directory.mkdir(exist_ok=True)
    (directory / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def test_directory_prints_its_records(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """trials DIR prints each journal record as it is, and a by-reason summary on stderr."""
    records = write_run(tmp_path / "run")
    code, out, err = run(capsys, "trials", str(tmp_path / "run"))
    assert code == 0, err
    assert jsonl_records(out) == records
    assert err == (
        f"passhat: 3 attempts of 2 tasks in {tmp_path / 'run'}; "
        "infra errors by reason: oom_killed 1\n"
    )


def test_cluster_eval_prints_every_field(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """trials NAME -n NS prints the records API's records, cluster fields included."""
    client = sample_client()
    install(monkeypatch, client)
    code, out, err = run(capsys, "trials", "ev", "-n", "ns")
    assert code == 0, err
    assert jsonl_records(out) == client._records
    assert "infra errors by reason: evicted 1, oom_killed 1" in err


def test_output_is_what_score_and_compare_read(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """score and compare read `trials --out FILE` of a cluster eval like any trials.jsonl."""
    install(monkeypatch, sample_client())
    out_file = tmp_path / "ev.jsonl"
    code, out, err = run(capsys, "trials", "ev", "-n", "ns", "--out", str(out_file))
    assert code == 0, err
    assert out == ""
    assert f"passhat: wrote {out_file}" in err
    code, score, err = run(capsys, "score", str(out_file), "--format", "json", "--k", "2")
    assert code == 0, err
    summary = json.loads(score)[0]
    assert summary["flaky"] == ["flaky/one"]
    assert summary["infra_error_rate"] == 2 / 8
    code, text, err = run(capsys, "score", str(out_file), "--no-intervals")
    assert "infra errors by reason: evicted 1, oom_killed 1" in text
    code, compared, err = run(capsys, "compare", str(out_file), str(out_file), "--k", "1")
    assert code == 0, err
    assert "within noise" in compared


def test_missing_directory_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A path-like SOURCE that does not exist is a missing directory, not an eval name."""
    code, _, err = run(capsys, "trials", str(tmp_path / "nope"))
    one_line_error(code, err, str(tmp_path / "nope"), "no such directory")


def test_torn_journal_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A run directory whose trials.jsonl ends in a torn line exits 2 naming file and line."""
    write_run(tmp_path / "run")
    with open(tmp_path / "run" / "trials.jsonl", "a") as handle:
        handle.write('{"task_id": "b", "tri')
    code, _, err = run(capsys, "trials", str(tmp_path / "run"))
    one_line_error(code, err, f"{tmp_path / 'run' / 'trials.jsonl'}:4:", "no newline")


def test_unknown_eval_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An eval the records API does not know is the client's one-line error, exit 2."""
    install(monkeypatch, sample_client())
    code, _, err = run(capsys, "trials", "other", "-n", "ns")
    one_line_error(code, err, "other")


def test_source_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An existing directory or anything path-like is a directory; a bare name an eval."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ev").mkdir()
    assert not is_eval_name("ev")
    assert not is_eval_name("./other")
    assert not is_eval_name("runs/x")
    assert not is_eval_name("Not_A_Name")
    assert is_eval_name("other")
    assert is_eval_name("support-agent.v2")


def test_records_client_has_the_shape_cluster_source_reads() -> None:
    """The real RecordsClient is a RecordsReader (mypy checks this assignment)."""
    from passhat.operator.records_client import RecordsClient
    from passhat.operator.records_source import RecordsReader

    reader: type[RecordsReader] = RecordsClient
    assert callable(reader.records) and callable(reader.transcript)


def test_a_name_without_a_cluster_says_both(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A bare name that is no directory, with no kubeconfig, is one line saying both."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "trials", "myrun")
    one_line_error(code, err, "myrun: no such directory", "no-kubeconfig")
