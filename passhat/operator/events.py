"""Kubernetes Events on a ConsistencyEval: retries, config errors, gate and completion.

`kubectl describe consistencyeval NAME` is where a user looks first when an eval is slow
or stuck, so the operator says there what it did: which trial was retried and why, which
field is wrong, when the eval finished and whether its gate passed. Messages are built by
pure functions (tested without a cluster) and posted through kopf's event poster, which
batches them off the reconcile path. Retry events are rate-limited per eval, because a
node loss can retry hundreds of trials at once and Events are not a log.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import kopf

__all__ = [
    "COMPLETED",
    "CONFIG_ERROR",
    "DEADLINE_EXCEEDED",
    "FAILED_CREATE",
    "FOREIGN_POD",
    "GATE_FAILED",
    "GATE_PASSED",
    "QUOTA_EXCEEDED",
    "RETRIES_EXHAUSTED",
    "TRIAL_NAME_TAKEN",
    "TRIAL_RETRIED",
    "UNSCHEDULABLE",
    "Event",
    "RetryLimiter",
    "completed",
    "config_error",
    "create_refused",
    "deadline_exceeded",
    "foreign_pod",
    "gate_result",
    "post",
    "retries_exhausted",
    "trial_name_taken",
    "trial_retried",
    "unschedulable",
]

logger = logging.getLogger(__name__)

# Warning: a trial attempt ended as an infra error and another attempt is scheduled
TRIAL_RETRIED = "TrialRetried"
# Warning: a trial slot used up its retries and stays infra_error (out of the score)
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
# Warning: a pod carries this eval's labels but the operator did not create it; it is
# neither counted nor touched (docs/security.md)
FOREIGN_POD = "ForeignTrialPod"
# Warning: a pod the operator did not create holds a trial attempt's name; that attempt
# is lost and the next one gets a new name; the pod is not touched
TRIAL_NAME_TAKEN = "TrialPodNameTaken"
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


def trial_retried(
    *, task_id: str, trial: int, attempt: int, reason: str, delay_s: float, message: str = ""
) -> Event:
    """Attempt `attempt` of (task, trial) was an infra error; the next one starts later."""
    detail = f": {message}" if message else ""
    return Event(
        WARNING,
        TRIAL_RETRIED,
        f"task {task_id} trial {trial} attempt {attempt} ended as infra_error/{reason}{detail}; "
        f"retrying as attempt {attempt + 1} in {delay_s:g}s",
    )


def retries_exhausted(*, task_id: str, trial: int, attempts: int, reason: str) -> Event:
    """A slot's last allowed attempt was an infra error too; it is left out of the score."""
    return Event(
        WARNING,
        RETRIES_EXHAUSTED,
        f"task {task_id} trial {trial}: {attempts} attempts all ended as infra errors "
        f"(last: {reason}); the trial stays infra_error and is not scored",
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
    parts += [f"pass^{row.get('k')}={_fmt(row.get('passHatK'))}" for row in by_k]
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
    return f"{value:.4f}" if isinstance(value, int | float) else "?"


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
