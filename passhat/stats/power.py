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

For pass^k (k >= 2, `power(k=...)`) the per-task estimate is the unbiased C(c,k)/C(n,k),
a U-statistic of degree k whose variance, given the task's pass rate p, is

    V_n,k(p) = sum_{j=1..k} C(k,j) C(n-k,k-j) / C(n,k) * (p^(2k-j) - p^(2k))

(Hoeffding), so n must be at least k. Side A's E[V] comes from the pilot with each p^m
estimated without bias by C(c,m)/C(n0,m) when the pilot has m trials of the task (else
(c/n0)^m); side B moves each task's pass^k by `diff` (q^k = p^k + diff, clipped to
[0, 1]) and uses those q. The task count then follows the same formula as for the mean.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import partial
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
    """The inputs, the variance they imply, and tasks needed per trial count.

    `k` 1 plans for the mean pass rate (pass^1), k >= 2 for pass^k: then `mean_rate` is
    the pilot's pass^k and `within_variance` E[V_n,k] at the first row's n.
    `cost_per_trial`: US dollars one graded trial cost in the pilot (None: unknown).
    """

    diff: float
    alpha: float
    target_power: float
    mean_rate: float
    within_variance: float
    task_sd: float
    rows: list[PowerRow]
    k: int = 1
    cost_per_trial: float | None = None

    def as_json(self) -> dict[str, Any]:
        """The plan as one JSON object (rows with their trials and dollars per agent)."""
        rows = []
        for row in self.rows:
            item: dict[str, Any] = row.as_json()
            item["total_trials"] = row.trials * row.tasks
            if self.cost_per_trial is not None:
                item["cost_usd"] = round(row.trials * row.tasks * self.cost_per_trial, 4)
            rows.append(item)
        return {
            "metric": "meanPassRate" if self.k == 1 else "passHatK",
            "k": self.k,
            "diff": self.diff,
            "alpha": self.alpha,
            "power": self.target_power,
            "mean_rate": self.mean_rate,
            "within_variance": self.within_variance,
            "task_sd": self.task_sd,
            "cost_per_trial_usd": self.cost_per_trial,
            "rows": rows,
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
    k: int = 1,
    cost_per_trial: float | None = None,
) -> PowerPlan:
    """Tasks needed per trial count to detect a change `diff` in mean pass rate (k=1) or
    in pass^k (k >= 2: trial counts below k are left out).

    Give exactly one of `pilot` (tallies of a pilot run) or `mean_rate` (for k >= 2 every
    task is assumed to pass at that rate). `cost_per_trial` prices the rows.
    Raises ValueError for inputs that make no sense (diff of 0, rates outside [0, 1], ...).
    """
    if cost_per_trial is not None and not (math.isfinite(cost_per_trial) and cost_per_trial >= 0):
        raise ValueError(f"cost per trial {cost_per_trial} must be a non-negative number")
    if k != 1:
        plan = _power_hat_k(
            diff=diff,
            pilot=pilot,
            mean_rate=mean_rate,
            alpha=alpha,
            target_power=target_power,
            trials=trials,
            task_sd=task_sd,
            k=k,
        )
        return replace(plan, cost_per_trial=cost_per_trial)
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
    _check_common(diff, alpha, target_power, task_sd)
    counts = sorted(set(trials))
    if not counts or counts[0] < 1:
        raise ValueError("trial counts must be at least 1")
    shifted = max(0.0, within + diff * (1.0 - 2.0 * mean) - diff * diff)
    rows = []
    for n in counts:
        variance = task_sd**2 + (within + shifted) / n
        rows.append(PowerRow(n, _tasks_needed(variance, diff, alpha, target_power)))
    return PowerPlan(
        diff, alpha, target_power, mean, within, task_sd, rows, cost_per_trial=cost_per_trial
    )


def _tasks_needed(variance: float, diff: float, alpha: float, target_power: float) -> int:
    """m of the module docstring for the paired differences' variance σ²."""
    z_alpha = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    z_power = NormalDist().inv_cdf(target_power)
    spread = z_alpha * math.sqrt(variance + diff**2) + z_power * math.sqrt(variance)
    needed = spread**2 / diff**2 + z_alpha**2 / 2.0
    return max(_min_tasks(alpha), math.ceil(needed))


