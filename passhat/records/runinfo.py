"""`run.json`: when a local run started and completed, and which suite it is a run of.

`passhat history DIR...` puts runs in time order and keeps those of one suite; a run
directory's other files say neither (the journal has durations, not times, and a
directory given with `--out` has any name). So `passhat run` writes this small file: at
the start (`startedAt`, the suite) and again when every trial slot is final
(`completedAt`). A resumed run keeps its first start. A directory without one (a run of
an older passhat, a bundle) is read from its `spec.yaml` instead (`passhat.history`).
"""

from __future__ import annotations

import datetime
import json
import os
from dataclasses import dataclass
from typing import Any

from passhat.api.errors import InputError
from passhat.records.bundle import write_file

__all__ = ["RUN_INFO", "RunInfo", "read_run_info", "timestamp", "write_run_info"]

RUN_INFO = "run.json"


def timestamp(moment: datetime.datetime | None = None) -> str:
    """RFC 3339 in UTC to the second, as Kubernetes writes times (`2026-12-05T07:00:00Z`)."""
    moment = moment if moment is not None else datetime.datetime.now(datetime.UTC)
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class RunInfo:
    """What `run.json` holds."""

    eval_name: str
    suite: str | None
    started_at: str
    completed_at: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The file's JSON object (camelCase, as the eval's status spells its times)."""
        return {
            "eval": self.eval_name,
            "suite": self.suite,
            "startedAt": self.started_at,
            "completedAt": self.completed_at,
        }


def write_run_info(directory: str, info: RunInfo) -> None:
    """Write `directory/run.json` whole (InputError when it cannot be written)."""
    data = json.dumps(info.as_json(), indent=2) + "\n"
    write_file(os.path.join(directory, RUN_INFO), data.encode())


def _text(document: dict[str, Any], key: str, path: str, *, required: bool) -> str | None:
    value = document.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise InputError(f"{key}: expected a non-empty string, got {json.dumps(value)}", path=path)
    return value


def read_run_info(directory: str) -> RunInfo | None:
    """`directory/run.json`, None when there is none; InputError naming the file and the
    field when it is malformed."""
    path = os.path.join(directory, RUN_INFO)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read: {err}", path=path) from None
    try:
        document = json.loads(text)
    except ValueError as err:
        raise InputError(f"bad JSON: {err}", path=path) from None
    if not isinstance(document, dict):
        raise InputError("expected a JSON object", path=path)
    return RunInfo(
        eval_name=_text(document, "eval", path, required=True) or "",
        suite=_text(document, "suite", path, required=False),
        started_at=_text(document, "startedAt", path, required=True) or "",
        completed_at=_text(document, "completedAt", path, required=False),
    )
