"""read_numbered_journal: a record whose fields have the wrong types names its line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from passhat.api.errors import InputError
from passhat.local.journal import read_numbered_journal

GOOD: dict[str, Any] = {
    "task_id": "a",
    "trial": 1,
    "attempt": 1,
    "outcome": "pass",
    "reason": "exit_code",
    "exit_code": 0,
    "duration_s": 0.1,
    "final": True,
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"task_id": ["b"]}, 'task_id must be a string, got ["b"]'),
        ({"trial": 1.7}, "trial must be a non-negative integer, got 1.7"),
        ({"trial": True}, "trial must be a non-negative integer, got true"),
        ({"attempt": "1"}, 'attempt must be a non-negative integer, got "1"'),
        ({"attempt": -1}, "attempt must be a non-negative integer, got -1"),
        ({"outcome": None}, "outcome must be a string, got null"),
        ({"reason": 3}, "reason must be a string, got 3"),
    ],
)
@pytest.mark.parametrize("last", [False, True], ids=["middle", "last"])
def test_wrong_types_name_the_line(
    tmp_path: Path, change: dict[str, Any], message: str, last: bool
) -> None:
    """`"task_id": ["b"]` was a TypeError (unhashable) on --resume; `"trial": 1.7` trial 1."""
    bad = json.dumps({**GOOD, **change})
    lines = [json.dumps(GOOD), bad] if last else [json.dumps(GOOD), bad, json.dumps(GOOD)]
    path = tmp_path / "trials.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as info:
        read_numbered_journal(str(path), repair=True)
    assert str(info.value) == f"{path}:2: not a trial record: {message}"
    assert path.read_text() == "\n".join(lines) + "\n"  # NB: not cut off as a torn line


def test_good_records_still_read(tmp_path: Path) -> None:
    path = tmp_path / "trials.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + json.dumps({**GOOD, "trial": 2}) + "\n")
    assert [(n, r["trial"]) for n, r in read_numbered_journal(str(path))] == [(1, 1), (3, 2)]
