"""`trials.jsonl`: the durable record of a local run, one line per finished attempt.

The journal is what makes a local run resumable with nothing lost and nothing counted
twice: an attempt counts once its line is in the file, and `--resume` runs exactly the
attempts that have no line. Each line goes to the kernel with a single `write` the moment
its attempt ends (so a SIGKILL of passhat loses nothing written), and to the disk with
`fsync` in group commits by a background thread (several lines per fsync, at most
`SYNC_INTERVAL` seconds after they were written) so that thousands of short trials
neither pay a disk flush each nor wait for one. A crash in the
middle of a write can leave a torn last line; `read_journal` drops it and truncates the
file back to the last complete line before new lines are appended.

The file is also valid `passhat score` input (retried infra rows are just rows).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from typing import Any

from passhat.api.errors import InputError
from passhat.records.record import JOURNAL_FIELDS

__all__ = [
    "FIELDS",
    "OPTIONAL_FIELDS",
    "SYNC_INTERVAL",
    "Journal",
    "JournalError",
    "read_journal",
    "read_numbered_journal",
]

FIELDS = JOURNAL_FIELDS
# Written when the record has them: the classifier's message (e.g. a result JSON's
# reason), what the attempt reported it spent and why that was refused, what it used
# (passhat.trials.usage).
# `result_error`: why the file left in $PASSHAT_RESULT was ignored (not a result JSON).
OPTIONAL_FIELDS = (
    "message",
    "usage",
    "cost_usd",
    "metrics",
    "spend_error",
    "resources",
    "result_error",
)
SYNC_INTERVAL = 0.05


def read_journal(path: str, *, repair: bool = False) -> list[dict[str, Any]]:
    """The records in the journal at `path` (missing file: none); see read_numbered_journal."""
    return [record for _, record in read_numbered_journal(path, repair=repair)]


def read_numbered_journal(path: str, *, repair: bool = False) -> list[tuple[int, dict[str, Any]]]:
    """The records in the journal at `path` with their 1-based line numbers in the file.

    Blank lines are skipped (and counted, so a later error names the line an editor shows).
    A last line without its newline, or that is not a JSON object, is torn: it is dropped
    and, with `repair`, cut off the file. A bad line anywhere else is an InputError.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return []
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", path=path) from None
    *complete, tail = data.split(b"\n")
    records: list[tuple[int, dict[str, Any]]] = []
    good_end = 0
    torn = bool(tail)
    for number, line in enumerate(complete, start=1):
        record = _parse(line) if line.strip() else {}
        problem = _type_problem(record) if record else None
        if problem is not None:  # NB: a whole JSON object, not a torn write
            raise InputError(f"not a trial record: {problem}", path=path, line=number)
        if record is None:
            if number < len(complete) or torn:
                raise InputError(
                    "not a trial record (a JSON object with task_id, trial, attempt, outcome)",
                    path=path,
                    line=number,
                )
            torn = True
            break
        if record:
            records.append((number, record))
        good_end += len(line) + 1
    if torn and repair:
        with open(path, "r+b") as handle:
            handle.truncate(good_end)
    return records


def _type_problem(record: Mapping[str, Any]) -> str | None:
    """Why the record's fields do not have their types (`"trial": 1.7`, `"task_id": ["b"]`)."""
    for key in ("task_id", "outcome", "reason"):
        if not isinstance(record[key], str):
            return f"{key} must be a string, got {json.dumps(record[key])[:60]}"
    for key in ("trial", "attempt"):
        value = record[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f"{key} must be a non-negative integer, got {json.dumps(value)[:60]}"
    return None


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or not all(key in record for key in FIELDS[:5]):
        return None
    return record


class JournalError(OSError):
    """The journal could not be written or synced (e.g. the disk is full); names the file."""


class Journal:
    """Appends records to `trials.jsonl`; a background thread syncs them in group commits.

    A failed write or sync raises JournalError (from `append`, or from `close` for a sync
    the background thread could not do).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._sync_error: OSError | None = None
        self._dirty = threading.Event()
        self._closing = threading.Event()
        self._syncer = threading.Thread(target=self._sync_loop, name="passhat-fsync", daemon=True)
        self._syncer.start()

    def append(self, record: Mapping[str, Any]) -> None:
        """Write one record now (one `write` call); it reaches the disk within SYNC_INTERVAL."""
        fields = {key: record[key] for key in FIELDS}
        for key in OPTIONAL_FIELDS:
            # NB: a cost of 0 is a report; an empty message is none
            if record.get(key) or (key in record and record[key] == 0):
                fields[key] = record[key]
        line = json.dumps(fields)
        data = (line + "\n").encode()
        try:
            written = os.write(self._fd, data)
            while written < len(data):
                written += os.write(self._fd, data[written:])
        except OSError as err:
            raise JournalError(err.errno, err.strerror, self.path) from None
        self._dirty.set()

    def _sync_loop(self) -> None:
        while True:
            self._dirty.wait()
            if self._closing.is_set():
                return
            self._dirty.clear()
            try:
                os.fsync(self._fd)
            except OSError as err:
                # NB: reported by close(), which syncs again
                self._sync_error = err
                return
            # NB: lines appended meanwhile wait for the next group commit; close() cuts the
            # wait short (it syncs them itself), so a run never ends waiting for this timer
            if self._closing.wait(SYNC_INTERVAL):
                return

    def close(self) -> None:
        """Sync everything and close the file."""
        if self._fd < 0:
            return
        self._closing.set()
        self._dirty.set()
        self._syncer.join()
        fd, self._fd = self._fd, -1
        try:
            os.fsync(fd)
            if self._sync_error is not None:
                raise self._sync_error
        except OSError as err:
            raise JournalError(err.errno, err.strerror, self.path) from None
        finally:
            os.close(fd)
