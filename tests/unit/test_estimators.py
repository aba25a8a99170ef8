"""pass^k and pass@k against brute-force enumeration of k-subsets, and their edges."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from passhat.stats import pass_at_k, pass_hat_k


@st.composite
def n_c_k(draw: st.DrawFn) -> tuple[int, int, int]:
    n = draw(st.integers(min_value=1, max_value=10))
    c = draw(st.integers(min_value=0, max_value=n))
    k = draw(st.integers(min_value=1, max_value=n))
    return n, c, k


def _enumerate(n: int, c: int, k: int) -> tuple[Fraction, Fraction]:
    """Fractions of k-subsets of c passes + (n-c) fails that all pass / have a pass."""
    trials = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(trials, k))
    all_pass = sum(all(s) for s in subsets)
    any_pass = sum(any(s) for s in subsets)
    return Fraction(all_pass, len(subsets)), Fraction(any_pass, len(subsets))


@settings(deadline=None, derandomize=True, database=None, max_examples=200)
@given(n_c_k())
def test_closed_forms_match_enumeration(args: tuple[int, int, int]) -> None:
    """Both estimators equal the share of k-subsets that all pass / contain a pass."""
    n, c, k = args
    hat, at = _enumerate(n, c, k)
    assert pass_hat_k(n, c, k) == pytest.approx(float(hat), abs=1e-12)
    assert pass_at_k(n, c, k) == pytest.approx(float(at), abs=1e-12)


@settings(deadline=None, derandomize=True, database=None, max_examples=200)
@given(
    st.integers(min_value=1, max_value=10_000).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.integers(min_value=0, max_value=n),
            st.integers(min_value=1, max_value=n),
        )
    )
)
def test_closed_forms_match_binomials_at_scale(args: tuple[int, int, int]) -> None:
    """Up to n = 10,000 the products agree with exact binomial ratios and stay in [0, 1]."""
    n, c, k = args
    exact_hat = Fraction(math.comb(c, k), math.comb(n, k))
    exact_at = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_hat_k(n, c, k) == pytest.approx(float(exact_hat), rel=1e-9, abs=1e-300)
    assert pass_at_k(n, c, k) == pytest.approx(float(exact_at), rel=1e-9, abs=1e-12)
    assert 0.0 <= pass_hat_k(n, c, k) <= pass_at_k(n, c, k) + 1e-12
    assert pass_at_k(n, c, k) <= 1.0


def test_known_values() -> None:
    """A few values worked by hand: pass^3 and pass@3 of 6 of 8."""
    assert pass_hat_k(8, 6, 3) == pytest.approx(20 / 56)
    assert pass_at_k(8, 6, 3) == pytest.approx(1.0)
    assert pass_at_k(8, 4, 3) == pytest.approx(1 - 4 / 56)
    assert pass_hat_k(10_000, 10_000, 10_000) == 1.0
    assert pass_at_k(10_000, 0, 10_000) == 0.0


@pytest.mark.parametrize(
    ("n", "c", "k", "message"),
    [
        (8, 4, 0, "k=0 must be at least 1"),
        (8, 4, 9, "k=9 is larger than the 8 graded trials"),
        (0, 0, 1, "k=1 is larger than the 0 graded trials"),
        (8, 9, 3, "passed=9"),
        (8, -1, 3, "passed=-1"),
    ],
)
def test_bad_arguments_raise(n: int, c: int, k: int, message: str) -> None:
    """k < 1, k > n and c outside [0, n] are a ValueError that says which."""
    for estimator in (pass_hat_k, pass_at_k):
        with pytest.raises(ValueError, match=message):
            estimator(n, c, k)
