"""The journal writes the classifier's message beside the record's fields, only when it has one."""

from __future__ import annotations

import json
from pathlib import Path

from passhat.local.journal import Journal, read_journal

RECORD = {
    "task_id": "a",
    "trial": 0,
    "attempt": 0,
    "outcome": "fail",
    "reason": "exit_code",
    "exit_code": 1,
    "duration_s": 0.1,
    "final": True,
}


def test_message_is_written_when_not_empty(tmp_path: Path) -> None:
    """A record with a message gets `message` last; one with an empty message none."""
    path = tmp_path / "trials.jsonl"
    journal = Journal(str(path))
    journal.append({**RECORD, "message": "exit code 1"})
    journal.append({**RECORD, "trial": 1, "message": ""})
    journal.append({**RECORD, "trial": 2})
    journal.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert list(lines[0]) == [*RECORD, "message"]
    assert lines[0]["message"] == "exit code 1"
    assert [list(line) for line in lines[1:]] == [list(RECORD)] * 2
    assert len(read_journal(str(path))) == 3
