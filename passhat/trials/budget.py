"""`spec.budget`: how many more attempts an eval may start, and when it must stop.

One rule for both executors (the operator each pass, `passhat run` after each attempt),
pure so it is tested once:

- `maxAttempts` caps the attempts ever started, retries included: no attempt is started
  past it, so the attempts already running are within the budget and finish. Once none
  runs and slots are still not final, the eval stops.
- `maxCostUSD` caps the dollars the trials report (`cost_usd`, infra-error attempts
  included: that money was spent). Reaching it stops the eval at once, as a Job past its
  backoffLimit: running attempts are stopped and not recorded (their spend is unknown),
  attempts waiting for a queue's admission are deleted (they never ran, spent nothing,
  and are not counted).

An eval whose every slot is final is complete even if that took its whole budget: the
budget stops only an eval with work left.
"""

from __future__ import annotations

from dataclasses import dataclass

from passhat.api import conditions as cond
from passhat.api.spec import Budget

__all__ = ["BudgetCheck", "check_budget"]


@dataclass(frozen=True)
class BudgetCheck:
    """What the budget allows now."""

    # Attempts that may still start (None: no limit on attempts).
    may_start: int | None
    # Why the eval must stop now (None: it may go on), and the condition's reason.
    exhausted: str | None
    reason: str = ""


def check_budget(
    budget: Budget | None,
    *,
    attempts: int,
    live: int,
    cost_usd: float,
    pending: int,
) -> BudgetCheck:
    """The budget's verdict for an eval that recorded `attempts` attempts (ended), has
    `live` attempts started and not ended (running or waiting for admission), reported
    `cost_usd` so far and has `pending` trial slots not final."""
    if budget is None:
        return BudgetCheck(None, None)
    if pending <= 0:
        return BudgetCheck(0 if budget.max_attempts is not None else None, None)
    if budget.max_cost_usd is not None and cost_usd >= budget.max_cost_usd:
        return BudgetCheck(
            0,
            f"the trials reported ${cost_usd:.4f}, reaching spec.budget.maxCostUSD "
            f"${budget.max_cost_usd:g}; {pending} trial slots not final",
            cond.REASON_MAX_COST,
        )
    if budget.max_attempts is None:
        return BudgetCheck(None, None)
    may_start = max(0, budget.max_attempts - attempts - live)
    if may_start == 0 and live == 0:
        return BudgetCheck(
            0,
            f"{attempts} trial attempts ended, spec.budget.maxAttempts is "
            f"{budget.max_attempts}; {pending} trial slots not final",
            cond.REASON_MAX_ATTEMPTS,
        )
    return BudgetCheck(may_start, None)
