"""Read per-trial outcomes from the files teams already have, in any of the formats below.

`passhat score`, `compare` and `power` take files, not a cluster: JSON Lines (passhat's own
`trials.jsonl`), CSV, Inspect JSON eval logs with epochs and tau-bench results. The format
is chosen by extension and, failing that, by content. Every problem is an `InputError`
naming the file and the line (or the JSON element), never a traceback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from passhat.api.errors import InputError
from passhat.stats import TaskTally, tally
from passhat.trials.readers.inspect_log import is_inspect_log, parse_inspect_log
from passhat.trials.readers.jsonl import TOO_MANY_DIGITS, parse_jsonl, row_from_object
from passhat.trials.readers.rows import TrialRow
from passhat.trials.readers.table import parse_csv
from passhat.trials.readers.taubench import is_taubench, parse_taubench

__all__ = ["TrialRow", "read_rows", "read_tallies", "read_trials"]

_FORMATS = "JSON Lines, CSV, an Inspect JSON log or tau-bench results"


def _read_text(path: Path, name: str) -> str:
    if not path.exists():
        raise InputError("no such file", path=name)
    if path.is_dir():
        raise InputError("is a directory, not a trial file", path=name)
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text ({err.reason} at byte {err.start})", path=name) from None
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", path=name) from None


def _parse_document(document: Any, *, path: str) -> list[TrialRow]:
    if is_inspect_log(document):
        return parse_inspect_log(document, path=path)
    if is_taubench(document):
        return parse_taubench(document, path=path)
    if isinstance(document, list):
        return [
            row_from_object(obj, path=path, line=None, where=f"[{index}]: ")
            for index, obj in enumerate(document)
        ]
    if isinstance(document, dict) and "task_id" in document:
        return [row_from_object(document, path=path, line=None)]
    raise InputError(f"not a recognised trial file (expected {_FORMATS})", path=path)


def _parse_json(text: str, *, path: str) -> list[TrialRow]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        if err.msg == "Extra data":  # NB: several objects, one per line: JSON Lines after all
            return parse_jsonl(text, path=path)
        raise InputError(
            f"bad JSON: {err.msg} (column {err.colno})", path=path, line=err.lineno
        ) from None
    except ValueError:  # NB: not a JSONDecodeError: an integer Python will not convert
        raise InputError(TOO_MANY_DIGITS, path=path) from None
    except RecursionError:
        raise InputError("bad JSON: nested too deeply", path=path) from None
    return _parse_document(document, path=path)


def _parse(text: str, *, suffix: str, path: str) -> list[TrialRow]:
    if suffix == ".eval":
        raise InputError(
            "binary Inspect .eval log: convert it first with `inspect log convert --to json`",
            path=path,
        )
    if suffix in (".jsonl", ".ndjson"):
        return parse_jsonl(text, path=path)
    if suffix == ".csv":
        return parse_csv(text, path=path)
    start = text.lstrip()[:1]
    if suffix == ".json" or start == "[":
        return _parse_json(text, path=path)
    if start == "{":
        first = text.lstrip().splitlines()[0]
        try:
            json.loads(first)
        except (ValueError, RecursionError):
            return _parse_json(text, path=path)  # NB: one object over several lines
        return parse_jsonl(text, path=path)
    return parse_csv(text, path=path)


def read_trials(path: str | os.PathLike[str]) -> list[TrialRow]:
    """Every trial row of one file, in file order; InputError for anything wrong with it."""
    name = os.fspath(path)
    text = _read_text(Path(path), name)
    if not text.strip():
        raise InputError("empty file: no trials in it", path=name)
    rows = _parse(text, suffix=Path(path).suffix.lower(), path=name)
    if not rows:
        raise InputError("no trials in the file", path=name)
    return rows


def read_rows(paths: Iterable[str | os.PathLike[str]]) -> list[TrialRow]:
    """The rows of all files together (shards of one run), file after file."""
    return [row for path in paths for row in read_trials(path)]


def read_tallies(paths: Iterable[str | os.PathLike[str]]) -> list[TaskTally]:
    """Per-task tallies over the rows of all files together (shards of one run)."""
    return tally((row.task_id, row.outcome.value) for row in read_rows(paths))
