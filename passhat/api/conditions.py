"""Condition types and reasons of a ConsistencyEval, in the Kubernetes condition shape.

`kubectl wait --for=condition=Complete` and dashboards key on these strings, so they are
part of the API: named once here, each with what it means, and set through one helper
that keeps `lastTransitionTime` when a condition's status does not change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "ARCHIVE_PENDING",
    "BUDGET_EXHAUSTED",
    "COMPLETE",
    "CONDITION_TYPES",
    "CONFIG_ERROR",
    "CREATE_REFUSED",
    "FAILED",
    "GATE_PASSED",
    "GRADER_STABLE",
    "INFRA_ERRORS_HIGH",
    "REASON_ABOVE_THRESHOLD",
    "REASON_ALL_FINAL",
    "REASON_ARCHIVED",
    "REASON_BELOW_THRESHOLD",
    "REASON_CHECKING_GRADER",
    "REASON_CREATED",
    "REASON_DEADLINE_EXCEEDED",
    "REASON_DRAINED",
    "REASON_FIRST_ATTEMPTS_FAILED",
    "REASON_FORBIDDEN",
    "REASON_GATE_MET",
    "REASON_GATE_MISSED",
    "REASON_GRADER_UNSTABLE",
    "REASON_INVALID_SPEC",
    "REASON_MAX_ATTEMPTS",
    "REASON_MAX_COST",
    "REASON_NOISE_ABOVE",
    "REASON_NOISE_WITHIN",
    "REASON_NO_VERDICTS",
    "REASON_QUOTA_EXCEEDED",
    "REASON_REGRADING",
    "REASON_RESOLVED",
    "REASON_RUNNING",
    "REASON_STORE_FAILING",
    "REASON_TASKS_CHANGED",
    "REASON_TASKS_UNAVAILABLE",
    "REASON_THROTTLED",
    "REASON_UNSAFE_TEMPLATE",
    "STOPPED",
    "find_condition",
    "set_condition",
    "timestamp",
]

# -- condition types --------------------------------------------------------------------
# True when every trial slot is final (graded, or out of infra-error retries).
COMPLETE = "Complete"
# True when the spec's gate passed on the final numbers; False when it failed.
GATE_PASSED = "GatePassed"
# True when the eval cannot run as written (bad spec, unsafe template, missing tasks,
# every first attempt an image/config error); the message names the field.
CONFIG_ERROR = "ConfigError"
# True when the infra-error rate is above the operator's threshold.
INFRA_ERRORS_HIGH = "InfraErrorsHigh"
# True when the eval ended before every slot was final (as a Job's Failed condition):
# today only when it ran past spec.activeDeadlineSeconds. What was scored stays.
FAILED = "Failed"

# True while recorded attempts cannot be archived (the record store is down or refuses):
# their pods stay held, no more than that many fewer pods run, and the eval does not
# complete until every record is in the store. False once the store works again.
ARCHIVE_PENDING = "ArchivePending"

# True while the API server refuses the eval's trial pods for now (a full ResourceQuota,
# other admission, throttling): creates back off, the message says why and until when.
# False once they are created again; absent while never refused (passhat.operator.pacing).
CREATE_REFUSED = "CreateRefused"

# True when the operator was drained (`passhat operator drain`, helm uninstall's hook)
# while the eval ran: its running trials were stopped, what was scored stays, and no
# operator drives it again (phase Failed, like a deadline). Create a new eval to resume.
STOPPED = "Stopped"
# True when the eval stopped at spec.budget (docs/spec.md#budget): no attempt started past
# it, what was scored stays, phase Failed (ended early, like a deadline) and GatePassed=False
# when there is a gate (an incomplete regression run does not ship).
BUDGET_EXHAUSTED = "BudgetExhausted"

# With spec.grading.stabilityCheck: Unknown while the grader pods regrade the sampled
# transcripts, then True when the grader's noise rate is at most maxNoiseRate, False when
# it is above (or no transcript got two verdicts). The gate fails while it is not True.
GRADER_STABLE = "GraderStable"

CONDITION_TYPES = (
    COMPLETE,
    GATE_PASSED,
    CONFIG_ERROR,
    INFRA_ERRORS_HIGH,
    ARCHIVE_PENDING,
    FAILED,
    CREATE_REFUSED,
    STOPPED,
    GRADER_STABLE,
    BUDGET_EXHAUSTED,
)

# -- reasons ----------------------------------------------------------------------------
# Complete=True: every trial slot is final.
REASON_ALL_FINAL = "AllTrialsFinal"
# Complete=False: trials are still pending or running.
REASON_RUNNING = "TrialsRunning"
# GatePassed=True: the gated metric reached its minimum.
REASON_GATE_MET = "GateMet"
# GatePassed=False: the gated metric stayed below its minimum.
REASON_GATE_MISSED = "GateMissed"
# ConfigError=True: the spec is invalid (or changed incompatibly after the start).
REASON_INVALID_SPEC = "InvalidSpec"
# ConfigError=True: the pod template asks for privileges refused on this cluster.
REASON_UNSAFE_TEMPLATE = "UnsafeTemplate"
# ConfigError=True: the tasks' ConfigMap or key is missing or unreadable.
REASON_TASKS_UNAVAILABLE = "TasksUnavailable"
# ConfigError=True: a tasksFrom ConfigMap changed (or was deleted, or replaced) after
# the eval started; its pinned digest no longer matches (status.taskSources).
REASON_TASKS_CHANGED = "TasksChanged"
# ConfigError=True: every first attempt hit an image or container-config error.
REASON_FIRST_ATTEMPTS_FAILED = "FirstAttemptsFailed"
# ConfigError=False: a problem reported earlier is gone.
REASON_RESOLVED = "Resolved"
# InfraErrorsHigh=True: the infra-error rate is above the threshold.
REASON_ABOVE_THRESHOLD = "AboveThreshold"
# InfraErrorsHigh=False: the infra-error rate is at or below the threshold.
REASON_BELOW_THRESHOLD = "BelowThreshold"
# Failed=True (and Complete=False): the eval was active longer than
# spec.activeDeadlineSeconds; its running trials were stopped (the Job controller's reason).
REASON_DEADLINE_EXCEEDED = "DeadlineExceeded"
# BudgetExhausted=True (Complete=False, GatePassed=False): the trials' reported cost reached
# spec.budget.maxCostUSD; running trials were stopped, queued ones deleted, none recorded.
REASON_MAX_COST = "MaxCostReached"
# BudgetExhausted=True: spec.budget.maxAttempts attempts ended with slots not final.
REASON_MAX_ATTEMPTS = "MaxAttemptsReached"
# Stopped=True (and Complete=False): the operator was drained while the eval ran.
REASON_DRAINED = "OperatorDrained"
# ArchivePending=True: the record store failed; the message has its error.
REASON_STORE_FAILING = "StoreFailing"
# ArchivePending=False: every recorded attempt is in the record store again.
REASON_ARCHIVED = "Archived"
# CreateRefused=True: a ResourceQuota of the namespace is full (403 "exceeded quota").
REASON_QUOTA_EXCEEDED = "QuotaExceeded"
# CreateRefused=True: the API server throttles the operator (429).
REASON_THROTTLED = "Throttled"
# CreateRefused=True: other admission refused the pod for now (403: a LimitRange, a
# service account not yet created, a webhook).
REASON_FORBIDDEN = "Forbidden"
# CreateRefused=False: trial pods are created again.
REASON_CREATED = "Created"

# Complete=False: every trial slot is final; the grader stability check runs.
REASON_CHECKING_GRADER = "CheckingGrader"
# GraderStable=Unknown: the grader pods are regrading the sample.
REASON_REGRADING = "Regrading"
# GraderStable=True: the noise rate is at most maxNoiseRate.
REASON_NOISE_WITHIN = "NoiseWithinLimit"
# GraderStable=False: the noise rate is above maxNoiseRate.
REASON_NOISE_ABOVE = "NoiseAboveLimit"
# GraderStable=False: no sampled transcript got two verdicts (the grader kept breaking,
# or no graded attempt had a transcript to regrade).
REASON_NO_VERDICTS = "NoVerdicts"
# GatePassed=False: the metric reached its minimum but the grader is not stable.
REASON_GRADER_UNSTABLE = "GraderUnstable"

_STATUSES = frozenset({"True", "False", "Unknown"})


def timestamp(when: str | float | datetime) -> str:
    """An RFC 3339 timestamp as the API server writes it (`2026-01-02T03:04:05Z`)."""
    if isinstance(when, str):
        return when
    moment = when if isinstance(when, datetime) else datetime.fromtimestamp(when, UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def find_condition(conditions: Iterable[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    """The condition of type `kind`, or None."""
    return next((c for c in conditions if c.get("type") == kind), None)


def set_condition(
    conditions: Iterable[Mapping[str, Any]],
    kind: str,
    status: str,
    reason: str,
    message: str,
    *,
    generation: int | None,
    now: str | float | datetime,
) -> list[dict[str, Any]]:
    """A new condition list with condition `kind` set (the input is not changed).

    `lastTransitionTime` moves to `now` only when the status changes (or the condition is
    new); reason, message and observedGeneration always take the new values. Other
    conditions keep their order; a new one goes last.
    """
    if status not in _STATUSES:
        raise ValueError(f"condition status must be True, False or Unknown, not {status!r}")
    updated: list[dict[str, Any]] = []
    found = False
    for condition in conditions:
        entry = dict(condition)
        if entry.get("type") == kind:
            found = True
            if entry.get("status") != status or not entry.get("lastTransitionTime"):
                entry["lastTransitionTime"] = timestamp(now)
            entry.update(status=status, reason=reason, message=message)
            if generation is not None:
                entry["observedGeneration"] = generation
        updated.append(entry)
    if not found:
        entry = {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": timestamp(now),
        }
        if generation is not None:
            entry["observedGeneration"] = generation
        updated.append(entry)
    return updated
