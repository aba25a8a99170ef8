"""How numbers read in the human formats (text, markdown, HTML): one place, one style."""

from __future__ import annotations

from passhat.stats import KIntervals, KSummary

__all__ = ["K_COLUMNS", "by_reason", "cell", "headline", "k_cells", "pct"]

# The columns of the per-k table, the same in every human format.
K_COLUMNS = ("k", "tasks", "mean", "pass@k", "pass^k", "flaky", "need more trials")


def pct(value: float) -> str:
    """A rate as a percentage with one decimal: `53.6%`."""
    return f"{100.0 * value:.1f}%"


def cell(value: float, intervals: KIntervals | None, name: str) -> str:
    """`53.6%`, or `53.6% [35.0–72.1]` when intervals were computed."""
    if intervals is None:
        return pct(value)
    interval = getattr(intervals, name)
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


def k_cells(summary: KSummary, intervals: KIntervals | None) -> tuple[str, ...]:
    """One row of the per-k table, in K_COLUMNS order."""
    return (
        str(summary.k),
        str(summary.tasks_scored),
        cell(summary.mean_pass_rate, intervals, "mean_pass_rate"),
        cell(summary.pass_at_k, intervals, "pass_at_k"),
        cell(summary.pass_hat_k, intervals, "pass_hat_k"),
        str(len(summary.flaky)),
        str(len(summary.need_more_trials)),
    )
