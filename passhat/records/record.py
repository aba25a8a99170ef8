"""The record of one finished attempt: a line of `trials.jsonl`, locally and on a cluster.

The first fields are the local journal's (`passhat.local.journal`) and every reader of
trial files knows them; a cluster attempt adds where and when it ran and what the
classifier saw. `passhat score`, `compare` and `regrade` read either kind alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from passhat.trials.outcomes import infra_reasons

__all__ = ["CLUSTER_FIELDS", "JOURNAL_FIELDS", "AttemptRecord", "infra_errors_by_reason"]

JOURNAL_FIELDS = (
    "task_id",
    "trial",
    "attempt",
    "outcome",
    "reason",
    "exit_code",
    "duration_s",
    "final",
)
# What a cluster attempt adds (each may be null where Kubernetes did not say).
CLUSTER_FIELDS = (
    "message",  # the classifier's message (the kubelet's reason, the OOM kill, ...)
    "pod",
    "node",
    "started_at",  # RFC 3339, from the main container's terminated state (else the pod's)
    "finished_at",
    "log_bytes",  # bytes of transcript archived (after the cap)
    "log_truncated",  # true when a container's log was cut at the per-attempt cap
    "result",  # the result JSON the trial wrote (its termination message), or null
)


class AttemptRecord(TypedDict, total=False):
    """One finished attempt; JOURNAL_FIELDS are always present, CLUSTER_FIELDS on a cluster."""

    task_id: str
    trial: int
    attempt: int
    outcome: str
    reason: str
    exit_code: int | None
    duration_s: float | None
    final: bool
    message: str
    pod: str | None
    node: str | None
    started_at: str | None
    finished_at: str | None
    log_bytes: int
    log_truncated: bool
    result: dict[str, Any] | None
    # What the attempt reported it spent and used (passhat.trials.usage), when it did;
    # on a cluster these are read from `result`.
    usage: dict[str, int]
    cost_usd: float
    metrics: dict[str, float]
    spend_error: str
    resources: dict[str, Any]
    result_error: str  # passhat run: why $PASSHAT_RESULT was ignored (not a result JSON)


def infra_errors_by_reason(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Infra-error attempts per reason (oom_killed, evicted, timeout, ...), most first."""
    return infra_reasons(
        (str(record.get("outcome")), str(record.get("reason") or "") or None) for record in records
    )
