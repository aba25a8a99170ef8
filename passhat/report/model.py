"""What a report says, computed once from tallies so every format says the same thing.

A report is built from per-task tallies, whoever produced them (a local run, the
operator's ledger, score files): the summary per requested k, the headline (the gap between
the mean pass rate and pass^k at the largest k), the per-task table with the flaky tasks
first (most inconsistent first), and the pass^k / pass@k curve over k. Two optional
parts come from whoever has them: the infra errors by reason (a trial file with reasons, a
local run, the operator's status) and links to each task's transcripts (a run directory
or bundle, whose report.html sits beside its `transcripts/`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from passhat.stats import KIntervals, KSummary, TaskTally, summarize, summarize_many
from passhat.stats.bootstrap import Interval
from passhat.stats.summary import flaky_order
from passhat.trials.usage import UsageSummary

__all__ = ["CurvePoint", "Report", "TaskRow", "build_report", "curve_ks"]

# The curve gets every k up to this many, and about this many spread points beyond.
_CURVE_POINTS = 64


@dataclass(frozen=True)
class CurvePoint:
    """pass^k and pass@k at one k (over the tasks scored at that k)."""

    k: int
    tasks_scored: int
    pass_hat_k: float
    pass_at_k: float


@dataclass(frozen=True)
class TaskRow:
    """One task of the per-task table."""

    task_id: str
    passed: int
    graded: int
    infra_errors: int
    flaky: bool
    # one mark per trial in trial order (passhat.trials.strips; empty: not known)
    trials: str = ""

    @property
    def pass_rate(self) -> float:
        """c / n, 0.0 for a task with no graded trial."""
        return self.passed / self.graded if self.graded else 0.0

    def as_json(self) -> dict[str, Any]:
        """The row as a JSON object."""
        return {
            "task_id": self.task_id,
            "passed": self.passed,
            "graded": self.graded,
            "infra_errors": self.infra_errors,
            "pass_rate": self.pass_rate,
            "flaky": self.flaky,
        }


@dataclass(frozen=True)
class Report:
    """Everything any format renders."""

    title: str
    summaries: list[KSummary]
    intervals: list[KIntervals] | None
    tasks: list[TaskRow]
    curve: list[CurvePoint]
    attempts: int
    # infra-error attempts per reason, most first (empty when the input had no reasons)
    infra_by_reason: dict[str, int] = field(default_factory=dict)
    # task id -> (label, relative href) of each of its transcripts (empty: no links)
    transcripts: Mapping[str, Sequence[tuple[str, str]]] = field(default_factory=dict)
    # what the attempts spent and used (None: the input says nothing of it)
    usage: UsageSummary | None = None

    @property
    def headline(self) -> KSummary | None:
        """The summary at the largest k with a scored task: its mean vs pass^k gap leads."""
        scored = [s for s in self.summaries if s.tasks_scored]
        return max(scored, key=lambda s: s.k) if scored else None

    @property
    def coverage(self) -> str | None:
        """Why the headline pass^k covers fewer than all tasks, None when it covers all.

        A task with fewer than k graded trials is out of pass^k; when infra errors put it
        there (its attempts would have reached k), a reader must know the headline is
        over fewer tasks than the run had, not the suite.
        """
        top = self.headline
        if top is None or top.tasks_scored == len(self.tasks):
            return None
        short = [row for row in self.tasks if row.graded < top.k]
        by_infra = sum(1 for row in short if row.graded + row.infra_errors >= top.k)
        has = "task has" if len(short) == 1 else "tasks have"
        text = (
            f"pass^{top.k} covers {top.tasks_scored} of {len(self.tasks)} tasks: "
            f"{len(short)} {has} fewer than {top.k} graded trials"
        )
        if by_infra:
            text += f", {by_infra} of them because of infra errors"
        return text + " (need more trials)"

    @property
    def flaky(self) -> list[TaskRow]:
        """Flaky tasks, most inconsistent first."""
        return [row for row in self.tasks if row.flaky]

    @property
    def infra_error_rate(self) -> float:
        """Infra-error rows over all rows."""
        infra = sum(row.infra_errors for row in self.tasks)
        return infra / self.attempts if self.attempts else 0.0

    def intervals_at(self, k: int) -> KIntervals | None:
        """The intervals of k, if computed."""
        for interval in self.intervals or []:
            if interval.k == k:
                return interval
        return None

    def mean_interval_at(self, k: int) -> Interval | None:
        """The mean pass rate's interval in the row of k: ONE figure for every k that
        scores the same tasks (the mean is then the same number), the smallest such k's.

        NB: bootstrap() draws its resamples once for every k, so rows scoring the same
        tasks have the same interval already; taking the smallest k's keeps that true of
        reports whose intervals were stored by an older passhat (a draw per k)."""
        rows = {s.k: s for s in self.summaries}
        if k not in rows:
            return None
        same = [s.k for s in self.summaries if s.tasks_scored == rows[k].tasks_scored]
        own = self.intervals_at(min(same))
        return own.mean_pass_rate if own is not None else None


def curve_ks(max_trials: int) -> list[int]:
    """Every k from 1 to max_trials, or about 64 spread ones (1 and max_trials included)."""
    if max_trials <= _CURVE_POINTS:
        return list(range(1, max_trials + 1))
    steps = _CURVE_POINTS - 1
    return sorted({round(max_trials ** (i / steps)) for i in range(steps + 1)})


def build_report(
    tallies: Sequence[TaskTally],
    ks: Sequence[int],
    *,
    title: str = "",
    intervals: Sequence[KIntervals] | None = None,
    infra_by_reason: Mapping[str, int] | None = None,
    transcripts: Mapping[str, Sequence[tuple[str, str]]] | None = None,
    strips: Mapping[str, str] | None = None,
    usage: UsageSummary | None = None,
) -> Report:
    """The report of these tallies at these ks (ValueError for a k below 1).

    `infra_by_reason`: infra-error attempts per reason, shown when given and not empty;
    `transcripts`: per task id, (label, relative href) links the HTML report shows beside
    the flaky tasks; `strips`: per task id, its trials' marks in trial order
    (passhat.trials.strips), shown beside each task; `usage`: what the attempts spent
    (passhat.trials.usage), shown when any attempt reported or was measured.
    """
    summaries = summarize_many(tallies, ks)
    flaky = flaky_order(tallies)
    flaky_ids = {t.task_id for t in flaky}
    ordered = flaky + [t for t in tallies if t.task_id not in flaky_ids]
    rows = [
        TaskRow(
            t.task_id,
            t.passed,
            t.graded,
            t.infra_errors,
            t.task_id in flaky_ids,
            (strips or {}).get(t.task_id, ""),
        )
        for t in ordered
    ]
    max_graded = max((t.graded for t in tallies), default=0)
    curve = []
    for k in curve_ks(max_graded):
        summary = summarize(tallies, k)
        curve.append(CurvePoint(k, summary.tasks_scored, summary.pass_hat_k, summary.pass_at_k))
    return Report(
        title=title,
        summaries=summaries,
        intervals=list(intervals) if intervals is not None else None,
        tasks=rows,
        curve=curve,
        attempts=sum(t.attempts for t in tallies),
        infra_by_reason=dict(infra_by_reason or {}),
        transcripts=dict(transcripts or {}),
        usage=usage if usage is not None and not usage.empty else None,
    )
