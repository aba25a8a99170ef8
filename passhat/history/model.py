"""A suite's history, computed once for every format: runs in order, scores, changes.

Runs are ordered by when they started (a cluster eval's creationTimestamp, a local run's
`run.json` startedAt), oldest first, as a CI system lists its runs: two runs that
overlap keep the order they were started in, which is the order of what they tested.
Each run is scored at the same ks (`summarize_many`); its mean pass rate, flaky count and
infra-error rate are those of the smallest k, as the eval's status reports them. Between
each run and the next, the tasks whose pass rate changed are `task_changes(before,
after)`: regressed, newly flaky, improved, newly passing, most significant first.
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from passhat.stats import KSummary, TaskChange, TaskTally, summarize_many, task_changes

__all__ = [
    "COMPLETE",
    "FAILED",
    "RUNNING",
    "UNKNOWN",
    "History",
    "RunPoint",
    "Step",
    "SuiteRun",
    "build_history",
    "iso",
    "order_runs",
]

# A run's state: every trial slot final; stopped early (deadline, config error, drain);
# still going; not recorded (a directory from before run.json, a bundle).
COMPLETE = "complete"
FAILED = "failed"
RUNNING = "running"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class SuiteRun:
    """One run of a suite, wherever it ran: what `build_history` needs of it."""

    title: str
    suite: str | None
    tallies: Sequence[TaskTally]
    started: float | None = None  # epoch seconds
    completed: float | None = None
    state: str = UNKNOWN


@dataclass(frozen=True)
class RunPoint:
    """One run scored: its summaries at the history's ks."""

    run: SuiteRun
    summaries: Sequence[KSummary]

    @property
    def first(self) -> KSummary:
        """The summary at the smallest k (mean, flaky and infra rate are read from it)."""
        return self.summaries[0]

    @property
    def tasks(self) -> int:
        """Tasks with at least one graded trial."""
        return sum(1 for t in self.run.tallies if t.graded)

    def as_json(self) -> dict[str, Any]:
        """The run as one JSON object of `passhat history --format json`."""
        run = self.run
        return {
            "run": run.title,
            "suite": run.suite,
            "state": run.state,
            "started": iso(run.started),
            "completed": iso(run.completed),
            "tasks": self.tasks,
            "mean_pass_rate": self.first.mean_pass_rate,
            "flaky": len(self.first.flaky),
            "infra_error_rate": self.first.infra_error_rate,
            "by_k": [s.as_json() for s in self.summaries],
        }


@dataclass(frozen=True)
class Step:
    """From one run to the next: the tasks whose pass rate changed, and the tasks graded
    in only one of the two (a suite gains and loses tasks)."""

    before: str
    after: str
    changes: Sequence[TaskChange]
    unchanged: int
    added: Sequence[str] = ()
    removed: Sequence[str] = ()

    def as_json(self) -> dict[str, Any]:
        """`{"from", "to", "changes": [as passhat compare's], "unchanged", "added",
        "removed"}`."""
        return {
            "from": self.before,
            "to": self.after,
            "changes": [c.as_json() for c in self.changes],
            "unchanged": self.unchanged,
            "added": list(self.added),
            "removed": list(self.removed),
        }


@dataclass(frozen=True)
class History:
    """A suite's runs, oldest first, scored at `ks`, and the steps between them."""

    suite: str | None
    ks: Sequence[int]
    points: Sequence[RunPoint]
    steps: Sequence[Step] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """`{"suite", "ks", "runs": [...], "steps": [...]}` (`passhat history --format json`)."""
        return {
            "suite": self.suite,
            "ks": list(self.ks),
            "runs": [p.as_json() for p in self.points],
            "steps": [s.as_json() for s in self.steps],
        }


def iso(moment: float | None) -> str | None:
    """Epoch seconds as RFC 3339 UTC (`2026-12-05T07:00:00Z`), None for None."""
    if moment is None:
        return None
    return datetime.datetime.fromtimestamp(moment, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def order_runs(runs: Sequence[SuiteRun]) -> list[SuiteRun]:
    """Oldest start first; runs with no known start last; ties by title."""
    return sorted(
        runs, key=lambda r: (r.started is None, r.started if r.started is not None else 0, r.title)
    )


def _step(before: SuiteRun, after: SuiteRun) -> Step:
    changes = task_changes(before.tallies, after.tallies)
    graded_before = [t.task_id for t in before.tallies if t.graded]
    graded_after = [t.task_id for t in after.tallies if t.graded]
    paired = len(set(graded_before) & set(graded_after))
    return Step(
        before.title,
        after.title,
        changes,
        paired - len(changes),
        added=[t for t in graded_after if t not in set(graded_before)],
        removed=[t for t in graded_before if t not in set(graded_after)],
    )


def build_history(runs: Sequence[SuiteRun], ks: Sequence[int], *, suite: str | None) -> History:
    """Order `runs`, score each at `ks` and list the changes between consecutive runs."""
    ordered = order_runs(runs)
    wanted = sorted(set(ks))
    points = [RunPoint(run, summarize_many(run.tallies, wanted)) for run in ordered]
    steps = [_step(a, b) for a, b in itertools.pairwise(ordered)]
    return History(suite=suite, ks=wanted, points=points, steps=steps)
