"""Kubernetes Events on a ConsistencyEval: start, retries, config errors, gate, completion.

`kubectl describe consistencyeval NAME` is where a user looks first when an eval is slow
or stuck, so the operator tells the story there: that it started (how many slots), each
burst of retries with its counts (which reasons, which trials), which field is wrong,
when the eval finished and whether its gate passed. Messages are built by pure functions
(tested without a cluster) and posted through kopf's event poster, which batches them off
the reconcile path. A pass's retries are one event, not one per pod (a node loss retries
hundreds of trials at once, and Events are not a log), and retry events are rate-limited
per eval on top: the running total in each message keeps the count exact.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import kopf

__all__ = [
    "BUDGET_EXHAUSTED",
    "COMPLETED",
    "CONFIG_ERROR",
    "DEADLINE_EXCEEDED",
    "FAILED_CREATE",
    "FOREIGN_POD",
    "GATE_FAILED",
    "GATE_PASSED",
    "GRADER_CHECK_PRUNED",
    "NAMESPACE_CLAIMED",
    "QUOTA_EXCEEDED",
    "RETRIES_EXHAUSTED",
    "SPEND_INVALID",
    "STARTED",
    "STOPPED",
    "TRIAL_NAME_TAKEN",
    "TRIAL_RETRIED",
    "UNSCHEDULABLE",
    "Event",
    "RetryLimiter",
    "RetryNote",
    "budget_exhausted",
    "completed",
    "config_error",
    "create_refused",
    "deadline_exceeded",
    "foreign_pod",
    "gate_result",
    "grader_check_pruned",
    "namespace_claimed",
    "post",
    "retries_exhausted",
    "spend_invalid",
    "started",
    "stopped",
    "trial_name_taken",
    "trials_retried",
    "unschedulable",
]

logger = logging.getLogger(__name__)

# Normal: the operator's first status write for the eval: its slots, parallelism and gate
STARTED = "Started"
# Warning: trial attempts ended as infra errors and are retried (one event per burst:
# the attempts one pass recorded, with their reasons and the eval's running total)
TRIAL_RETRIED = "TrialRetried"
# Warning: trial slots used up their retries and stay infra_error (out of the score)
RETRIES_EXHAUSTED = "RetriesExhausted"
# Warning: the eval cannot run as written (field named in the message); no pods are made
CONFIG_ERROR = "ConfigError"
# Warning: the API server refused to create trial pods for now (a LimitRange, a missing
# service account, throttling, ...); the eval backs off and retries, like a Job's FailedCreate
FAILED_CREATE = "FailedCreate"
# Warning: a ResourceQuota of the namespace refused trial pods (403 "exceeded quota"); the
# eval's creates back off (passhat.operator.pacing) and are tried again, one pod first
QUOTA_EXCEEDED = "QuotaExceeded"
# Warning: a trial pod could not be scheduled for a while (no node fits its requests,
# selectors or tolerations); the eval waits, like a Job's pods
UNSCHEDULABLE = "TrialPodUnschedulable"
# Warning: the eval was active past spec.activeDeadlineSeconds; its running trials are
# stopped and it ends Failed with what was scored (a Job's DeadlineExceeded)
DEADLINE_EXCEEDED = "DeadlineExceeded"
# Warning: the operator was drained (uninstalled) while the eval ran; its running trials
# are stopped and it ends with what was scored
STOPPED = "OperatorDrained"
# The eval reached spec.budget (maxCostUSD or maxAttempts) with slots not final.
BUDGET_EXHAUSTED = "BudgetExhausted"
# Recorded attempts whose result JSON reported a spend passhat refused (a bad value).
SPEND_INVALID = "TrialSpendInvalid"
# Warning: a pod carries this eval's labels but the operator did not create it; it is
# neither counted nor touched (docs/security.md)
FOREIGN_POD = "ForeignTrialPod"
# Warning: a pod the operator did not create holds a trial attempt's name; that attempt
# is lost and the next one gets a new name; the pod is not touched
TRIAL_NAME_TAKEN = "TrialPodNameTaken"
# Warning: the CRD in place prunes status.graderCheck (it is older than the operator):
# the stability check cannot keep its ledger, so it makes no grader pod and waits
GRADER_CHECK_PRUNED = "GraderCheckPruned"
# Warning: the eval's namespace is claimed by another release (or a forged claim): the
# eval waits; the other namespaces are served (leader.py, docs/security.md)
NAMESPACE_CLAIMED = "NamespaceClaimed"
# Normal: every trial slot is final
COMPLETED = "Completed"
# Normal / Warning: the gate's metric met / missed its minimum
GATE_PASSED = "GatePassed"
GATE_FAILED = "GateFailed"

NORMAL = "Normal"
WARNING = "Warning"
# Kubernetes rejects longer Event messages; kopf truncates at the same length.
MAX_MESSAGE = 1024


@dataclass(frozen=True)
class Event:
    """One Kubernetes Event to post on an eval: type (Normal/Warning), reason, message."""

    type: str
    reason: str
    message: str


@dataclass(frozen=True)
class RetryNote:
    """One infra-error attempt a pass recorded: which trial, why, and (when retried) when
    its next attempt may start."""

    task_id: str
    trial: int
    attempt: int
    reason: str
    delay_s: float = 0.0
    message: str = ""


# A burst event names this many attempts; the rest are counted.
MAX_NAMED = 5


def started(
    *, tasks: int, trials: int, parallelism: int, gate: Mapping[str, Any] | None = None
) -> Event:
    """The eval's first status write: what it will run."""
    text = (
        f"started {tasks} tasks x {trials} trials = {tasks * trials} trial slots, "
        f"at most {parallelism} at a time"
    )
    if gate:
        text += f"; gate {gate.get('metric')} at k={gate.get('k')} >= {gate.get('min')}"
    return Event(NORMAL, STARTED, text)


