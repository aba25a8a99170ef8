"""compare(): paired per-task differences, sign-flip p-values, verdicts, unpaired tasks."""

from __future__ import annotations

import numpy as np
import pytest

from passhat.stats import BETTER, WITHIN_NOISE, WORSE, TaskTally, compare


def _suite(passed: list[int], *, trials: int = 2, prefix: str = "t") -> list[TaskTally]:
    return [TaskTally(f"{prefix}{i}", c, trials - c, 0) for i, c in enumerate(passed)]


def test_exact_sign_flip_p_value_and_verdicts() -> None:
    """Five tasks all better give p = 2/32 (noise); six give p = 2/64 (better / worse)."""
    (five,) = compare(_suite([0] * 5), _suite([2] * 5), [1])
    assert five.mean_pass_rate.p_value == pytest.approx(2 / 32)
    assert five.mean_pass_rate.verdict == WITHIN_NOISE
    (six,) = compare(_suite([0] * 6), _suite([2] * 6), [2])
    for difference in (six.mean_pass_rate, six.pass_hat_k):
        assert difference.p_value == pytest.approx(2 / 64)
        assert (difference.a, difference.b, difference.diff) == (0.0, 1.0, 1.0)
        assert difference.verdict == BETTER
    (reverse,) = compare(_suite([2] * 6), _suite([0] * 6), [1])
    assert reverse.mean_pass_rate.verdict == WORSE
    assert reverse.mean_pass_rate.interval.as_json() == [-1.0, -1.0]


def test_identical_sets_are_within_noise() -> None:
    """No difference anywhere: diff 0, p 1, within noise."""
    suite = _suite([0, 1, 2, 1], trials=2)
    (result,) = compare(suite, suite, [2])
    assert result.tasks_paired == 4
    assert (result.pass_hat_k.diff, result.pass_hat_k.p_value) == (0.0, 1.0)
    assert result.pass_hat_k.verdict == WITHIN_NOISE


def test_unpaired_tasks_are_counted_and_listed() -> None:
    """Tasks in one set only, or short of k graded trials in one, are listed, not compared."""
    a = [TaskTally("both", 2, 0, 0), TaskTally("short", 1, 0, 1), TaskTally("a-only", 2, 0, 0)]
    b = [TaskTally("b-only", 0, 2, 0), TaskTally("short", 2, 0, 0), TaskTally("both", 1, 1, 0)]
    one, two = compare(a, b, [1, 2])
    assert (one.tasks_paired, two.tasks_paired) == (2, 1)
    assert two.only_in_a == ["a-only"]
    assert two.only_in_b == ["b-only"]
    assert two.need_more_trials == ["short"]
    assert two.mean_pass_rate.diff == pytest.approx(-0.5)
    assert list(two.as_json()) == [
        "k",
        "level",
        "tasks_paired",
        "only_in_a",
        "only_in_b",
        "need_more_trials",
        "mean_pass_rate",
        "pass_hat_k",
    ]


def test_nothing_paired_is_within_noise() -> None:
    """Disjoint sets: zero paired tasks, p = 1, within noise."""
    (result,) = compare(_suite([1], prefix="a"), _suite([1], prefix="b"), [1])
    assert result.tasks_paired == 0
    assert result.mean_pass_rate.verdict == WITHIN_NOISE
    assert result.mean_pass_rate.p_value == 1.0


def test_seeded_monte_carlo_is_reproducible() -> None:
    """Past the exact limit the p-value is Monte Carlo, and the same seed repeats it."""
    rng = np.random.default_rng(3)
    a = _suite([int(x) for x in rng.integers(0, 5, 40)], trials=4)
    b = _suite([int(x) for x in rng.integers(0, 5, 40)], trials=4)
    assert compare(a, b, [1, 3], seed=5) == compare(a, b, [1, 3], seed=5)


def test_false_positive_rate_by_simulation() -> None:
    """With no true difference, "better" or "worse" comes out in about 5% of runs."""
    rng = np.random.default_rng(11)
    runs, hits = 300, 0
    for run in range(runs):
        rates = rng.uniform(0.2, 0.9, size=30)
        a = _suite([int(c) for c in rng.binomial(4, rates)], trials=4)
        b = _suite([int(c) for c in rng.binomial(4, rates)], trials=4)
        (result,) = compare(a, b, [1], resamples=500, seed=run)
        hits += result.mean_pass_rate.verdict != WITHIN_NOISE
    assert hits / runs <= 0.09


def test_bad_arguments_raise() -> None:
    """k < 1, a level outside (0, 1) and zero resamples are ValueErrors."""
    suite = _suite([1])
    with pytest.raises(ValueError):
        compare(suite, suite, [0])
    with pytest.raises(ValueError):
        compare(suite, suite, [1], level=0.0)
    with pytest.raises(ValueError):
        compare(suite, suite, [1], resamples=0)
