"""What an eval's attempts spent (`status.usage`) and its budget (`spec.budget`), per pass.

The sums are kept in status the way `summary.infraErrorsByReason` is: the previous
status's sums plus this pass's recorded attempts, in the same status write as the ledger
that records them (a 409 drops both), so an attempt is summed exactly once, across
operator restarts and failovers. What an attempt spent is read from its result JSON (the
termination message: `passhat.trials.usage`), once, when it is recorded.

The budget (`passhat.trials.budget`) is asked each pass: how many attempts may still be
created, and whether the eval must stop. A stopped eval ends as a deadline ends it
(`deadline.ended_status`: phase Failed, Complete=False, nothing running; running and
queued pods are deleted and not recorded, so what they spent is unknown and what queued
pods never spent is not counted), with BudgetExhausted=True and, when it has a gate,
GatePassed=False: an incomplete regression run does not ship.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from passhat.api import conditions as cond
from passhat.operator.deadline import ended_status
from passhat.trials.usage import MAX_USAGE_TASKS, Resources, Spend, UsageSummary

__all__ = ["SpentAttempt", "budget_exhausted_status", "usage_after"]


class SpentAttempt(Protocol):
    """One attempt recorded by this pass (`loop.Recorded`), as far as its spend goes."""

    @property
    def task_id(self) -> str: ...
    @property
    def spend(self) -> Spend | None: ...
    @property
    def resources(self) -> Resources | None: ...
    @property
    def spend_problem(self) -> str | None: ...


def usage_after(
    previous: Mapping[str, Any], recorded: Sequence[SpentAttempt], *, n_tasks: int
) -> UsageSummary:
    """The eval's spend after this pass: the previous status's plus `recorded`'s."""
    usage = UsageSummary.from_status(previous.get("usage"))
    for item in recorded:
        usage.add(item.task_id, item.spend, item.resources, invalid=item.spend_problem is not None)
    if n_tasks > MAX_USAGE_TASKS:
        usage.by_task = None
    return usage


def budget_exhausted_status(
    status: Mapping[str, Any],
    *,
    message: str,
    reason: str,
    has_gate: bool,
    generation: int,
    now: float,
) -> dict[str, Any]:
    """`status` of an eval stopped by its budget: ended early (phase Failed, Complete=False,
    nothing running), BudgetExhausted=True and, with a gate, GatePassed=False."""
    out = ended_status(
        status,
        condition=cond.BUDGET_EXHAUSTED,
        reason=reason,
        message=message,
        generation=generation,
        now=now,
    )
    if has_gate:
        out["conditions"] = cond.set_condition(
            out["conditions"],
            cond.GATE_PASSED,
            "False",
            reason,
            f"the eval stopped at its budget before every trial slot was final: {message}",
            generation=generation,
            now=now,
        )
        gate = out.get("gate")
        if isinstance(gate, Mapping):
            out["gate"] = {**gate, "passed": False}
        display = out.get("display")
        if isinstance(display, Mapping):
            out["display"] = {**display, "gate": "Missed"}
    return out
