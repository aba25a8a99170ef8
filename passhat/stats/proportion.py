"""A confidence interval for one proportion: the Wilson score interval.

A rate measured on a small sample (grader noise on 20 transcripts, say) needs its
uncertainty beside it: 0 noisy of 20 still allows a noise rate near 16 %. Wilson's
interval keeps inside [0, 1], is not degenerate at 0 or n successes (unlike the normal
approximation) and is close to nominal coverage at small n (Brown, Cai and DasGupta 2001),
without the numerical search an exact Clopper-Pearson interval needs.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from passhat.stats.bootstrap import Interval

__all__ = ["wilson"]


def wilson(successes: int, n: int, *, level: float = 0.95) -> Interval:
    """The Wilson score interval for successes / n at `level`; [0, 1] when n is 0."""
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, n], got {successes} of {n}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if n == 0:
        return Interval(0.0, 1.0)
    z = NormalDist().inv_cdf(0.5 + level / 2)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # NB: at 0 or n successes one bound is exactly 0 or 1; rounding must not move it
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(low, high)
