"""The one row type every reader yields: which task, how it ended, and where it was read."""

from __future__ import annotations

from dataclasses import dataclass

from passhat.api.errors import InputError
from passhat.trials.outcomes import Outcome

__all__ = ["TrialRow", "parse_outcome", "parse_task_id"]

_VALUES = {outcome.value for outcome in Outcome}


@dataclass(frozen=True)
class TrialRow:
    """One finished trial attempt read from a file (`line`: 1-based, or None in a JSON document).

    `reason` is the file's reason (oom_killed, timeout, ...) when it gives one as text.
    """

    task_id: str
    outcome: Outcome
    trial: int | None = None
    line: int | None = None
    reason: str | None = None


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