def _reasons(notes: Sequence[RetryNote]) -> str:
    counts: dict[str, int] = {}
    for note in notes:
        counts[note.reason] = counts.get(note.reason, 0) + 1
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{reason} {count}" for reason, count in ordered)


def _named(notes: Sequence[RetryNote]) -> str:
    named = "; ".join(
        f"task {n.task_id} trial {n.trial} attempt {n.attempt} ({n.reason}"
        + (f": {n.message}" if n.message else "")
        + ")"
        for n in notes[:MAX_NAMED]
    )
    more = len(notes) - MAX_NAMED
    return named + (f"; and {more} more" if more > 0 else "")


def _attempts(count: int) -> str:
    return f"{count} trial attempt" + ("" if count == 1 else "s")


def trials_retried(notes: Sequence[RetryNote], *, retries_total: int) -> Event:
    """A burst: the infra-error attempts one pass recorded, all retried (`notes` not
    empty); `retries_total` is the eval's retries so far, this burst's included."""
    delays = sorted({n.delay_s for n in notes})
    when = f"{delays[0]:g}s" if len(delays) == 1 else f"{delays[0]:g}-{delays[-1]:g}s"
    ended = "an infra error" if len(notes) == 1 else "infra errors"
    total = f"{retries_total} retr{'y' if retries_total == 1 else 'ies'} so far"
    return Event(
        WARNING,
        TRIAL_RETRIED,
        f"{_attempts(len(notes))} ended as {ended} ({_reasons(notes)}), retrying in "
        f"{when}: {_named(notes)}; {total}",
    )


def retries_exhausted(notes: Sequence[RetryNote]) -> Event:
    """A burst of slots whose last allowed attempt was an infra error too: they stay
    infra_error and out of the score (`notes`: their last attempts, not empty)."""
    slots = f"{len(notes)} trial slot" + ("" if len(notes) == 1 else "s")
    return Event(
        WARNING,
        RETRIES_EXHAUSTED,
        f"{slots} used up their retries ({_reasons(notes)}) and stay infra_error, not "
        f"scored: {_named(notes)}",
    )


def config_error(*, field: str, message: str) -> Event:
    """The eval cannot run: `field` names what to fix."""
    return Event(WARNING, CONFIG_ERROR, f"{field}: {message}" if field else message)


def deadline_exceeded(message: str) -> Event:
    """The eval ran past its deadline: what was scored stays, the rest never runs."""
    return Event(
        WARNING,
        DEADLINE_EXCEEDED,
        f"{message}; running trials were stopped and no more start (what was scored stays)",
    )


def budget_exhausted(message: str) -> Event:
    """The eval reached spec.budget: what was scored stays, nothing more runs."""
    return Event(
        WARNING,
        BUDGET_EXHAUSTED,
        f"{message}; no more trials start, running ones were stopped, queued ones deleted "
        "(what was scored stays; the gate fails)",
    )


def spend_invalid(problems: Sequence[str]) -> Event:
    """Attempts (this pass's) whose result JSON reported a spend passhat refused."""
    shown = "; ".join(problems[:5]) + (
        f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
    )
    return Event(
        WARNING,
        SPEND_INVALID,
        f"{len(problems)} recorded attempts reported a spend passhat cannot sum (left out of "
        f"status.usage, the attempts are recorded): {shown}",
    )


def stopped(message: str) -> Event:
    """The operator was drained while the eval ran: what was scored stays."""
    return Event(
        WARNING,
        STOPPED,
        f"{message}; running trials were stopped and no more start (what was scored stays)",
    )


def create_refused(*, quota: bool, message: str, retry_s: float) -> Event:
    """The API server refused trial pods for now (a full quota when `quota`, else other
    admission or throttling); creates are tried again in `retry_s` seconds at the latest."""
    return Event(
        WARNING,
        QUOTA_EXCEEDED if quota else FAILED_CREATE,
        f"cannot create trial pods for now (next try within {retry_s:g}s, one pod first; "
        f"reported at most every few minutes): {message}",
    )


def unschedulable(*, pods: int, pod: str, waited_s: float, message: str) -> Event:
    """`pods` trial pods have been Pending unschedulable past the grace; `pod` is the one
    waiting longest (`waited_s` seconds), `message` the scheduler's word on it."""
    if pods == 1:
        return Event(
            WARNING,
            UNSCHEDULABLE,
            f"trial pod {pod} has not been scheduled for {waited_s:.0f}s: {message}",
        )
    return Event(
        WARNING,
        UNSCHEDULABLE,
        f"{pods} trial pods have not been scheduled; the longest waiting, {pod}, for "
        f"{waited_s:.0f}s: {message}",
    )


