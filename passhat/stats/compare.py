"""Paired comparison of two result sets on the same tasks: is B better than A, or noise?

Tasks are the unit: for each task scored in both sets the difference B - A of its pass
rate and of its pass^k is one paired observation. The p-value is a sign-flip permutation
test (under "no difference" each task's difference is as likely negative as positive;
exact when few tasks differ, seeded Monte Carlo otherwise); the interval is a bootstrap
over the paired tasks. The verdict follows the p-value. Tasks present in only one set, or
with too few graded trials in one, are listed and left out of the comparison.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from passhat.stats.bootstrap import Interval, percentile_interval, resampled_means
from passhat.stats.estimators import pass_hat_k
from passhat.stats.summary import TaskTally

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["BETTER", "WITHIN_NOISE", "WORSE", "Comparison", "Difference", "compare", "sign_flip_p"]

BETTER = "better"
WORSE = "worse"
WITHIN_NOISE = "within noise"

# Up to this many non-zero differences the sign-flip test enumerates every sign pattern.
_EXACT_MAX = 14
# Random signs drawn at once in the Monte Carlo test (memory: 8 bytes each).
_CHUNK = 1_000_000


@dataclass(frozen=True)
class Difference:
    """One metric of a comparison: A's and B's averages over the paired tasks and B - A."""

    a: float
    b: float
    diff: float
    interval: Interval
    p_value: float
    verdict: str

    def as_json(self) -> dict[str, Any]:
        """The fields as plain JSON values (interval as `[low, high]`)."""
        return {
            "a": self.a,
            "b": self.b,
            "diff": self.diff,
            "interval": self.interval.as_json(),
            "p_value": self.p_value,
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class Comparison:
    """B against A at one k."""

    k: int
    level: float
    tasks_paired: int
    only_in_a: list[str]
    only_in_b: list[str]
    need_more_trials: list[str]
    mean_pass_rate: Difference
    pass_hat_k: Difference

    def as_json(self) -> dict[str, Any]:
        """The comparison as one JSON object."""
        return {
            "k": self.k,
            "level": self.level,
            "tasks_paired": self.tasks_paired,
            "only_in_a": list(self.only_in_a),
            "only_in_b": list(self.only_in_b),
            "need_more_trials": list(self.need_more_trials),
            "mean_pass_rate": self.mean_pass_rate.as_json(),
            "pass_hat_k": self.pass_hat_k.as_json(),
        }


def sign_flip_p(
    diffs: npt.NDArray[np.float64], *, resamples: int, rng: np.random.Generator
) -> float:
    """Two-sided p-value of the paired sign-flip test of mean(diffs) = 0."""
    import numpy as np

    nonzero = diffs[diffs != 0.0]
    m = len(nonzero)
    if m == 0:
        return 1.0
    observed = abs(float(nonzero.sum())) - 1e-12
    if m <= _EXACT_MAX:
        patterns = (np.arange(2**m)[:, None] >> np.arange(m)) & 1
        signs = 1.0 - 2.0 * patterns
        sums = np.abs(signs @ nonzero)
        return float(np.mean(sums >= observed))
    hits = 0
    chunk = max(1, _CHUNK // m)
    for start in range(0, resamples, chunk):
        signs = rng.choice(np.array([-1.0, 1.0]), size=(min(chunk, resamples - start), m))
        hits += int(np.sum(np.abs(signs @ nonzero) >= observed))
    return (1 + hits) / (1 + resamples)


def _difference(
    a: npt.NDArray[np.float64],
    b: npt.NDArray[np.float64],
    *,
    level: float,
    resamples: int,
    rng: np.random.Generator,
) -> Difference:
    import numpy as np

    if len(a) == 0:
        return Difference(0.0, 0.0, 0.0, Interval(0.0, 0.0), 1.0, WITHIN_NOISE)
    diffs = b - a
    interval = percentile_interval(
        resampled_means(diffs[:, None], resamples=resamples, rng=rng)[:, 0], level
    )
    p = sign_flip_p(diffs, resamples=resamples, rng=rng)
    diff = float(np.mean(diffs))
    verdict = WITHIN_NOISE
    if p < 1.0 - level:
        verdict = BETTER if diff > 0 else WORSE
    return Difference(float(np.mean(a)), float(np.mean(b)), diff, interval, p, verdict)


def compare(
    a: Sequence[TaskTally],
    b: Sequence[TaskTally],
    ks: Iterable[int],
    *,
    resamples: int = 10000,
    seed: int = 0,
    level: float = 0.95,
) -> list[Comparison]:
    """Compare B with A per k; a verdict is "better"/"worse" when p < 1 - level."""
    import numpy as np

    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level} must be between 0 and 1")
    if resamples < 1:
        raise ValueError(f"resamples={resamples} must be at least 1")
    by_id_a = {t.task_id: t for t in a}
    by_id_b = {t.task_id: t for t in b}
    only_a = [t.task_id for t in a if t.task_id not in by_id_b]
    only_b = [t.task_id for t in b if t.task_id not in by_id_a]
    both = [(t, by_id_b[t.task_id]) for t in a if t.task_id in by_id_b]
    result = []
    for k in ks:
        if k < 1:
            raise ValueError(f"k={k} must be at least 1")
        paired = [(x, y) for x, y in both if x.graded >= k and y.graded >= k]
        need_more = [x.task_id for x, y in both if x.graded < k or y.graded < k]
        rate_a = np.array([x.passed / x.graded for x, _ in paired], dtype=np.float64)
        rate_b = np.array([y.passed / y.graded for _, y in paired], dtype=np.float64)
        hat_a = np.array([pass_hat_k(x.graded, x.passed, k) for x, _ in paired], dtype=np.float64)
        hat_b = np.array([pass_hat_k(y.graded, y.passed, k) for _, y in paired], dtype=np.float64)
        rng = np.random.default_rng([seed, k])
        result.append(
            Comparison(
                k=k,
                level=level,
                tasks_paired=len(paired),
                only_in_a=only_a,
                only_in_b=only_b,
                need_more_trials=need_more,
                mean_pass_rate=_difference(
                    rate_a, rate_b, level=level, resamples=resamples, rng=rng
                ),
                pass_hat_k=_difference(hat_a, hat_b, level=level, resamples=resamples, rng=rng),
            )
        )
    return result
