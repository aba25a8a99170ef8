"""The public names of passhat.stats and passhat.report, pinned."""

from __future__ import annotations

import passhat.report
import passhat.stats


def test_stats_exports() -> None:
    """passhat.stats exports exactly these names, and each exists."""
    assert sorted(passhat.stats.__all__) == [
        "BETTER",
        "Comparison",
        "Difference",
        "Interval",
        "KIntervals",
        "KSummary",
        "PowerPlan",
        "PowerRow",
        "TaskChange",
        "TaskTally",
        "WITHIN_NOISE",
        "WORSE",
        "bootstrap",
        "compare",
        "default_ks",
        "flaky_order",
        "pass_at_k",
        "pass_hat_k",
        "power",
        "summarize",
        "summarize_many",
        "tally",
        "task_changes",
        "wilson",
    ]
    for name in passhat.stats.__all__:
        assert hasattr(passhat.stats, name)


def test_report_exports() -> None:
    """passhat.report exports exactly these names, and each exists."""
    assert sorted(passhat.report.__all__) == [
        "FORMATS",
        "Report",
        "build_report",
        "render",
        "render_report",
        "save_plot",
    ]
    for name in passhat.report.__all__:
        assert hasattr(passhat.report, name)
