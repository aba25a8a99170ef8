"""passhat.stats: the pure scoring core (estimators, summaries, intervals, compare, power).

Everything else in passhat reports numbers computed here, so this package imports nothing
of passhat and keeps numpy out of its import path (`passhat run` starts fast); the functions
that need numpy import it when called.
"""

from passhat.stats.bootstrap import Interval, KIntervals, bootstrap
from passhat.stats.changes import TaskChange, task_changes
from passhat.stats.compare import BETTER, WITHIN_NOISE, WORSE, Comparison, Difference, compare
from passhat.stats.estimators import pass_at_k, pass_hat_k
from passhat.stats.power import PowerPlan, PowerRow, power
from passhat.stats.proportion import wilson
from passhat.stats.summary import (
    KSummary,
    TaskTally,
    default_ks,
    flaky_order,
    summarize,
    summarize_many,
    tally,
)

__all__ = [
    "BETTER",
    "WITHIN_NOISE",
    "WORSE",
    "Comparison",
    "Difference",
    "Interval",
    "KIntervals",
    "KSummary",
    "PowerPlan",
    "PowerRow",
    "TaskChange",
    "TaskTally",
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