def foreign_pod(*, pod: str) -> Event:
    """Pod `pod` claims to be a trial pod of the eval, but the operator did not make it."""
    return Event(
        WARNING,
        FOREIGN_POD,
        f"pod {pod} carries this eval's trial labels but was not created by the passhat "
        "operator (no valid creation mark): it is not counted and not touched",
    )


def grader_check_pruned() -> Event:
    """The API server dropped status.graderCheck from the status the operator wrote."""
    return Event(
        WARNING,
        GRADER_CHECK_PRUNED,
        "status.graderCheck was pruned by the API server: the ConsistencyEval CRD in place is "
        "older than this operator (apply crds/consistencyevals.passhat.dev.yaml of its "
        "version); the grader stability check waits and makes no grader pod until then",
    )


def namespace_claimed(refusal: str) -> Event:
    """Another holder has the namespace's claim: this release does not serve the eval."""
    return Event(WARNING, NAMESPACE_CLAIMED, f"{refusal}; the eval waits until it may serve it")


def trial_name_taken(*, pod: str, task_id: str, trial: int, attempt: int) -> Event:
    """A pod the operator did not make took attempt `attempt`'s name first."""
    return Event(
        WARNING,
        TRIAL_NAME_TAKEN,
        f"pod {pod} holds the name of task {task_id} trial {trial} attempt {attempt} but was "
        "not created by the passhat operator: it is not counted and not touched; the "
        "attempt is lost (infra_error) and the next one gets a new name",
    )


def completed(status: Mapping[str, Any]) -> Event:
    """Every slot is final; the message carries the headline numbers from `status`."""
    progress = _mapping(status.get("progress"))
    summary = _mapping(status.get("summary"))
    by_k = [row for row in summary.get("byK") or [] if isinstance(row, Mapping)]
    parts = [f"all {progress.get('done', '?')} trials final"]
    if by_k:
        parts.append(f"mean pass rate {_fmt(by_k[0].get('meanPassRate'))}")
    parts += [f"pass^{row.get('k')} {_fmt(row.get('passHatK'))}" for row in by_k]
    flaky = status.get("flaky")
    if isinstance(flaky, list):
        parts.append(f"{status.get('flakyCount', len(flaky))} flaky")
    rate = summary.get("infraErrorRate")
    if isinstance(rate, int | float):
        parts.append(f"infra errors {100 * rate:.1f}%")
    return Event(NORMAL, COMPLETED, ", ".join(parts))


def gate_result(*, metric: str, k: int, minimum: float, value: float, passed: bool) -> Event:
    """The gate's verdict, once, when the eval completes."""
    verb = "met" if passed else "missed"
    return Event(
        NORMAL if passed else WARNING,
        GATE_PASSED if passed else GATE_FAILED,
        f"gate {metric} at k={k}: {value:.4f} {verb} the minimum {minimum:g}",
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _fmt(value: Any) -> str:
    """A rate as kubectl get shows it (`37.5%`), `?` when missing."""
    return f"{100 * value:.1f}%" if isinstance(value, int | float) else "?"


class RetryLimiter:
    """Allow at most `burst` retry events per eval per `window_s` seconds (thread-safe)."""

    def __init__(
        self,
        *,
        burst: int = 20,
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._burst = burst
        self._window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: dict[tuple[str, str], tuple[float, int]] = {}

    def allow(self, namespace: str, name: str) -> bool:
        """Whether one more retry event for this eval may be posted now."""
        now = self._clock()
        with self._lock:
            start, count = self._windows.get((namespace, name), (now, 0))
            if now - start >= self._window_s:
                start, count = now, 0
            self._windows[(namespace, name)] = (start, count + 1)
            return count < self._burst

    def forget(self, namespace: str, name: str) -> None:
        """Drop an eval's window (it was deleted)."""
        with self._lock:
            self._windows.pop((namespace, name), None)


RETRY_LIMITER = RetryLimiter()


def post(body: Mapping[str, Any], event: Event) -> None:
    """Post `event` on the object `body` (an eval) via kopf; never raises.

    Retry events beyond the per-eval rate are dropped (the counts are in status and
    metrics). Outside a running operator (no kopf context) the event is only logged.
    """
    meta = body.get("metadata") or {}
    if event.reason == TRIAL_RETRIED and not RETRY_LIMITER.allow(
        str(meta.get("namespace", "")), str(meta.get("name", ""))
    ):
        return
    message = event.message[:MAX_MESSAGE]
    try:
        target = body if isinstance(body, kopf.Body) else kopf.Body(cast(kopf.RawBody, dict(body)))
        kopf.event(target, type=event.type, reason=event.reason, message=message)
    except LookupError:
        logger.info("event %s %s: %s", event.type, event.reason, message)
    except Exception:  # NB: an event is never worth failing a reconcile for
        logger.exception("could not post event %s", event.reason)
