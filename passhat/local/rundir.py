"""Where a run without `--out` writes: a fresh directory per run, named by its UTC start.

Running the README's command twice must just work, and users of Inspect or Argo expect
every run to get its own log directory; so the default run directory is
`./passhat-runs/<metadata.name>/<UTC start, e.g. 20261202T161500Z>` (with `-2`, `-3`, ...
when that name is taken, e.g. two runs started in the same second), created atomically so
that concurrent runs never share one. `--resume` without `--out` continues the most recent
of them: the latest name, which is the latest start, since the names sort by time.
"""

from __future__ import annotations

import datetime
import os
import re

from passhat.api.errors import InputError, UsageError

__all__ = ["ROOT", "default_base", "latest_run_dir", "new_run_dir"]

ROOT = "passhat-runs"
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
