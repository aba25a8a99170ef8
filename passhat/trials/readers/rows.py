"""The one row type every reader yields: which task, how it ended, and where it was read."""

from __future__ import annotations

import json
from dataclasses import dataclass

from passhat.api.errors import InputError
from passhat.trials.outcomes import Outcome

__all__ = ["TrialRow", "is_cut_short", "one_per_attempt", "parse_outcome", "parse_task_id"]

_VALUES = {outcome.value for outcome in Outcome}


@dataclass(frozen=True)
class TrialRow:
    """One finished trial attempt read from a file (`line`: 1-based, or None in a JSON document).

    `reason` is the file's reason (oom_killed, timeout, ...) when it gives one as text.
    `suite` names the harness's task the row belongs to when a file can hold several
    (Inspect's `eval.task`): rows of two suites are told apart by it. `key` identifies the
    attempt across files (Inspect: task instance, sample id, epoch): rows with the same
    key are one attempt, read twice (the same log given twice, an `eval-retry` log).
    """

    task_id: str
    outcome: Outcome
    trial: int | None = None
    line: int | None = None
    reason: str | None = None
    suite: str | None = None
    key: tuple[str, ...] | None = None


def parse_outcome(value: object, *, path: str, line: int | None, where: str = "") -> Outcome:
    """`value` as an Outcome, or an InputError naming the file, line and value."""
    if isinstance(value, str) and value.strip() in _VALUES:
        return Outcome(value.strip())
    expected = ", ".join(o.value for o in Outcome)
    raise InputError(
        f"{where}unknown outcome {value!r} (expected one of {expected})", path=path, line=line
    )


def parse_task_id(value: object, *, path: str, line: int | None, where: str = "") -> str:
    """A task id: a non-empty string, or an integer taken as its decimal string."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputError(f"{where}task_id must be a string, got {value!r}", path=path, line=line)
    text = str(value).strip()
    if not text:
        raise InputError(f"{where}task_id is empty", path=path, line=line)
    return text


def one_per_attempt(rows: list[TrialRow]) -> list[TrialRow]:
    """Rows with the same `key` counted once: a graded row wins over an infra error (a
    retry re-ran it), else the first stays; rows without a key are all kept, in order."""
    kept: dict[tuple[str, ...], int] = {}
    out: list[TrialRow] = []
    for row in rows:
        index = kept.get(row.key) if row.key is not None else None
        if index is None:
            if row.key is not None:
                kept[row.key] = len(out)
            out.append(row)
        elif out[index].outcome is Outcome.INFRA_ERROR and row.outcome is not Outcome.INFRA_ERROR:
            out[index] = row
    return out


def is_cut_short(text: str, err: json.JSONDecodeError) -> bool:
    """Whether a JSON document failed because it ends too early (a file cut short):
    the parser reached the end, or a string never closed (it can only run to the end)."""
    return err.pos >= len(text.rstrip()) or err.msg.startswith("Unterminated string")
