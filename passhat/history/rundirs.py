"""Local runs as `SuiteRun`s: run directories and bundles, and which suite to keep.

Each DIR given to `passhat history` is a run directory or bundle (it holds
`trials.jsonl`), or a directory of them: `passhat-runs/<eval>/` holds one per run, and
`passhat-runs/` one such directory per eval, so both are searched (two levels down).
A run's start, completion and suite come from its `run.json` (`passhat.records.runinfo`);
a directory without one (a bundle, a run of an older passhat) is read from its
`spec.yaml`: the suite from `spec.suite` or the label, the start from
`metadata.creationTimestamp` (a cluster eval's bundle has it), else the time
`trials.jsonl` was last written.

Which suite: with `--suite NAME` the runs of that suite are kept and the others left out
(each named on stderr); without it the runs given must not name two suites (a usage
error lists them), as `passhat compare` would not pair two different suites' tasks.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import datetime

import yaml

from passhat.api.errors import InputError, UsageError
from passhat.api.suite import suite_of
from passhat.history.model import COMPLETE, UNKNOWN, SuiteRun
from passhat.records.layout import SPEC, TRIALS
from passhat.records.runinfo import read_run_info
from passhat.records.source import RunDirectory
from passhat.stats import tally

__all__ = ["INCOMPLETE", "local_runs", "read_local_run", "run_directories", "select_suite"]

# A local run whose run.json has no completedAt: interrupted, stopped at its deadline, or
# still running.
INCOMPLETE = "incomplete"


def _seconds(text: str | None, *, path: str, field: str) -> float | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise InputError(f"{field}: not an RFC 3339 time: {text!r}", path=path) from None


def _is_run(path: str) -> bool:
    return os.path.isfile(os.path.join(path, TRIALS))


def _subdirectories(path: str) -> list[str]:
    try:
        names = sorted(os.listdir(path))
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", path=path) from None
    return [os.path.join(path, n) for n in names if os.path.isdir(os.path.join(path, n))]


def run_directories(path: str) -> list[str]:
    """The run directories `path` names: itself, or those one or two levels below it."""
    if not os.path.isdir(path):
        what = "not a directory" if os.path.exists(path) else "no such directory"
        raise InputError(f"{what} (expected a run directory, a bundle, or a directory of them)",
                         path=path)  # fmt: skip
    if _is_run(path):
        return [path]
    found: list[str] = []
    for child in _subdirectories(path):
        if _is_run(child):
            found.append(child)
        else:
            found += [grand for grand in _subdirectories(child) if _is_run(grand)]
    if not found:
        raise InputError(
            f"no {TRIALS} in it or in the directories below it: not a run directory, a "
            "bundle, or a directory of them",
            path=path,
        )
    return found


def _from_spec(path: str) -> tuple[str | None, float | None]:
    """(suite, start) from the `spec.yaml` of a directory without `run.json`."""
    spec_path = os.path.join(path, SPEC)
    text = RunDirectory(path).spec_text()
    document = None
    if text is not None:
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise InputError(f"not YAML: {err}", path=spec_path) from None
    if not isinstance(document, dict):
        document = {}
    metadata = document.get("metadata")
    created = metadata.get("creationTimestamp") if isinstance(metadata, dict) else None
    start = (
        _seconds(created, path=spec_path, field="metadata.creationTimestamp")
        if isinstance(created, str)
        else os.path.getmtime(os.path.join(path, TRIALS))
    )
    return suite_of(document), start


def read_local_run(path: str) -> SuiteRun:
    """The run in directory `path` (InputError for an unreadable one)."""
    records = RunDirectory(path).records()
    tallies = tally((r["task_id"], r["outcome"]) for r in records)
    info = read_run_info(path)
    if info is None:
        suite, started = _from_spec(path)
        return SuiteRun(path, suite, tallies, started=started, state=UNKNOWN)
    where = os.path.join(path, "run.json")
    started = _seconds(info.started_at, path=where, field="startedAt")
    completed = _seconds(info.completed_at, path=where, field="completedAt")
    state = COMPLETE if completed is not None else INCOMPLETE
    return SuiteRun(path, info.suite, tallies, started=started, completed=completed, state=state)


def local_runs(paths: Sequence[str]) -> list[SuiteRun]:
    """The runs of every DIR (each run once, however it was named)."""
    runs: list[SuiteRun] = []
    seen: set[str] = set()
    for path in paths:
        for directory in run_directories(path):
            real = os.path.realpath(directory)
            if real not in seen:
                seen.add(real)
                runs.append(read_local_run(directory))
    return runs


def select_suite(
    runs: Sequence[SuiteRun], suite: str | None, *, note: Callable[[str], None]
) -> tuple[str | None, list[SuiteRun]]:
    """(the suite, its runs): those of `suite`, or, without it, all runs when they name at
    most one suite; `note` is told each run left out. UsageError when none is left or the
    runs name several suites."""
    if suite is None:
        named = sorted({r.suite for r in runs if r.suite is not None})
        if len(named) > 1:
            counts = ", ".join(f"{s} ({sum(r.suite == s for r in runs)} runs)" for s in named)
            raise UsageError(
                f"the runs given belong to several suites: {counts}; choose one with --suite"
            )
        return (named[0] if named else None), list(runs)
    kept = [r for r in runs if r.suite == suite]
    for run in runs:
        if run.suite != suite:
            note(f"{run.title}: left out, a run of {run.suite or 'no suite'}, not of {suite}")
    if not kept:
        raise UsageError(f"--suite {suite}: none of the runs given is a run of it")
    return suite, kept
