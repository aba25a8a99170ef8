"""passhat.records.source.RunDirectory: a run directory or bundle read strictly, as score does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from passhat.api.errors import InputError
from passhat.records.layout import transcript_name
from passhat.records.source import RunDirectory, read_records


def line(task_id: str, trial: int, attempt: int = 0, outcome: str = "pass", **extra: Any) -> str:
    """One trials.jsonl line."""
    record = {"task_id": task_id, "trial": trial, "attempt": attempt, "outcome": outcome}
    record.update({"reason": "exit_code", "exit_code": 0, "duration_s": 0.1, "final": True})
    record.update(extra)
    return json.dumps(record) + "\n"


def test_missing_directory_names_it(tmp_path: Path) -> None:
    """A SOURCE directory that does not exist is an InputError naming it."""
    with pytest.raises(InputError, match="no such directory") as err:
        RunDirectory(str(tmp_path / "nope"))
    assert err.value.path == str(tmp_path / "nope")


def test_directory_without_journal_names_the_file(tmp_path: Path) -> None:
    """A directory without trials.jsonl is not a run: the error names the missing file."""
    with pytest.raises(InputError, match=r"no trials\.jsonl") as err:
        RunDirectory(str(tmp_path))
    assert err.value.path == str(tmp_path / "trials.jsonl")


def test_torn_last_line_is_refused_with_its_line(tmp_path: Path) -> None:
    """A last line cut short by a killed run names file and line and says why."""
    path = tmp_path / "trials.jsonl"
    path.write_text(line("a", 0) + line("a", 1)[:20])
    with pytest.raises(InputError) as err:
        read_records(str(path))
    assert str(err.value).startswith(f"{path}:2: bad JSON")
    assert "the last line has no newline" in str(err.value)


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ('{"task_id": "a", "trial": 0, "attempt": 0}', "missing 'outcome'"),
        ('{"task_id": "a", "trial": -1, "attempt": 0, "outcome": "pass"}', "trial must be"),
        ('{"task_id": "a", "trial": 0, "attempt": 0, "outcome": "passed"}', "unknown outcome"),
        ("[1, 2]", "expected a JSON object"),
        ("{not json", "bad JSON"),
    ],
)
def test_bad_line_names_file_line_and_field(tmp_path: Path, bad: str, needle: str) -> None:
    """A line that is not a record is an InputError with its line number and the problem."""
    path = tmp_path / "trials.jsonl"
    path.write_text(line("a", 0) + bad + "\n" + line("a", 1))
    with pytest.raises(InputError, match=needle) as err:
        read_records(str(path))
    assert err.value.line == 2


def test_repeated_attempt_counts_once(tmp_path: Path) -> None:
    """A line repeating an earlier task, trial and attempt is the same attempt, read once."""
    path = tmp_path / "trials.jsonl"
    path.write_text(line("a", 0) + "\n" + line("a", 0) + line("a", 0, 1))
    records = read_records(str(path))
    assert [(r["trial"], r["attempt"]) for r in records] == [(0, 0), (0, 1)]


def test_whole_last_line_without_newline_is_read(tmp_path: Path) -> None:
    """A last line that is a whole record without its newline is read, as score reads it."""
    path = tmp_path / "trials.jsonl"
    path.write_text(line("a", 0) + line("a", 1).rstrip("\n"))
    assert len(read_records(str(path))) == 2


def test_transcript_and_result_come_from_the_layout(tmp_path: Path) -> None:
    """transcript() and result() read transcripts/<task>/<t>-<a>.log and results/...json."""
    (tmp_path / "trials.jsonl").write_text(line("x/y", 0) + line("x/y", 1, result={"s": 1}))
    name = transcript_name("x/y")
    (tmp_path / "transcripts" / name).mkdir(parents=True)
    (tmp_path / "transcripts" / name / "0-0.log").write_bytes(b"hello\n")
    (tmp_path / "results" / name).mkdir(parents=True)
    (tmp_path / "results" / name / "0-0.json").write_bytes(b'{"outcome": "pass"}')
    source = RunDirectory(str(tmp_path))
    first, second = source.records()
    assert source.transcript(first) == b"hello\n"
    assert source.result(first) == b'{"outcome": "pass"}'
    assert source.transcript(second) is None
    # NB: a bundle's trials.jsonl also carries the cluster's result inline
    assert json.loads(source.result(second) or b"") == {"s": 1}
