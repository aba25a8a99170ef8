"""Where records come from: one interface for a run directory, a bundle and a cluster eval.

`passhat trials`, `passhat transcripts` and `passhat report --bundle` read every source
through `Source`, so no command grows a branch per kind of source:

- `RunDirectory(path)`: a local run directory of `passhat run`, or a bundle written by
  `passhat report NAME --bundle` (the same layout, `passhat.records.layout`);
- `passhat.operator.records_source.ClusterSource`: a ConsistencyEval on a cluster, read
  through the operator's records API.

A source that cannot be read (no such directory, no `trials.jsonl`, a torn or malformed
line) raises `InputError` naming the file and line: one line for the CLI, exit 2.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from typing import Any, Protocol, cast

from passhat.api.errors import InputError, UsageError
from passhat.records.layout import RESULTS, SPEC, TRIALS, transcript_relpath
from passhat.records.record import JOURNAL_FIELDS, AttemptRecord
from passhat.trials.outcomes import Outcome
from passhat.trials.readers.jsonl import TORN

__all__ = ["RunDirectory", "Source", "read_records", "select_attempts"]

_OUTCOMES = frozenset(outcome.value for outcome in Outcome)
# The fields a line must have to be a record (the others may be absent in older files).
_REQUIRED = ("task_id", "trial", "attempt", "outcome")


class Source(Protocol):
    """Every attempt of one eval run, with its transcript and result JSON."""

    @property
    def title(self) -> str:
        """What the source is, for reports and messages (a path, `namespace/name`)."""
        ...

    def records(self) -> list[AttemptRecord]:
        """Every finished attempt, each once, in the order they were recorded."""
        ...

    def spec_text(self) -> str | None:
        """The eval as it ran (YAML), None when the source does not keep it."""
        ...

    def transcript(self, record: AttemptRecord) -> bytes | None:
        """The attempt's output, None when there is none (not kept, or never archived)."""
        ...

    def result(self, record: AttemptRecord) -> bytes | None:
        """The result JSON the attempt wrote, None when it wrote none."""
        ...


def _problem(record: dict[str, Any]) -> str | None:
    """What makes a decoded line not a record, None when it is one."""
    missing = [key for key in _REQUIRED if key not in record]
    if missing:
        return f"missing {missing[0]!r} (a record has {', '.join(JOURNAL_FIELDS)})"
    if not isinstance(record["task_id"], str) or not record["task_id"]:
        return f"task_id must be a non-empty string, got {json.dumps(record['task_id'])[:60]}"
    for key in ("trial", "attempt"):
        value = record[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f"{key} must be a non-negative integer, got {json.dumps(value)[:60]}"
    if record["outcome"] not in _OUTCOMES:
        return (
            f"unknown outcome {json.dumps(record['outcome'])[:60]} "
            f"(expected one of {', '.join(sorted(_OUTCOMES))})"
        )
    return None


def read_records(path: str) -> list[AttemptRecord]:
    """The records of a `trials.jsonl`; a line repeating an attempt counts once.

    Strict, like `passhat score`: a torn last line (a killed run) or a line that is not a
    record is an InputError naming the file and line, never skipped in silence. A last
    line that is a whole record without its newline is read, as `score` reads it.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise InputError("no such file", path=path) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a trials.jsonl", path=path) from None
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", path=path) from None
    lines = data.split(b"\n")
    torn = bool(lines[-1].strip())
    records: list[AttemptRecord] = []
    seen: set[tuple[str, int, int]] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as err:
            cut = TORN if torn and number == len(lines) else ""
            detail = err.msg if isinstance(err, json.JSONDecodeError) else "not JSON"
            raise InputError(f"bad JSON: {detail}{cut}", path=path, line=number) from None
        if not isinstance(record, dict):
            raise InputError(
                f"not a trial record: expected a JSON object, got {type(record).__name__}",
                path=path,
                line=number,
            )
        problem = _problem(record)
        if problem is not None:
            raise InputError(f"not a trial record: {problem}", path=path, line=number)
        key = (record["task_id"], record["trial"], record["attempt"])
        if key not in seen:
            seen.add(key)
            records.append(cast(AttemptRecord, record))
    return records


def select_attempts(
    records: Sequence[AttemptRecord],
    *,
    task_id: str,
    trial: int | None = None,
    attempt: int | None = None,
    where: str,
) -> list[AttemptRecord]:
    """The records of one task (and trial, attempt); UsageError naming what does not exist."""
    of_task = [r for r in records if r["task_id"] == task_id]
    if not of_task:
        known = sorted({r["task_id"] for r in records})
        shown = ", ".join(known[:10]) + (f", ... ({len(known)} tasks)" if len(known) > 10 else "")
        raise UsageError(f"--task {task_id}: no such task in {where} (tasks: {shown or 'none'})")
    chosen = [
        r
        for r in of_task
        if (trial is None or r["trial"] == trial) and (attempt is None or r["attempt"] == attempt)
    ]
    if not chosen:
        asked = " ".join(
            f"--{name} {value}"
            for name, value in (("trial", trial), ("attempt", attempt))
            if value is not None
        )
        pairs = sorted((r["trial"], r["attempt"]) for r in of_task)
        have = ", ".join(f"{t}-{a}" for t, a in pairs[:20])
        raise UsageError(
            f"{asked}: task {task_id} in {where} has no such attempt "
            f"(trial-attempt: {have}{', ...' if len(of_task) > 20 else ''})"
        )
    return chosen


class RunDirectory:
    """A local run directory or a bundle: `trials.jsonl`, `transcripts/`, `results/`."""

    def __init__(self, path: str) -> None:
        if not os.path.isdir(path):
            what = "not a directory" if os.path.exists(path) else "no such directory"
            raise InputError(f"{what} (expected a passhat run directory or bundle)", path=path)
        self.path = path
        self.journal = os.path.join(path, TRIALS)
        if not os.path.isfile(self.journal):
            raise InputError(
                f"no {TRIALS}: not a passhat run directory or bundle", path=self.journal
            )

    @property
    def title(self) -> str:
        return self.path

    def records(self) -> list[AttemptRecord]:
        return read_records(self.journal)

    def spec_text(self) -> str | None:
        return _read_text(os.path.join(self.path, SPEC))

    def transcript(self, record: AttemptRecord) -> bytes | None:
        relpath = transcript_relpath(record["task_id"], record["trial"], record["attempt"])
        return _read_bytes(os.path.join(self.path, relpath))

    def result(self, record: AttemptRecord) -> bytes | None:
        relpath = transcript_relpath(
            record["task_id"], record["trial"], record["attempt"], kind=RESULTS
        )
        data = _read_bytes(os.path.join(self.path, relpath))
        if data is None and record.get("result") is not None:
            # NB: a bundle's trials.jsonl carries the cluster's result inline as well
            data = (json.dumps(record["result"]) + "\n").encode()
        return data


def _read_bytes(path: str) -> bytes | None:
    """The file's bytes; None when it is absent or not a regular file (a FIFO named like a
    transcript would block the reader, and the grader that reads it, for ever)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", path=path) from None
    try:
        with open(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            return handle.read()
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", path=path) from None


def _read_text(path: str) -> str | None:
    data = _read_bytes(path)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text ({err.reason} at byte {err.start})", path=path) from None
