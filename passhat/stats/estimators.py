"""The two per-task estimators, as short products so they never overflow.

pass^k = C(c,k)/C(n,k) is the chance that k trials drawn without replacement from the n
graded ones all passed; pass@k = 1 - C(n-c,k)/C(n,k) the chance that at least one did.
Both are unbiased for p^k and 1-(1-p)^k of a task whose true pass rate is p. Written as
products of k ratios (no factorials), they stay exact enough at n = 10,000.
"""

from __future__ import annotations

__all__ = ["pass_at_k", "pass_hat_k"]


def _check(n: int, c: int, k: int) -> None:
    if k < 1:
        raise ValueError(f"k={k} must be at least 1")
    if k > n:
        raise ValueError(f"k={k} is larger than the {n} graded trials")
    if not 0 <= c <= n:
        raise ValueError(f"passed={c} must be between 0 and the {n} graded trials")


def _ratio(m: int, n: int, k: int) -> float:
    """C(m,k)/C(n,k) for 0 <= m <= n, k <= n: prod_{i<k} (m-i)/(n-i)."""
    if m < k:
        return 0.0
    product = 1.0
    for i in range(k):
        product *= (m - i) / (n - i)
    return product


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased chance that k trials of a task all pass, from c passes in n graded trials."""
    _check(n, c, k)
    return _ratio(c, n, k)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased chance that at least one of k trials passes, from c passes in n graded trials."""
    _check(n, c, k)
    return 1.0 - _ratio(n - c, n, k)
