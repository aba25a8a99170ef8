"""passhat.stats: the pure scoring core (estimators, summaries, intervals, compare, power).

Everything else in passhat reports numbers computed here, so this package imports nothing
of passhat and keeps numpy out of its import path (`passhat run` starts fast); the functions
that need numpy import it when called.
"""

from passhat.stats.estimators import pass_at_k, pass_hat_k
from passhat.stats.summary import (
    KSummary,
    TaskTally,
    default_ks,
    summarize,
    summarize_many,
    tally,
)

__all__ = [
    "KSummary",
    "TaskTally",
    "default_ks",
    "pass_at_k",
    "pass_hat_k",
    "summarize",
    "summarize_many",
    "tally",
]
