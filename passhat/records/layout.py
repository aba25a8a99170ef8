"""Where each part of a record lives: in a run directory (or bundle) and in a record store.

One layout serves a local run directory and a cluster eval's bundle, so every command
reads both alike:

    trials.jsonl                              one AttemptRecord per finished attempt
    spec.yaml                                 the eval as it ran
    transcripts/<task>/<trial>-<attempt>.log  the attempt's output (all containers' logs)
    results/<task>/<trial>-<attempt>.json     the attempt's result JSON, when it wrote one
    report.html                               (bundles) the report, linking flaky tasks' transcripts

`<task>` is `transcript_name(task_id)`: task ids may hold `/` and worse.

In a record store an eval's objects sit under `<namespace>/<eval>/<uid>/` (below the
store's own prefix, e.g. `s3://bucket/PREFIX`): the
uid keeps a deleted-and-recreated eval's records apart from its predecessor's, and the
namespace first makes a namespace's records one prefix (for retention rules and audits).
There, the task is its index in the eval's task list (`eval.json` holds the ids).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

__all__ = [
    "RESULTS",
    "SPEC",
    "TRANSCRIPTS",
    "TRIALS",
    "StoreLayout",
    "transcript_name",
    "transcript_relpath",
]

TRIALS = "trials.jsonl"
SPEC = "spec.yaml"
TRANSCRIPTS = "transcripts"
RESULTS = "results"
REPORT = "report.html"

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
# The longest transcript directory name (file systems allow 255 bytes).
NAME_MAX = 200


def transcript_name(task_id: str) -> str:
    """A directory name for a task's transcripts (ids may hold `/` and worse).

    An id of at most NAME_MAX safe characters is its own name; any other id gets a hash of
    itself appended (after truncation, so two long ids sharing a prefix never share one).
    """
    safe = _UNSAFE.sub("_", task_id).lstrip(".") or "_"
    if safe == task_id and len(safe) <= NAME_MAX:
        return safe
    digest = hashlib.sha1(task_id.encode()).hexdigest()[:8]
    return safe[: NAME_MAX - len(digest) - 1] + "-" + digest


def transcript_relpath(task_id: str, trial: int, attempt: int, *, kind: str = TRANSCRIPTS) -> str:
    """`transcripts/<task>/<trial>-<attempt>.log` (or `results/.../….json` for RESULTS)."""
    suffix = ".json" if kind == RESULTS else ".log"
    return f"{kind}/{transcript_name(task_id)}/{trial}-{attempt}{suffix}"


def _segment(value: str) -> str:
    """A key segment that cannot climb or split (Kubernetes names never need this)."""
    if not value or value in (".", "..") or "/" in value:
        raise ValueError(f"not a valid key segment: {value!r}")
    return value


@dataclass(frozen=True)
class StoreLayout:
    """The object keys of one eval's records in a RecordStore."""

    namespace: str
    name: str
    uid: str

    @property
    def eval_prefix(self) -> str:
        """`<namespace>/<eval>/<uid>/`: everything of this eval."""
        return f"{_segment(self.namespace)}/{_segment(self.name)}/{_segment(self.uid)}/"

    @staticmethod
    def evals_prefix(namespace: str, name: str) -> str:
        """`<namespace>/<eval>/`: every uid an eval of this name has had."""
        return f"{_segment(namespace)}/{_segment(name)}/"

    @property
    def eval_key(self) -> str:
        """The eval's manifest: name, uid, creation time, task ids, the spec as it ran."""
        return self.eval_prefix + "eval.json"

    @property
    def records_prefix(self) -> str:
        return self.eval_prefix + "attempts/"

    def record_key(self, task: int, trial: int, attempt: int) -> str:
        """The attempt's record (JSON). Written LAST: its presence means the attempt is
        archived whole (transcript and all)."""
        return f"{self.records_prefix}{task}/{trial}-{attempt}.json"

    def transcript_key(self, task: int, trial: int, attempt: int) -> str:
        """The attempt's logs: every container's, each under a header line."""
        return f"{self.eval_prefix}transcripts/{task}/{trial}-{attempt}.log"

    @staticmethod
    def parse_record_key(key: str) -> tuple[int, int, int] | None:
        """(task, trial, attempt) from a record key, None for any other key."""
        match = re.search(r"/attempts/(\d+)/(\d+)-(\d+)\.json$", key)
        return (int(match[1]), int(match[2]), int(match[3])) if match else None
