"""How many tasks x trials a comparison needs to detect a given change in the mean pass rate.

The design is the one `compare` analyses: both agents run the same m tasks, n trials each,
and the per-task paired differences d of pass rates go through the sign-flip test. Their
variance is

    sigma^2(n) = task_sd^2 + (E[p(1-p)] + E[q(1-q)]) / n,     q = p + diff,

(`task_sd`: how much the true change varies between tasks). The sign-flip test scales its
null by sum(d^2), which under the alternative estimates sigma^2 + diff^2, not sigma^2; so
it needs more tasks than a t-test when the change is large against the noise:

    m = (z_{1-alpha/2} sqrt(sigma^2 + diff^2) + z_power sigma)^2 / diff^2 + z_{1-alpha/2}^2 / 2

(the last term is Guenther's small-sample correction; the whole is checked against
simulations of `compare` in tests/unit/test_power.py). E[p(1-p)] comes from a pilot
(unbiased per task: c(n-c) / (n(n-1))), or from a single mean rate p as p(1-p), which
assumes every task passes at the same rate and so is the most conservative choice.
More trials only shrink the within-task term: past some n, only more tasks help.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from passhat.stats.summary import TaskTally

__all__ = ["PowerPlan", "PowerRow", "power"]

DEFAULT_TRIALS = (1, 2, 4, 8, 16, 32)
# The smallest change planned for: 1e-300 divided by zero; 1e-4 already needs ~10^9 tasks.
MIN_DIFF = 1e-4


@dataclass(frozen=True)
class PowerRow:
    """Tasks needed when every task runs `trials` trials per agent."""

    trials: int
    tasks: int

    def as_json(self) -> dict[str, int]:
        """`{"trials": n, "tasks": m}`."""
        return {"trials": self.trials, "tasks": self.tasks}


@dataclass(frozen=True)
class PowerPlan:
    """The inputs, the variance they imply, and tasks needed per trial count."""

    diff: float
    alpha: float
    target_power: float
    mean_rate: float
    within_variance: float
    task_sd: float
    rows: list[PowerRow]

    def as_json(self) -> dict[str, Any]:
        """The plan as one JSON object."""
        return {
            "diff": self.diff,
            "alpha": self.alpha,
            "power": self.target_power,
            "mean_rate": self.mean_rate,
            "within_variance": self.within_variance,
            "task_sd": self.task_sd,
            "rows": [row.as_json() for row in self.rows],
        }


def _pilot_moments(pilot: Sequence[TaskTally]) -> tuple[float, float]:
    """Mean pass rate and unbiased E[p(1-p)] of the pilot's graded tasks."""
    graded = [t for t in pilot if t.graded >= 1]
    if not graded:
        raise ValueError("the pilot has no graded trial")
    mean = sum(t.passed / t.graded for t in graded) / len(graded)
    repeated = [t for t in graded if t.graded >= 2]
    if not repeated:
        return mean, mean * (1.0 - mean)
    within = sum(t.passed * t.failed / (t.graded * (t.graded - 1)) for t in repeated)
    return mean, within / len(repeated)


def _min_tasks(alpha: float) -> int:
    """Fewest tasks with which the exact two-sided sign-flip test can reach p < alpha."""
    return max(2, math.floor(1.0 + math.log2(1.0 / alpha)) + 1)


def power(
    *,
    diff: float,
    pilot: Sequence[TaskTally] | None = None,
    mean_rate: float | None = None,
    alpha: float = 0.05,
    target_power: float = 0.8,
    trials: Iterable[int] = DEFAULT_TRIALS,
    task_sd: float = 0.0,
) -> PowerPlan:
    """Tasks needed per trial count to detect a change `diff` in mean pass rate.

    Give exactly one of `pilot` (tallies of a pilot run) or `mean_rate`.
    Raises ValueError for inputs that make no sense (diff of 0, rates outside [0, 1], ...).
    """
    if (pilot is None) == (mean_rate is None):
        raise ValueError("give either a pilot result set or a mean rate, not both or neither")
    if pilot is not None:
        mean, within = _pilot_moments(pilot)
    else:
        assert mean_rate is not None
        if not 0.0 <= mean_rate <= 1.0:
            raise ValueError(f"mean rate {mean_rate} must be between 0 and 1")
        mean, within = mean_rate, mean_rate * (1.0 - mean_rate)
    if not math.isfinite(diff) or not 0.0 <= mean + diff <= 1.0:
        raise ValueError(f"diff={diff} must keep the mean rate {mean:.3f} within [0, 1]")
    if abs(diff) < MIN_DIFF:
        raise ValueError(f"diff={diff} is too small: at least {MIN_DIFF} (or -{MIN_DIFF})")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha={alpha} must be between 0 and 1")
    if not 0.0 < target_power < 1.0:
        raise ValueError(f"power={target_power} must be between 0 and 1")
    if not 0.0 <= task_sd <= 1.0:  # NB: also NaN; a change in pass rate varies by at most 1
        raise ValueError(f"task_sd={task_sd} must be between 0 and 1")
    counts = sorted(set(trials))
    if not counts or counts[0] < 1:
        raise ValueError("trial counts must be at least 1")
    shifted = max(0.0, within + diff * (1.0 - 2.0 * mean) - diff * diff)
    z_alpha = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    z_power = NormalDist().inv_cdf(target_power)
    rows = []
    for n in counts:
        variance = task_sd**2 + (within + shifted) / n
        spread = z_alpha * math.sqrt(variance + diff**2) + z_power * math.sqrt(variance)
        tasks = spread**2 / diff**2 + z_alpha**2 / 2.0
        rows.append(PowerRow(n, max(_min_tasks(alpha), math.ceil(tasks))))
    return PowerPlan(diff, alpha, target_power, mean, within, task_sd, rows)
