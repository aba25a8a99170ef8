"""How numbers read in the human formats (text, markdown, HTML): one place, one style."""

from __future__ import annotations

from passhat.stats import KIntervals, KSummary

__all__ = ["cell", "headline", "pct"]


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
