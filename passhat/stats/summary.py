"""Per-task tallies and the per-k summary every report, status and gate is built from.

One function decides what "scored" means so that `passhat score`, `passhat run` and the
operator's status can never disagree: infra errors are out of n and c; a task with fewer
graded trials than k is listed in `need_more_trials` and left out of the averages; the
averages are over the scored tasks; flaky tasks (0 < c < n) come most inconsistent first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import fsum
from typing import Any

from passhat.stats.estimators import pass_at_k, pass_hat_k

__all__ = [
    "OUTCOMES",
    "KSummary",
    "TaskTally",
    "default_ks",
    "flaky_order",
    "summarize",
    "summarize_many",
    "tally",
]

# The outcome strings a row may carry (the values of passhat.trials.outcomes.Outcome).
OUTCOMES = ("pass", "fail", "infra_error")


@dataclass(frozen=True)
class TaskTally:
    """The finished attempts of one task: graded passes and fails, and infra errors."""

    task_id: str
    passed: int
    failed: int
    infra_errors: int

    @property
    def graded(self) -> int:
        """Trials that count in the score (n): passes plus fails."""
        return self.passed + self.failed

    @property
    def attempts(self) -> int:
        """Every recorded attempt, infra errors included."""
        return self.passed + self.failed + self.infra_errors


def tally(rows: Iterable[tuple[str, str]]) -> list[TaskTally]:
    """Count (task_id, outcome) rows per task, in first-seen task order.

    Raises ValueError for an outcome that is not pass, fail or infra_error.
    """
    counts: dict[str, list[int]] = {}
    for task_id, outcome in rows:
        try:
            index = OUTCOMES.index(str(outcome))
        except ValueError:
            raise ValueError(
                f"unknown outcome {outcome!r} (expected one of {', '.join(OUTCOMES)})"
            ) from None
        counts.setdefault(task_id, [0, 0, 0])[index] += 1
    return [TaskTally(task_id, *c) for task_id, c in counts.items()]


@dataclass(frozen=True)
class KSummary:
    """The numbers for one k: what `passhat score --format json` prints per k."""

    k: int
    tasks_scored: int
    mean_pass_rate: float
    pass_at_k: float
    pass_hat_k: float
    flaky: list[str]
    need_more_trials: list[str]
    infra_error_rate: float

    def as_json(self) -> dict[str, Any]:
        """Exactly the eight keys of the JSON report, in a stable order."""
        return {
            "k": self.k,
            "tasks_scored": self.tasks_scored,
            "mean_pass_rate": self.mean_pass_rate,
            "pass_at_k": self.pass_at_k,
            "pass_hat_k": self.pass_hat_k,
            "flaky": list(self.flaky),
            "need_more_trials": list(self.need_more_trials),
            "infra_error_rate": self.infra_error_rate,
        }


def flaky_order(tallies: Iterable[TaskTally]) -> list[TaskTally]:
    """Tasks with 0 < c < n, most inconsistent first (c/n closest to 1/2), then by task id."""
    flaky = [t for t in tallies if 0 < t.passed < t.graded]
    # NB: a correctly rounded quotient keeps equal ratios equal and distinct ones ordered
    return sorted(flaky, key=lambda t: (abs(2 * t.passed - t.graded) / t.graded, t.task_id))


def _mean(values: Sequence[float]) -> float:
    return fsum(values) / len(values) if values else 0.0


def summarize(tallies: Sequence[TaskTally], k: int) -> KSummary:
    """The summary for one k (ValueError for k < 1)."""
    if k < 1:
        raise ValueError(f"k={k} must be at least 1")
    scored = [t for t in tallies if t.graded >= k]
    need_more = [t.task_id for t in tallies if t.graded < k]
    rows = sum(t.attempts for t in tallies)
    infra = sum(t.infra_errors for t in tallies)
    return KSummary(
        k=k,
        tasks_scored=len(scored),
        mean_pass_rate=_mean([t.passed / t.graded for t in scored]),
        pass_at_k=_mean([pass_at_k(t.graded, t.passed, k) for t in scored]),
        pass_hat_k=_mean([pass_hat_k(t.graded, t.passed, k) for t in scored]),
        flaky=[t.task_id for t in flaky_order(scored)],
        need_more_trials=need_more,
        infra_error_rate=infra / rows if rows else 0.0,
    )


def summarize_many(tallies: Sequence[TaskTally], ks: Iterable[int]) -> list[KSummary]:
    """One summary per k, in the order given."""
    return [summarize(tallies, k) for k in ks]


def default_ks(trials: int) -> list[int]:
    """The ks reported when none are asked for: 1, 3 and n, capped at n (trials >= 1)."""
    if trials < 1:
        raise ValueError(f"trials={trials} must be at least 1")
    return sorted({min(k, trials) for k in (1, 3, trials)})
