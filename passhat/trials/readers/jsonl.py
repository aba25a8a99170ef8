"""JSON Lines trial files: one object per line with `task_id` and `outcome`.

This is passhat's own format (the local executor's `trials.jsonl`) and the easiest export
from any harness. Extra keys (trial, attempt, reason, duration_s, final, ...) are allowed
and ignored, except `trial`, kept when it is an integer, and `reason`, kept when it is a
non-empty string (the infra errors by reason of the report). Blank lines are skipped.
A line repeating the `task_id`, `trial` and `attempt` (integers) of an earlier line is the
same attempt twice (a copied line): it counts once, as in the ledger of `passhat run`.
"""

from __future__ import annotations

import json
from typing import Any

from passhat.api.errors import InputError
from passhat.trials.readers.rows import TrialRow, parse_outcome, parse_task_id

__all__ = ["TOO_MANY_DIGITS", "TORN", "parse_jsonl", "row_from_object"]

TOO_MANY_DIGITS = "bad JSON: a number with more than 4300 digits"
TORN = (
    "; the last line has no newline: a write cut short, as when a run is killed "
    "(`passhat run --resume` with the same --out cuts it off)"
)


def row_from_object(obj: Any, *, path: str, line: int | None, where: str = "") -> TrialRow:
    """A TrialRow from one decoded `{"task_id": ..., "outcome": ...}` object."""
    if not isinstance(obj, dict):
        raise InputError(
            f"{where}expected a JSON object, got {type(obj).__name__}", path=path, line=line
        )
    for key in ("task_id", "outcome"):
        if key not in obj:
            raise InputError(f"{where}missing key {key!r}", path=path, line=line)
    trial = obj.get("trial")
    reason = obj.get("reason")
    return TrialRow(
        task_id=parse_task_id(obj["task_id"], path=path, line=line, where=where),
        outcome=parse_outcome(obj["outcome"], path=path, line=line, where=where),
        trial=trial if isinstance(trial, int) and not isinstance(trial, bool) else None,
        line=line,
        reason=(reason.strip() or None) if isinstance(reason, str) else None,
    )


def parse_jsonl(text: str, *, path: str) -> list[TrialRow]:
    """Every non-blank line of `text` as a TrialRow; InputError with the line number if bad."""
    rows = []
    attempts: set[tuple[str, int, int]] = set()
    lines = text.splitlines()
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as err:
            torn = number == len(lines) and not text.endswith(("\n", "\r"))
            raise InputError(
                f"bad JSON: {err.msg} (column {err.colno})" + (TORN if torn else ""),
                path=path,
                line=number,
            ) from None
        except ValueError:  # NB: not a JSONDecodeError: an integer Python will not convert
            raise InputError(TOO_MANY_DIGITS, path=path, line=number) from None
        except RecursionError:
            raise InputError("bad JSON: nested too deeply", path=path, line=number) from None
        row = row_from_object(obj, path=path, line=number)
        attempt = obj.get("attempt")
        if row.trial is not None and isinstance(attempt, int) and not isinstance(attempt, bool):
            key = (row.task_id, row.trial, attempt)
            if key in attempts:
                continue
            attempts.add(key)
        rows.append(row)
    return rows
