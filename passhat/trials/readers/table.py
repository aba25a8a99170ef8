"""CSV trial files: a header row naming at least `task_id` and `outcome`, one trial per row.

For spreadsheets and SQL exports. Other columns are ignored, except an integer `trial` and
a `reason` (the infra errors by reason of the report).
"""

from __future__ import annotations

import csv
import io

from passhat.api.errors import InputError
from passhat.trials.readers.rows import TrialRow, parse_outcome, parse_task_id

__all__ = ["parse_csv"]

REQUIRED = ("task_id", "outcome")


def parse_csv(text: str, *, path: str) -> list[TrialRow]:
    """Every data row of `text` as a TrialRow; InputError naming the line or missing column."""
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [name.strip() for name in reader.fieldnames or []]
    missing = [name for name in REQUIRED if name not in header]
    if missing:
        found = ", ".join(header) or "nothing"
        raise InputError(
            f"missing column {missing[0]!r} in the CSV header (found: {found})", path=path, line=1
        )
    reader.fieldnames = header
    rows = []
    try:
        for record in reader:
            line = reader.line_num
            if not any(
                (value or "").strip() for value in record.values() if isinstance(value, str)
            ):
                continue
            if record.get("task_id") is None or record.get("outcome") is None:
                cut = line == text.count("\n") + 1 and not text.endswith(("\n", "\r"))
                reason = "too few fields in this row" + (
                    "; the last line has no newline: the file is cut short" if cut else ""
                )
                raise InputError(reason, path=path, line=line)
            trial = (record.get("trial") or "").strip()
            reason = (record.get("reason") or "").strip()
            rows.append(
                TrialRow(
                    task_id=parse_task_id(record["task_id"], path=path, line=line),
                    outcome=parse_outcome(record["outcome"], path=path, line=line),
                    trial=_trial_number(trial),
                    line=line,
                    reason=reason or None,
                )
            )
    except csv.Error as err:
        raise InputError(f"bad CSV: {err}", path=path, line=reader.line_num) from None
    return rows


def _trial_number(text: str) -> int | None:
    """An integer `trial` cell (ASCII digits, at most 18: an int64), else None (ignored)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None
