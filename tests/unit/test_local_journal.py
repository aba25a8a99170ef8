"""trials.jsonl: records round-trip, a torn last line is dropped and cut off, bad lines fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from passhat.api.errors import InputError
from passhat.local.journal import FIELDS, Journal, read_journal, read_numbered_journal


def _record(trial: int) -> dict[str, object]:
    return {
        "task_id": "t",
        "trial": trial,
        "attempt": 0,
        "outcome": "pass",
        "reason": "exit_code",
        "exit_code": 0,
        "duration_s": 0.01,
        "final": True,
    }


def test_append_then_read(tmp_path: Path) -> None:
    """Appended records read back in order with exactly the journal's fields."""
    path = str(tmp_path / "trials.jsonl")
    journal = Journal(path)
    for trial in range(3):
        journal.append({**_record(trial), "extra": "dropped"})
    journal.close()
    records = read_journal(path)
    assert [r["trial"] for r in records] == [0, 1, 2]
    assert all(tuple(r) == FIELDS for r in records)


def test_torn_last_line_is_repaired(tmp_path: Path) -> None:
    """A last line without its newline is dropped; with repair the file is cut back."""
    path = tmp_path / "trials.jsonl"
    good = "".join(json.dumps(_record(t)) + "\n" for t in range(2))
    path.write_text(good + '{"task_id": "t", "tri')
    assert len(read_journal(str(path))) == 2
    assert path.read_text().endswith('"tri')
    assert len(read_journal(str(path), repair=True)) == 2
    assert path.read_text() == good
    journal = Journal(str(path))
    journal.append(_record(2))
    journal.close()
    assert [r["trial"] for r in read_journal(str(path))] == [0, 1, 2]


def test_garbage_in_the_middle_is_an_input_error(tmp_path: Path) -> None:
    """A bad line that is not the last one is an InputError naming the line."""
    path = tmp_path / "trials.jsonl"
    path.write_text(json.dumps(_record(0)) + "\nnot json\n" + json.dumps(_record(1)) + "\n")
    with pytest.raises(InputError) as err:
        read_journal(str(path))
    assert err.value.line == 2


def test_missing_journal_is_empty(tmp_path: Path) -> None:
    """No journal yet means no records."""
    assert read_journal(str(tmp_path / "none.jsonl")) == []


def test_records_carry_their_file_line_numbers(tmp_path: Path) -> None:
    """Blank lines are skipped but counted: each record keeps the line number of the file."""
    path = tmp_path / "trials.jsonl"
    lines = [json.dumps(_record(0)), "", "  ", json.dumps(_record(1)), "", json.dumps(_record(2))]
    path.write_text("\n".join(lines) + "\n")
    numbered = read_numbered_journal(str(path))
    assert [(number, record["trial"]) for number, record in numbered] == [(1, 0), (4, 1), (6, 2)]


def test_close_does_not_wait_for_the_group_commit_timer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """close() syncs what is left itself: it never sits out the syncer's pause between fsyncs."""
    import threading
    import time

    from passhat.local import journal as journal_module

    monkeypatch.setattr(journal_module, "SYNC_INTERVAL", 600.0)
    path = str(tmp_path / "trials.jsonl")
    journal = Journal(path)
    journal.append(_record(0))
    deadline = time.monotonic() + 60
    while journal._dirty.is_set() and time.monotonic() < deadline:  # the first group commit
        time.sleep(0.01)
    journal.append(_record(1))  # waits for the next group commit, 600 s away
    closer = threading.Thread(target=journal.close)
    closer.start()
    closer.join(timeout=30)
    assert not closer.is_alive(), "close() waited for the syncer's timer"
    assert [r["trial"] for r in read_journal(path)] == [0, 1]