def _check_common(diff: float, alpha: float, target_power: float, task_sd: float) -> None:
    """ValueError for a diff, alpha, power or task_sd no plan can be made for."""
    if abs(diff) < MIN_DIFF:
        raise ValueError(f"diff={diff} is too small: at least {MIN_DIFF} (or -{MIN_DIFF})")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha={alpha} must be between 0 and 1")
    if not 0.0 < target_power < 1.0:
        raise ValueError(f"power={target_power} must be between 0 and 1")
    if not 0.0 <= task_sd <= 1.0:  # NB: also NaN; a change in pass rate varies by at most 1
        raise ValueError(f"task_sd={task_sd} must be between 0 and 1")


def _moment(passed: int, graded: int, m: int) -> float:
    """An estimate of p^m from c of n: unbiased C(c,m)/C(n,m) when n >= m, else (c/n)^m."""
    if m == 0:
        return 1.0
    if graded >= m:
        return math.comb(passed, m) / math.comb(graded, m)
    return (passed / graded) ** m


def _power_of(base: float, m: int) -> float:
    return float(base**m)


def _u_variance(n: int, k: int, moment: Callable[[int], float]) -> float:
    """V_n,k of the module docstring, with p^m given by `moment(m)`."""
    total = math.comb(n, k)
    top = moment(2 * k)
    return sum(
        math.comb(k, j) * math.comb(n - k, k - j) / total * (moment(2 * k - j) - top)
        for j in range(1, k + 1)
    )


def _power_hat_k(
    *,
    diff: float,
    pilot: Sequence[TaskTally] | None,
    mean_rate: float | None,
    alpha: float,
    target_power: float,
    trials: Iterable[int],
    task_sd: float,
    k: int,
) -> PowerPlan:
    """`power` for pass^k, k >= 2 (see the module docstring)."""
    if k < 1:
        raise ValueError(f"k={k} must be at least 1")
    if (pilot is None) == (mean_rate is None):
        raise ValueError("give either a pilot result set or a mean rate, not both or neither")
    moments: list[Callable[[int], float]]  # per task: m -> its estimate of p^m
    if pilot is not None:
        tasks = [(t.passed, t.graded) for t in pilot if t.graded >= 1]
        if not tasks:
            raise ValueError("the pilot has no graded trial")
        moments = [partial(_moment, c, g) for c, g in tasks]
        hat_k = [min(1.0, max(0.0, _moment(c, g, k))) for c, g in tasks]
    else:
        assert mean_rate is not None
        if not 0.0 <= mean_rate <= 1.0:
            raise ValueError(f"mean rate {mean_rate} must be between 0 and 1")
        moments = [partial(_power_of, mean_rate)]
        hat_k = [mean_rate**k]
    mean = sum(hat_k) / len(hat_k)
    if not math.isfinite(diff) or not 0.0 <= mean + diff <= 1.0:
        raise ValueError(f"diff={diff} must keep pass^{k} {mean:.3f} within [0, 1]")
    _check_common(diff, alpha, target_power, task_sd)
    shifted = [min(1.0, max(0.0, h + diff)) ** (1.0 / k) for h in hat_k]
    counts = sorted({n for n in trials if n >= k})
    if not counts:
        raise ValueError(f"trial counts must reach k={k}: pass^{k} needs {k} trials per task")
    rows = []
    within_first = 0.0
    for n in counts:
        side_a = max(0.0, sum(_u_variance(n, k, m) for m in moments) / len(moments))
        side_b = sum(_u_variance(n, k, partial(_power_of, q)) for q in shifted) / len(shifted)
        if n == counts[0]:
            within_first = side_a
        variance = task_sd**2 + side_a + max(0.0, side_b)
        rows.append(PowerRow(n, _tasks_needed(variance, diff, alpha, target_power)))
    return PowerPlan(diff, alpha, target_power, mean, within_first, task_sd, rows, k=k)
