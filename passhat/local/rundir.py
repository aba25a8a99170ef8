"""The run directory: where a run writes, its lock, and what it holds.

`prepare_run_dir` checks, locks and fills one (`spec.yaml`, `trials.jsonl`,
`transcripts/`, `run.json`: when it started and the eval's suite, for `passhat history`;
`complete_run` adds when it completed): one `passhat run` per directory at a time (an
exclusive `flock` that dies with its process), a directory holding a run is never reused
without `--resume`, and a `--resume` must bring the eval the run started with.

Where a run without `--out` writes: a fresh directory per run, named by its UTC start.

Running the README's command twice must just work, and users of Inspect or Argo expect
every run to get its own log directory; so the default run directory is
`./passhat-runs/<metadata.name>/<UTC start, e.g. 20261202T161500Z>` (with `-2`, `-3`, ...
when that name is taken, e.g. two runs started in the same second), created atomically so
that concurrent runs never share one. `--resume` without `--out` continues the most recent
of them: the latest name, which is the latest start, since the names sort by time.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import os
import re
from typing import Any

from passhat.api.errors import InputError, UsageError
from passhat.api.load import load_eval
from passhat.api.spec import ConsistencyEval
from passhat.api.suite import suite_of
from passhat.records.layout import SPEC, TRANSCRIPTS, TRIALS
from passhat.records.runinfo import RUN_INFO, RunInfo, read_run_info, timestamp, write_run_info

__all__ = [
    "JOURNAL",
    "LOCK",
    "ROOT",
    "SPEC_COPY",
    "TRANSCRIPTS",
    "complete_run",
    "default_base",
    "latest_run_dir",
    "new_run_dir",
    "prepare_run_dir",
]

ROOT = "passhat-runs"
# What a run directory holds (passhat.records.layout: the same layout as a bundle).
JOURNAL = TRIALS
SPEC_COPY = SPEC
LOCK = ".passhat.lock"
STAMP = "%Y%m%dT%H%M%SZ"
_NAME = re.compile(r"^(\d{8}T\d{6}Z)(?:-(\d+))?$")


def default_base(eval_name: str) -> str:
    """The directory holding every default run directory of the eval `eval_name`."""
    return os.path.abspath(os.path.join(ROOT, eval_name))


def new_run_dir(base: str, now: datetime.datetime | None = None) -> str:
    """Create and return a new run directory `base/<UTC stamp>[-N]` (it did not exist)."""
    moment = now if now is not None else datetime.datetime.now(datetime.UTC)
    stamp = moment.astimezone(datetime.UTC).strftime(STAMP)
    try:
        os.makedirs(base, exist_ok=True)
        suffix = 1
        while True:
            path = os.path.join(base, stamp if suffix == 1 else f"{stamp}-{suffix}")
            try:
                os.mkdir(path)
            except FileExistsError:
                suffix += 1
                continue
            return path
    except OSError as err:
        where = err.filename or base
        raise InputError(
            f"cannot create the run directory: {err.strerror or err}", path=str(where)
        ) from None


def latest_run_dir(base: str, eval_name: str) -> str:
    """The most recent run directory below `base` (UsageError when there is none)."""
    try:
        names = os.listdir(base)
    except FileNotFoundError:
        names = []
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", path=base) from None
    runs = [
        (match[1], int(match[2] or 1), name)
        for name in names
        if (match := _NAME.match(name)) and os.path.isdir(os.path.join(base, name))
    ]
    if not runs:
        raise UsageError(
            f"--resume: no earlier run of {eval_name} in {base} to continue; run without "
            "--resume to start one, or name its directory with --out"
        )
    return os.path.join(base, max(runs)[2])


def _lock(out: str) -> int:
    """Lock the run directory for this process (an open fd; the lock goes with the process).

    An exclusive, non-blocking `flock` on `out/.passhat.lock`: a second `passhat run` on
    the same directory is refused instead of running every slot again, and a run that was
    killed (even by SIGKILL) leaves no stale lock behind.
    """
    path = os.path.join(out, LOCK)
    try:
        os.makedirs(out, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as err:
        where = err.filename or out
        raise InputError(
            f"cannot write the run directory: {err.strerror or err}", path=str(where)
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        holder = b""
        with contextlib.suppress(OSError):
            holder = os.pread(fd, 32, 0).strip()
        os.close(fd)
        if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise InputError(f"cannot lock: {err.strerror or err}", path=path) from None
        pid = f" (pid {holder.decode()})" if holder.isdigit() else ""
        raise UsageError(
            f"{out}: another passhat run is using this run directory{pid}; wait for it to "
            "end, or choose another --out"
        ) from None
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def prepare_run_dir(
    out: str, eval_path: str, eval_text: str, evaluation: ConsistencyEval, resume: bool
) -> int:
    """Check, lock and prepare the run directory `out` (`spec.yaml`, `trials.jsonl`,
    `transcripts/`); the lock's fd (close it when done).

    Without `resume`, a directory holding a run is refused; with it, the eval must be the
    one the run started with (only parallelism and spec.budget may change: a run stopped
    at its budget continues under a raised one)."""
    if os.path.exists(out) and not resume:
        try:
            empty = not os.listdir(out) or _nothing_recorded(out)
        except OSError as err:
            raise InputError(f"cannot read the run directory: {err.strerror}", path=out) from None
        if not empty:
            raise UsageError(
                f"{out}: a run directory already exists there; pass --resume to continue "
                "that run, or choose another --out"
            )
    lock = _lock(out)
    try:
        _fill_out(out, eval_path, eval_text, evaluation, resume)
    except BaseException:
        os.close(lock)
        raise
    return lock


def _nothing_recorded(out: str) -> bool:
    """Whether `out` is a run directory in which nothing was recorded (a start that failed
    right after preparing it): starting afresh there loses nothing."""
    names = set(os.listdir(out))
    if not names <= {SPEC_COPY, JOURNAL, TRANSCRIPTS, LOCK, RUN_INFO}:
        return False
    journal, transcripts = os.path.join(out, JOURNAL), os.path.join(out, TRANSCRIPTS)
    if os.path.exists(journal) and os.path.getsize(journal) > 0:
        return False
    return not os.path.isdir(transcripts) or not os.listdir(transcripts)


def _fill_out(
    out: str, eval_path: str, eval_text: str, evaluation: ConsistencyEval, resume: bool
) -> None:
    spec_copy = os.path.join(out, SPEC_COPY)
    if resume and os.path.exists(spec_copy):
        before = load_eval(spec_copy)
        if _comparable(before) != _comparable(evaluation):
            raise UsageError(
                f"{eval_path}: the eval differs from the one the run in {out} started with "
                f"({spec_copy}); only parallelism and budget may change on --resume"
            )
    try:
        os.makedirs(os.path.join(out, TRANSCRIPTS), exist_ok=True)
        if not resume or not os.path.exists(spec_copy):
            with open(spec_copy, "w", encoding="utf-8") as copy:
                copy.write(eval_text)
        with open(os.path.join(out, JOURNAL), "ab"):
            pass
    except OSError as err:
        where = err.filename or out
        raise InputError(
            f"cannot write the run directory: {err.strerror or err}", path=str(where)
        ) from None
    # NB: a resumed run keeps the start it has
    if not resume or read_run_info(out) is None:
        write_run_info(out, RunInfo(evaluation.metadata.name, _suite(evaluation), timestamp()))


def _suite(evaluation: ConsistencyEval) -> str | None:
    labels = evaluation.metadata.labels
    return suite_of({"metadata": {"labels": labels}, "spec": {"suite": evaluation.spec.suite}})


def complete_run(out: str, evaluation: ConsistencyEval) -> str | None:
    """Record in `out/run.json` that the run completed now (every trial slot final); the
    suite it is a run of, as `run.json` now says."""
    before = read_run_info(out)
    started = before.started_at if before is not None else timestamp()
    suite = _suite(evaluation)
    write_run_info(out, RunInfo(evaluation.metadata.name, suite, started, timestamp()))
    return suite


def _comparable(evaluation: ConsistencyEval) -> dict[str, Any]:
    data = evaluation.model_dump(mode="json", by_alias=True)
    data["spec"].pop("parallelism", None)
    data["spec"].pop("budget", None)
    return {"name": data["metadata"]["name"], "spec": data["spec"]}
