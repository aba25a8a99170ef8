"""spec.budget's rule, shared by the operator and `passhat run`: attempts never start past
maxAttempts (running ones finish), a reached maxCostUSD stops at once, and a complete eval
is never stopped by its budget."""

from __future__ import annotations

import pytest

from passhat.api import conditions as cond
from passhat.api.errors import SpecError
from passhat.api.load import parse_spec
from passhat.api.spec import Budget
from passhat.trials.budget import check_budget


def budget(**fields: float) -> Budget:
    return Budget.model_validate(fields)


def test_no_budget_allows_everything() -> None:
    check = check_budget(None, attempts=10**6, live=5, cost_usd=1e9, pending=3)
    assert check.may_start is None and check.exhausted is None


def test_attempts_never_start_past_the_budget_and_running_ones_finish() -> None:
    """5 attempts allowed: 3 ended and 1 running leave 1; with 2 running none, but the eval
    goes on until they end; then it stops (slots left)."""
    limit = budget(maxAttempts=5)
    assert check_budget(limit, attempts=3, live=1, cost_usd=0, pending=4).may_start == 1
    running = check_budget(limit, attempts=3, live=2, cost_usd=0, pending=4)
    assert running.may_start == 0 and running.exhausted is None
    ended = check_budget(limit, attempts=5, live=0, cost_usd=0, pending=2)
    assert ended.exhausted is not None and "maxAttempts is 5" in ended.exhausted
    assert ended.reason == cond.REASON_MAX_ATTEMPTS


def test_reaching_the_cost_stops_at_once() -> None:
    """Cost at the limit stops with running attempts; below it nothing stops."""
    limit = budget(maxCostUSD=2.0)
    assert check_budget(limit, attempts=3, live=2, cost_usd=1.99, pending=4).exhausted is None
    stop = check_budget(limit, attempts=3, live=2, cost_usd=2.0, pending=4)
    assert stop.exhausted is not None and stop.may_start == 0
    assert stop.reason == cond.REASON_MAX_COST and "$2.0000" in stop.exhausted


def test_a_complete_eval_is_not_stopped_by_its_budget() -> None:
    """Every slot final: the budget says nothing, even when spent twice over."""
    limit = budget(maxCostUSD=1.0, maxAttempts=1)
    assert check_budget(limit, attempts=9, live=0, cost_usd=5.0, pending=0).exhausted is None


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({}, "spec.budget"),
        ({"maxAttempts": 0}, "spec.budget.maxAttempts"),
        ({"maxCostUSD": -1}, "spec.budget.maxCostUSD"),
        ({"maxCostUSD": "5"}, "spec.budget.maxCostUSD"),
    ],
)
def test_a_bad_budget_names_its_field(fields: dict[str, object], field: str) -> None:
    body = {
        "tasks": [{"id": "a"}],
        "trials": 1,
        "trial": {"template": {"spec": {"containers": [{"name": "agent", "image": "x"}]}}},
        "budget": fields,
    }
    with pytest.raises(SpecError) as raised:
        parse_spec(body)
    assert field in str(raised.value)
