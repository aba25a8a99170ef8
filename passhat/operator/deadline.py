"""`spec.activeDeadlineSeconds`: an eval may be active that long, as a Job may.

A Job past its deadline is ended by the Job controller: its running pods are deleted, no
more are made, and it gets `Failed=True` with reason `DeadlineExceeded` ("Job was active
longer than specified deadline"); the pods that finished stay counted. An eval ends the
same way, and keeps what was scored: the ledger, the summary and the report stay as they
were when the deadline passed. The time counts from `status.startTime` (the operator's
first pass over the eval) or, before the first pass wrote one (an eval waiting for its
tasks' ConfigMap), from the eval's creation. Pure functions: the loop asks
`deadline_message` each pass and, when it answers, stops the eval with
`deadline_exceeded_status`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from passhat.api import conditions as cond
from passhat.api.status import PHASE_FAILED
from passhat.trials.classify_pod import parse_timestamp

__all__ = ["deadline_exceeded_status", "deadline_message", "ended_status", "seconds_left"]


def seconds_left(body: Mapping[str, Any], now: float) -> float | None:
    """Seconds until the eval's deadline (negative once past); None without one."""
    spec = body.get("spec") or {}
    deadline = spec.get("activeDeadlineSeconds") if isinstance(spec, Mapping) else None
    if not isinstance(deadline, int) or isinstance(deadline, bool):
        return None
    status = body.get("status") or {}
    meta = body.get("metadata") or {}
    started = parse_timestamp(status.get("startTime")) if isinstance(status, Mapping) else None
    if started is None:
        started = parse_timestamp(meta.get("creationTimestamp"))
    if started is None:
        return None
    return started + deadline - now


def deadline_message(body: Mapping[str, Any], now: float) -> str | None:
    """Why the eval must end now, when it has been active past its deadline; else None."""
    left = seconds_left(body, now)
    if left is None or left > 0:
        return None
    deadline = (body.get("spec") or {})["activeDeadlineSeconds"]
    return (
        f"ConsistencyEval was active longer than specified deadline "
        f"(spec.activeDeadlineSeconds: {deadline})"
    )


def deadline_exceeded_status(
    status: Mapping[str, Any], *, message: str, generation: int, now: float
) -> dict[str, Any]:
    """`status` (as a pass would write it) of an eval stopped by its deadline: phase
    Failed, `Failed=True` and `Complete=False` with reason DeadlineExceeded, nothing
    running; the ledger, summary, gate-less numbers and other conditions are kept."""
    return ended_status(
        status,
        condition=cond.FAILED,
        reason=cond.REASON_DEADLINE_EXCEEDED,
        message=message,
        generation=generation,
        now=now,
    )


def ended_status(
    status: Mapping[str, Any],
    *,
    condition: str,
    reason: str,
    message: str,
    generation: int,
    now: float,
) -> dict[str, Any]:
    """`status` of an eval ended before every slot was final: phase Failed, `condition`
    True and `Complete=False` with `reason`, nothing running, the rest kept (a deadline:
    Failed/DeadlineExceeded; a drain: Stopped/OperatorDrained)."""
    out = dict(status)
    progress = status.get("progress")
    if isinstance(progress, Mapping):
        final = int(progress.get("done") or 0)
        running = int(progress.get("running") or 0) + int(progress.get("waiting") or 0)
        pending = int(progress.get("pending") or 0)
        out["progress"] = {**progress, "running": 0, "pending": pending + running}
        if "waiting" in progress:
            out["progress"]["waiting"] = 0
        done = f"{final}/{final + running + pending} trial slots final"
    else:
        done = "no trial slot final"
    out["phase"] = PHASE_FAILED
    out["message"] = message
    conditions = cond.set_condition(
        status.get("conditions") or [],
        cond.COMPLETE,
        "False",
        reason,
        f"{done}; the rest never will: {message}",
        generation=generation,
        now=now,
    )
    out["conditions"] = cond.set_condition(
        conditions,
        condition,
        "True",
        reason,
        message,
        generation=generation,
        now=now,
    )
    out.pop("completionTime", None)
    return out
