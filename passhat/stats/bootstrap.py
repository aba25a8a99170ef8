"""Bootstrap confidence intervals over tasks for the mean, pass@k and pass^k.

The uncertainty that matters for an eval is which tasks were chosen: per-task estimates are
independent draws from the task population, so resampling tasks with replacement (the
clustered bootstrap; trials stay inside their task) gives intervals for the population
values. One seeded draw of tasks serves every k: each resample picks tasks once, and every
k's averages are taken over the picked tasks scored at that k. So the mean pass rate, which
is the same figure at every k where the same tasks are scored, gets the same interval in
every row (one draw per k gave each row its own), an interval does not change when other
ks are asked for, and the same seed always gives the same interval.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from passhat.stats.estimators import pass_at_k, pass_hat_k
from passhat.stats.summary import TaskTally

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "DEFAULT_RESAMPLES",
    "Interval",
    "KIntervals",
    "bootstrap",
    "percentile_interval",
    "resampled_means",
    "task_values",
]


# Resamples of every interval passhat computes unless told otherwise (`--resamples`): the
# reports, the status, the metrics and the lowerBound gate show the same seeded figures.
DEFAULT_RESAMPLES = 2000


@dataclass(frozen=True)
class Interval:
    """A two-sided interval [low, high]."""

    low: float
    high: float

    def as_json(self) -> list[float]:
        """`[low, high]`."""
        return [self.low, self.high]


@dataclass(frozen=True)
class KIntervals:
    """Bootstrap intervals at one k for the three averages of `KSummary`."""

    k: int
    level: float
    mean_pass_rate: Interval
    pass_at_k: Interval
    pass_hat_k: Interval

    def as_json(self) -> dict[str, Any]:
        """`{"k", "level", "mean_pass_rate": [lo, hi], "pass_at_k": [...], "pass_hat_k": [...]}`."""
        return {
            "k": self.k,
            "level": self.level,
            "mean_pass_rate": self.mean_pass_rate.as_json(),
            "pass_at_k": self.pass_at_k.as_json(),
            "pass_hat_k": self.pass_hat_k.as_json(),
        }


def task_values(tally: TaskTally, k: int) -> tuple[float, float, float]:
    """Per-task (pass rate, pass@k, pass^k) of a task with at least k graded trials."""
    n, c = tally.graded, tally.passed
    return c / n, pass_at_k(n, c, k), pass_hat_k(n, c, k)


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level} must be between 0 and 1")


def percentile_interval(samples: npt.NDArray[np.float64], level: float) -> Interval:
    """The central `level` percentile interval of bootstrap samples."""
    import numpy as np

    tail = (1.0 - level) / 2.0
    low, high = np.quantile(samples, [tail, 1.0 - tail])
    return Interval(float(low), float(high))


def resampled_means(
    values: npt.NDArray[np.float64], *, resamples: int, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """Column means of `resamples` bootstrap resamples of the rows of `values`.

    Resampling m rows with replacement is drawing multinomial counts over the distinct
    rows (a task's values depend only on its n and c, so there are few): the same
    distribution at a fraction of the cost for 10,000 tasks.
    """
    import numpy as np

    distinct, counts = np.unique(values, axis=0, return_counts=True)
    rows = len(values)
    weights = rng.multinomial(rows, counts / rows, size=resamples)
    means: npt.NDArray[np.float64] = (weights @ distinct) / rows
    return means


def bootstrap(
    tallies: Sequence[TaskTally],
    ks: Iterable[int],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> list[KIntervals]:
    """Percentile intervals per k from one seeded resampling of the graded tasks.

    Each resample draws the graded tasks with replacement (as multinomial counts over the
    distinct (graded, passed) pairs, which is all a task's values depend on); at each k the
    averages are over the drawn tasks scored at k, as `summarize` averages over the scored
    tasks. A resample that drew no task scored at k is left out of that k's interval. With
    no scored task at some k every interval there is [0, 0], like the averages.
    """
    _check_level(level)
    if resamples < 1:
        raise ValueError(f"resamples={resamples} must be at least 1")
    ks = list(ks)
    for k in ks:
        if k < 1:
            raise ValueError(f"k={k} must be at least 1")
    # NB: distinct pairs counted in Python, sorted as np.unique sorts them: no task-sized
    # array, and no numpy at all until a task is graded (the operator's first passes)
    counted = Counter((t.graded, t.passed) for t in tallies if t.graded >= 1)
    pairs = sorted(counted)
    empty = Interval(0.0, 0.0)
    if not pairs:
        return [KIntervals(k, level, empty, empty, empty) for k in ks]
    import numpy as np

    total = sum(counted.values())
    counts = np.array([counted[pair] for pair in pairs], dtype=np.float64)
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(total, counts / total, size=resamples).astype(np.float64)
    result = []
    for k in ks:
        scored = np.array([n >= k for n, _ in pairs], dtype=np.float64)
        if not scored.any():
            result.append(KIntervals(k, level, empty, empty, empty))
            continue
        values = np.array(
            [
                task_values(TaskTally("", c, n - c, 0), k) if n >= k else (0.0, 0.0, 0.0)
                for n, c in pairs
            ],
            dtype=np.float64,
        )
        drawn = weights @ scored
        kept = drawn > 0
        means = (weights[kept] @ values) / drawn[kept, None]
        mean, at_k, hat_k = (percentile_interval(means[:, j], level) for j in range(3))
        result.append(KIntervals(k, level, mean, at_k, hat_k))
    return result
