"""Status models accept what the operator writes and render the summary."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from passhat.api.status import EvalStatus, build_summary
from passhat.stats import TaskTally, summarize_many


def test_build_summary_orders_ks_and_sets_the_headline() -> None:
    """byK is ascending; k/passHatK echo the headline k."""
    tallies = [TaskTally("a", 3, 1, 0), TaskTally("b", 4, 0, 1)]
    summary = build_summary(summarize_many(tallies, [4, 1]), headline_k=4, infra_error_rate=0.1)
    assert [entry["k"] for entry in summary["byK"]] == [1, 4]
    assert summary["k"] == 4
    assert summary["passHatK"] == summary["byK"][1]["passHatK"]
    assert set(summary["byK"][0]) == {"k", "tasksScored", "meanPassRate", "passAtK", "passHatK"}
    assert summary["infraErrorRate"] == 0.1


def test_headline_falls_back_to_the_largest_k() -> None:
    """A headline k that is not among the summaries (gate.k outside ks) gives the largest k."""
    tallies = [TaskTally("a", 1, 1, 0)]
    summary = build_summary(summarize_many(tallies, [1, 2]), headline_k=3, infra_error_rate=0.0)
    assert summary["k"] == 2
    empty = build_summary([], headline_k=1, infra_error_rate=0.0)
    assert "k" not in empty and "passHatK" not in empty


def test_round_trip_and_unknown_fields() -> None:
    """A status dict round-trips by alias; an unknown field is refused (it would be pruned)."""
    body = {
        "phase": "Running",
        "progress": {"done": 1, "running": 2, "waiting": 0, "pending": 3, "retries": 0},
    }
    status = EvalStatus.model_validate(body)
    dumped = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped["progress"] == body["progress"] and dumped["phase"] == "Running"
    with pytest.raises(ValidationError):
        EvalStatus.model_validate({"phaze": "Running"})
