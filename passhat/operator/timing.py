"""The loop's timing state in status, so a restart or a new leader does not forget it.

Retry backoff (`spec.retry.backoffSeconds`, per trial slot) and the create backoff while
the API server refuses pods (`pacing.CreatePacer`) used to live in memory only: after a
failover the new leader retried every waiting slot at once and tried creates again right
away. Neither changes a count (docs/operator.md), but both are load a backoff exists to
avoid. So the status each pass writes carries them (`status.timing`, in the same
conditional write as the ledger that caused them), bounded: the `MAX_RETRY_WAITS` longest
retry waits (a slot left out retries early; creates are still paced by slow start), and
one create backoff. A loop reads them back once, at its first pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from passhat.api.conditions import timestamp
from passhat.api.status import MAX_RETRY_WAITS
from passhat.operator.pacing import CreatePacer, Refusal
from passhat.trials.classify_pod import parse_timestamp

__all__ = ["restore", "timing_status"]

Slot = tuple[int, int]


def timing_status(
    not_before: Mapping[Slot, float], pacer: CreatePacer, *, now: float
) -> dict[str, Any] | None:
    """`status.timing` for the retry waits still ahead and the pacer's backoff (None when
    there is neither)."""
    waits = sorted(((when, slot) for slot, when in not_before.items() if when > now), reverse=True)[
        :MAX_RETRY_WAITS
    ]
    out: dict[str, Any] = {}
    if waits:
        out["retries"] = [
            {"task": task, "trial": trial, "notBefore": _rfc3339(when)}
            for when, (task, trial) in sorted(waits, key=lambda item: item[1])
        ]
    if pacer.refusal is not None and pacer.refusals:
        out["createBackoff"] = {
            "reason": pacer.refusal.reason,
            "message": pacer.refusal.message,
            "refusals": pacer.refusals,
            "notBefore": _rfc3339(pacer.not_before),
        }
    return out or None


def restore(status: Mapping[str, Any], pacer: CreatePacer, *, now: float) -> dict[Slot, float]:
    """The retry waits in `status.timing` still ahead of `now`; the pacer gets the create
    backoff back when it has not expired."""
    timing = status.get("timing")
    if not isinstance(timing, Mapping):
        return {}
    waits: dict[Slot, float] = {}
    for item in timing.get("retries") or []:
        if not isinstance(item, Mapping):
            continue
        when = parse_timestamp(item.get("notBefore"))
        task, trial = item.get("task"), item.get("trial")
        if when is not None and when > now and isinstance(task, int) and isinstance(trial, int):
            waits[(task, trial)] = when
    backoff = timing.get("createBackoff")
    if isinstance(backoff, Mapping):
        when = parse_timestamp(backoff.get("notBefore"))
        refusals = backoff.get("refusals")
        if when is not None and when > now and isinstance(refusals, int) and refusals > 0:
            pacer.refusal = Refusal(str(backoff.get("reason")), str(backoff.get("message")))
            pacer.refusals, pacer.not_before, pacer.ever_refused = refusals, when, True
    return waits


def _rfc3339(when: float) -> str:
    # NB: whole seconds, rounded up: a wait never ends earlier than it would have
    return timestamp(float(int(when) + (0 if when == int(when) else 1)))
