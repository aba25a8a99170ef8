"""How numbers read in the human formats (text, markdown, HTML): one place, one style."""

from __future__ import annotations

from passhat.stats import KIntervals, KSummary
from passhat.stats.bootstrap import Interval

__all__ = [
    "K_COLUMNS",
    "STRIP_MAX",
    "by_reason",
    "cell",
    "headline",
    "k_cells",
    "pct",
    "strip_text",
]

# A strip longer than this shows its first trials and how many more.
STRIP_MAX = 64

# The columns of the per-k table, the same in every human format.
K_COLUMNS = ("k", "tasks", "mean", "pass@k", "pass^k", "flaky", "need more trials")


def pct(value: float) -> str:
    """A rate as a percentage with one decimal: `53.6%`."""
    return f"{100.0 * value:.1f}%"


def cell(
    value: float, intervals: KIntervals | None, name: str, *, interval: Interval | None = None
) -> str:
    """`53.6%`, or `53.6% [35.0–72.1]` when intervals were computed (`interval`, when
    given, instead of the one in `intervals`)."""
    if interval is None and intervals is not None:
        interval = getattr(intervals, name)
    if interval is None:
        return pct(value)
    return f"{pct(value)} [{100.0 * interval.low:.1f}–{100.0 * interval.high:.1f}]"


def headline(summary: KSummary) -> str:
    """`pass^8 50.0% vs mean pass rate 75.0%: 25.0 points lost to inconsistency`."""
    gap = 100.0 * (summary.mean_pass_rate - summary.pass_hat_k)
    return (
        f"pass^{summary.k} {pct(summary.pass_hat_k)} vs mean pass rate "
        f"{pct(summary.mean_pass_rate)}: {gap:.1f} points lost to inconsistency"
    )


def by_reason(counts: dict[str, int]) -> str:
    """`infra errors by reason: oom_killed 3, timeout 1` (counts most first)."""
    return "infra errors by reason: " + ", ".join(f"{r} {n}" for r, n in counts.items())


def k_cells(
    summary: KSummary, intervals: KIntervals | None, *, mean_interval: Interval | None = None
) -> tuple[str, ...]:
    """One row of the per-k table, in K_COLUMNS order (`mean_interval`: the mean's one
    interval, Report.mean_interval_at)."""
    return (
        str(summary.k),
        str(summary.tasks_scored),
        cell(summary.mean_pass_rate, intervals, "mean_pass_rate", interval=mean_interval),
        cell(summary.pass_at_k, intervals, "pass_at_k"),
        cell(summary.pass_hat_k, intervals, "pass_hat_k"),
        str(len(summary.flaky)),
        str(len(summary.need_more_trials)),
    )


def strip_text(marks: str, limit: int = STRIP_MAX) -> str:
    """A task's trial marks as text: `++-+!` (cut at `limit` with `… +N`)."""
    if len(marks) <= limit:
        return marks
    return f"{marks[:limit]}… +{len(marks) - limit}"
