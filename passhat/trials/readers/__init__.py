"""Read per-trial outcomes from the files teams already have, in any of the formats below.

`passhat score`, `compare` and `power` take files, not a cluster: JSON Lines (passhat's own
`trials.jsonl`), CSV, Inspect eval logs with epochs (`.eval` or JSON), tau-bench results
and tau2-bench results (a file, or the directory of its dir layout). The format is chosen
by extension and, failing that, by content. Every problem is an `InputError` naming the
file and the line (or the JSON element), never a traceback; a file cut short says so.
Each harness's file is scored as the harness scores it (docs/scoring.md), unless the
`ReadOptions` ask otherwise. Several files are one run: Inspect samples of different
tasks are keyed `task/sample` when the inputs hold more than one task, and an attempt
read twice (the same log given twice) counts once.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from passhat.api.errors import InputError
from passhat.stats import TaskTally, tally
from passhat.trials.readers.inspect_log import (
    is_inspect_log,
    parse_inspect_log,
    read_inspect_eval,
)
from passhat.trials.readers.jsonl import TOO_MANY_DIGITS, parse_jsonl, row_from_object
from passhat.trials.readers.options import ReadOptions, Warn
from passhat.trials.readers.rows import TrialRow, is_cut_short, one_per_attempt
from passhat.trials.readers.table import parse_csv
from passhat.trials.readers.tau2 import is_tau2, parse_tau2
from passhat.trials.readers.taubench import is_taubench, parse_taubench

__all__ = [
    "ReadOptions",
    "TrialRow",
    "read_rows",
    "read_tallies",
    "read_trials",
    "warn_on_stderr",
]

_FORMATS = "JSON Lines, CSV, an Inspect log (.eval or JSON), tau-bench or tau2-bench results"
_ZIP = b"PK\x03\x04"
_DEFAULT = ReadOptions()
CUT_SHORT = "cut short: the file ends in the middle of the JSON document"


def warn_on_stderr(message: str) -> None:
    """The default Warn: one `passhat: warning:` line on stderr."""
    print(f"passhat: warning: {message}", file=sys.stderr)


def _read_text(path: Path, name: str) -> str:
    if not path.exists():
        raise InputError("no such file", path=name)
    if path.is_dir():
        raise InputError(
            "is a directory, not a trial file (a run directory or bundle of passhat holds "
            "trials.jsonl, a tau2-bench directory results.json)",
            path=name,
        )
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text ({err.reason} at byte {err.start})", path=name) from None
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", path=name) from None


@dataclasses.dataclass(frozen=True)
class _Context:
    file: Path
    path: str
    options: ReadOptions
    warn: Warn


def _parse_document(document: Any, *, path: str, context: _Context) -> list[TrialRow]:
    if is_inspect_log(document):
        return parse_inspect_log(document, path=path, options=context.options, warn=context.warn)
    if is_tau2(document):
        return parse_tau2(document, path=context.file, name=path, options=context.options)
    if is_taubench(document):
        return parse_taubench(document, path=path, options=context.options)
    if isinstance(document, list):
        return [
            row_from_object(obj, path=path, line=None, where=f"[{index}]: ")
            for index, obj in enumerate(document)
        ]
    if isinstance(document, dict) and "task_id" in document:
        return [row_from_object(document, path=path, line=None)]
    raise InputError(f"not a recognised trial file (expected {_FORMATS})", path=path)


def _parse_json(text: str, *, path: str, context: _Context) -> list[TrialRow]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        if err.msg == "Extra data":  # NB: several objects, one per line: JSON Lines after all
            return parse_jsonl(text, path=path)
        if is_cut_short(text, err):
            raise InputError(CUT_SHORT, path=path, line=err.lineno) from None
        raise InputError(
            f"bad JSON: {err.msg} (column {err.colno})", path=path, line=err.lineno
        ) from None
    except ValueError:  # NB: not a JSONDecodeError: an integer Python will not convert
        raise InputError(TOO_MANY_DIGITS, path=path) from None
    except RecursionError:
        raise InputError("bad JSON: nested too deeply", path=path) from None
    return _parse_document(document, path=path, context=context)


def _parse(text: str, *, suffix: str, path: str, context: _Context) -> list[TrialRow]:
    if suffix in (".jsonl", ".ndjson"):
        return parse_jsonl(text, path=path)
    if suffix == ".csv":
        return parse_csv(text, path=path)
    start = text.lstrip()[:1]
    if suffix == ".json" or start == "[":
        return _parse_json(text, path=path, context=context)
    if start == "{":
        first = text.lstrip().splitlines()[0]
        try:
            json.loads(first)
        except (ValueError, RecursionError):
            # NB: one object over several lines
            return _parse_json(text, path=path, context=context)
        return parse_jsonl(text, path=path)
    return parse_csv(text, path=path)


def _is_zip(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(4) == _ZIP
    except OSError:
        return False


def read_trials(
    path: str | os.PathLike[str],
    *,
    options: ReadOptions = _DEFAULT,
    warn: Warn = warn_on_stderr,
) -> list[TrialRow]:
    """Every trial row of one file, in file order, each attempt once; InputError for
    anything wrong with it. A directory holding a `results.json` is tau2-bench's dir
    layout; `warn` hears about logs that did not finish."""
    name = os.fspath(path)
    file = Path(path)
    if file.is_dir() and (file / "results.json").is_file():
        file = file / "results.json"
        name = os.path.join(name, "results.json")
    context = _Context(file=file, path=name, options=options, warn=warn)
    suffix = file.suffix.lower()
    if file.is_file() and (suffix == ".eval" or _is_zip(file)):
        rows = read_inspect_eval(file, name=name, options=options, warn=warn)
    else:
        text = _read_text(file, name)
        if not text.strip():
            raise InputError("empty file: no trials in it", path=name)
        rows = _parse(text, suffix=suffix, path=name, context=context)
    if not rows:
        raise InputError("no trials in the file", path=name)
    return one_per_attempt(rows)


def read_rows(
    paths: Iterable[str | os.PathLike[str]],
    *,
    options: ReadOptions = _DEFAULT,
    warn: Warn = warn_on_stderr,
) -> list[TrialRow]:
    """The rows of all files together (shards of one run), file after file, each attempt
    once; task ids are `suite/task` when the rows come from more than one suite."""
    rows = one_per_attempt(
        [row for path in paths for row in read_trials(path, options=options, warn=warn)]
    )
    suites = {row.suite for row in rows if row.suite is not None}
    if len(suites) > 1:
        rows = [
            dataclasses.replace(row, task_id=f"{row.suite}/{row.task_id}") if row.suite else row
            for row in rows
        ]
    return rows


def read_tallies(
    paths: Iterable[str | os.PathLike[str]],
    *,
    options: ReadOptions = _DEFAULT,
    warn: Warn = warn_on_stderr,
) -> list[TaskTally]:
    """Per-task tallies over the rows of all files together (shards of one run)."""
    rows = read_rows(paths, options=options, warn=warn)
    return tally((row.task_id, row.outcome.value) for row in rows)
