"""The Wilson score interval of passhat.stats.wilson."""

from __future__ import annotations

import pytest

from passhat.stats import wilson


def test_known_values() -> None:
    """5 of 20 and 0 of 20 at 95 %: the textbook values (Newcombe 1998, method 3)."""
    five = wilson(5, 20)
    assert five.low == pytest.approx(0.1119, abs=5e-5)
    assert five.high == pytest.approx(0.4687, abs=5e-5)
    none = wilson(0, 20)
    assert none.low == 0.0
    assert none.high == pytest.approx(0.1611, abs=5e-5)


def test_bounds_at_the_ends_and_empty() -> None:
    """All successes reaches 1 exactly, none 0 exactly; no trials says nothing: [0, 1]."""
    assert wilson(20, 20).high == 1.0 and wilson(0, 20).low == 0.0
    assert wilson(0, 0).as_json() == [0.0, 1.0]


def test_out_of_range_is_refused() -> None:
    """More successes than trials, or a level outside (0, 1), is a ValueError."""
    with pytest.raises(ValueError, match="successes"):
        wilson(3, 2)
    with pytest.raises(ValueError, match="level"):
        wilson(1, 2, level=1.0)
