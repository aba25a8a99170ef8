"""set_condition keeps the Kubernetes condition semantics."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from passhat.api import conditions as cond


def test_new_condition_is_appended() -> None:
    """A condition not present yet is added last with the transition time `now`."""
    out = cond.set_condition(
        [], cond.COMPLETE, "False", cond.REASON_RUNNING, "0/4", generation=1, now=0.0
    )
    assert out == [
        {
            "type": "Complete",
            "status": "False",
            "reason": "TrialsRunning",
            "message": "0/4",
            "lastTransitionTime": "1970-01-01T00:00:00Z",
            "observedGeneration": 1,
        }
    ]


def test_transition_time_moves_only_on_status_change() -> None:
    """Same status keeps lastTransitionTime (message/reason update); a change moves it."""
    first = cond.set_condition(
        [], cond.COMPLETE, "False", cond.REASON_RUNNING, "1/4", generation=1, now=10.0
    )
    same = cond.set_condition(
        first, cond.COMPLETE, "False", cond.REASON_RUNNING, "2/4", generation=2, now=20.0
    )
    assert same[0]["lastTransitionTime"] == first[0]["lastTransitionTime"]
    assert same[0]["message"] == "2/4" and same[0]["observedGeneration"] == 2
    done = cond.set_condition(
        same, cond.COMPLETE, "True", cond.REASON_ALL_FINAL, "4/4", generation=2, now=30.0
    )
    assert done[0]["lastTransitionTime"] == "1970-01-01T00:00:30Z"
    assert first[0]["message"] == "1/4", "the input list is not changed"


def test_other_conditions_keep_their_place() -> None:
    """Setting one condition leaves the others as they were, in order."""
    conditions = cond.set_condition(
        [], cond.CONFIG_ERROR, "True", cond.REASON_INVALID_SPEC, "x", generation=1, now="t0"
    )
    conditions = cond.set_condition(
        conditions, cond.COMPLETE, "False", cond.REASON_RUNNING, "", generation=1, now="t1"
    )
    conditions = cond.set_condition(
        conditions, cond.CONFIG_ERROR, "False", cond.REASON_RESOLVED, "", generation=2, now="t2"
    )
    assert [c["type"] for c in conditions] == ["ConfigError", "Complete"]
    assert conditions[0]["lastTransitionTime"] == "t2"
    assert cond.find_condition(conditions, cond.COMPLETE) == conditions[1]


def test_timestamps_and_bad_status() -> None:
    """Times render as RFC 3339 UTC; a status other than True/False/Unknown is refused."""
    assert cond.timestamp(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05Z"
    with pytest.raises(ValueError, match="True, False or Unknown"):
        cond.set_condition([], cond.COMPLETE, "yes", "R", "", generation=None, now=0)


def test_constants_are_camel_case_and_distinct() -> None:
    """Types and reasons are CamelCase strings, no two the same."""
    reasons = [getattr(cond, name) for name in cond.__all__ if name.startswith("REASON_")]
    for value in [*cond.CONDITION_TYPES, *reasons]:
        assert value[0].isupper() and value.isalnum()
    assert len(set(reasons)) == len(reasons)
