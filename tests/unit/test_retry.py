"""RetryPlan: how many infra-error retries a slot gets and how long to wait."""

from __future__ import annotations

from passhat.api.spec import RetryPolicy
from passhat.trials import Outcome, RetryPlan, Verdict


def test_retries_up_to_the_limit() -> None:
    """infraErrors=3 allows attempts 0..3: attempts 0-2 may retry, attempt 3 may not."""
    plan = RetryPlan(infra_errors=3)
    assert [plan.may_retry(a) for a in range(5)] == [True, True, True, False, False]
    assert plan.max_attempts == 4


def test_no_retries() -> None:
    """infraErrors=0: the first infra error settles the slot."""
    assert not RetryPlan(infra_errors=0).may_retry(0)


def test_exponential_backoff_capped() -> None:
    """Delays double from backoffSeconds and stop at maxBackoffSeconds."""
    plan = RetryPlan(infra_errors=10, backoff_seconds=10, max_backoff_seconds=60)
    assert [plan.delay(a) for a in range(5)] == [10, 20, 40, 60, 60]
    assert plan.delay(10_000) == 60
    assert RetryPlan(backoff_seconds=0).delay(3) == 0


def test_from_policy_and_is_final() -> None:
    """The plan follows the spec's retry section; pass/fail always settle a slot."""
    plan = RetryPlan.from_policy(RetryPolicy(infra_errors=1, backoff_seconds=2))
    infra = Verdict(Outcome.INFRA_ERROR, "oom_killed")
    assert (plan.infra_errors, plan.backoff_seconds, plan.max_backoff_seconds) == (1, 2, 300)
    assert not plan.is_final(infra, 0)
    assert plan.is_final(infra, 1)
    assert plan.is_final(Verdict(Outcome.FAIL, "exit_code"), 0)
