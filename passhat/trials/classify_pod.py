"""The pod-side rows of the outcome table: how a trial pod's status is graded.

The operator sees an attempt only through its pod, as the API server returns it: a JSON
dict with camelCase keys (`status.containerStatuses[].state.terminated.exitCode`), not the
kubernetes client's snake_case objects. What Kubernetes reports for OOM kills, evictions,
preemptions, lost nodes, deadlines and image errors is subtle and changes between
versions, so every rule is a named row of `POD_RULES`, most specific first, each tested
against pods captured from a real cluster (`tests/fixtures/pods/`). Exit codes and the
result JSON (the first container's termination message) go through the same
`classify_exit` rows as a local subprocess.

Lessons from real clusters encoded here:
- OOMKilled can come with exit code 0 and phase Succeeded; it is still an infra error.
- A pod being deleted is SIGTERMed/SIGKILLed by the kubelet (exit 143/137); that is not
  the agent crashing but `deleted` (the kubelet's last update even resets
  `deletionGracePeriodSeconds` to 0, so do not rely on it).
- A pod whose node is gone never becomes terminal; the taint manager / pod GC mark it
  with a `DisruptionTarget` condition and delete it, so that row decides at once.
- Image and container-config errors may be transient; they count only after a grace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from passhat.api.spec import Grading
from passhat.trials.classify import Rule, TimeoutIs, classify_exit, normalize_exit_code
from passhat.trials.outcomes import (
    CONFIG_ERROR,
    DELETED,
    EVICTED,
    IMAGE_ERROR,
    LOST,
    NODE_LOST,
    OOM_KILLED,
    PREEMPTED,
    REJECTED,
    TIMEOUT,
    Outcome,
    Verdict,
)
from passhat.trials.result import parse_result

__all__ = [
    "DISRUPTION_REASONS",
    "POD_RULES",
    "STATUS_REASONS",
    "PodFacts",
    "classify_facts",
    "classify_pod",
    "parse_timestamp",
    "pod_facts",
    "pod_result",
    "verdict_for_vanished_pod",
]

# DisruptionTarget condition reasons (and Kueue's TerminationTarget) -> reason.
DISRUPTION_REASONS: dict[str, str] = {
    "EvictionByEvictionAPI": EVICTED,  # kubectl drain, the eviction API
    "TerminationByKubelet": EVICTED,  # node-pressure eviction, graceful node shutdown
    "PreemptionByScheduler": PREEMPTED,  # a higher-priority pod needed the room
    "PreemptionByKubeScheduler": PREEMPTED,  # the same, Kubernetes <= 1.26
    "DeletionByTaintManager": NODE_LOST,  # NoExecute taint, e.g. the node went NotReady
    "DeletionByPodGC": NODE_LOST,  # the pod's node was deleted
    # Kueue stops a workload's pods with TerminationTarget, reason "WorkloadEvictedDueTo" +
    # the Evicted condition's reason (jobframework/reconciler.go, v0.17), then deletes them.
    "WorkloadEvictedDueToPreempted": PREEMPTED,  # a higher-priority workload took the quota
    "WorkloadEvictedDueToPodsReadyTimeout": EVICTED,  # waitForPodsReady: not ready in time
    "WorkloadEvictedDueToDeactivated": EVICTED,  # someone set the Workload inactive
    "WorkloadEvictedDueToNodeFailures": NODE_LOST,  # the pod's node failed (TAS)
}
# Reason of a DisruptionTarget/TerminationTarget condition not listed above (one that
# mentions preemption, e.g. Kueue's, is preempted).
_DEFAULT_DISRUPTION = EVICTED
_DISRUPTION_CONDITIONS = ("DisruptionTarget", "TerminationTarget")

# status.reason of a failed pod -> reason (DeadlineExceeded is its own row).
STATUS_REASONS: dict[str, str] = {
    "Evicted": EVICTED,  # node-pressure eviction by the kubelet
    "Preempted": PREEMPTED,  # preempted by the kubelet for a critical pod
    "NodeShutdown": NODE_LOST,  # graceful node shutdown (older kubelets)
    "Terminated": NODE_LOST,  # graceful node shutdown
    "NodeLost": NODE_LOST,  # the node stopped reporting
    "UnexpectedAdmissionError": REJECTED,  # the kubelet failed to admit the pod
    "NodeAffinity": REJECTED,  # the node no longer fits the pod at admission
}
# Kubelet admission rejections for lack of a resource: OutOfcpu, OutOfmemory, OutOfpods, ...
_OUT_OF_PREFIX = "OutOf"

_IMAGE_WAITING = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"}
)
_CONFIG_WAITING = frozenset(
    {"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
)
_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_MAX_MESSAGE = 300
# Kubernetes' default terminationGracePeriodSeconds.
_DEFAULT_GRACE_S = 30.0


@dataclass(frozen=True)
class PodFacts:
    """What the classifier reads from one pod, gathered once."""

    phase: str
    status_reason: str
    status_message: str
    disruption: tuple[str, str] | None  # (condition reason, message) when True
    deleting: bool
    deletion_window_start: float | None  # earliest time the deletion can have been requested
    oom_container: str | None
    main: Mapping[str, Any] | None  # state.terminated of the first container
    waiting: tuple[str, str, str] | None  # (container, reason, message) of a stuck container
    age_s: float | None  # since the pod started on its node (else since its creation)
    grading: Grading
    timeout_is: TimeoutIs
    image_error_grace_s: float

    @property
    def terminal(self) -> bool:
        """Whether the attempt has ended: phase Succeeded/Failed or the trial container done."""
        return self.phase in _TERMINAL_PHASES or self.main is not None

    @property
    def main_exit_code(self) -> int | None:
        """The first container's exit code, if it terminated with one."""
        code = self.main.get("exitCode") if self.main is not None else None
        return code if isinstance(code, int) else None

    @property
    def past_grace(self) -> bool:
        """Whether the pod is older than the image/config error grace period."""
        return self.age_s is not None and self.age_s >= self.image_error_grace_s


def _statuses(status: Mapping[str, Any], *keys: str) -> list[Mapping[str, Any]]:
    found: list[Mapping[str, Any]] = []
    for key in keys:
        items = status.get(key)
        if isinstance(items, list):
            found.extend(item for item in items if isinstance(item, Mapping))
    return found


def _get(mapping: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def parse_timestamp(value: Any) -> float | None:
    """Epoch seconds of a Kubernetes timestamp (RFC 3339, `2026-01-01T00:00:00Z`, as in
    `creationTimestamp` or `state.terminated.finishedAt`); None when absent or malformed."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def pod_facts(
    pod: Mapping[str, Any],
    *,
    grading: Grading,
    timeout_is: TimeoutIs,
    now: float | datetime,
    image_error_grace_s: float = 60.0,
) -> PodFacts:
    """Gather the facts of `pod` (a raw API JSON dict) the rules look at."""
    metadata = _get(pod, "metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    status = _get(pod, "status")
    status = status if isinstance(status, Mapping) else {}
    every = _statuses(
        status, "initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"
    )
    main = _main_terminated(pod, status)

    oom = next(
        (
            str(s.get("name"))
            for s in every
            for state in ("state", "lastState")
            if _get(s, state, "terminated", "reason") == "OOMKilled"
        ),
        None,
    )
    disruption = None
    for condition in _statuses(status, "conditions"):
        if condition.get("type") in _DISRUPTION_CONDITIONS and condition.get("status") == "True":
            disruption = (str(condition.get("reason") or ""), str(condition.get("message") or ""))
            break
    waiting = None
    for s in every:
        reason = _get(s, "state", "waiting", "reason")
        if reason in _IMAGE_WAITING or reason in _CONFIG_WAITING:
            message = str(_get(s, "state", "waiting", "message") or "")
            waiting = (str(s.get("name")), str(reason), message)
            break
    now_s = now.timestamp() if isinstance(now, datetime) else float(now)
    # NB: from the kubelet's start of the pod: time spent gated, waiting for a queue's
    # admission (Kueue), is no part of the image-error grace.
    created = parse_timestamp(status.get("startTime")) or parse_timestamp(
        metadata.get("creationTimestamp")
    )
    return PodFacts(
        phase=str(status.get("phase") or ""),
        status_reason=str(status.get("reason") or ""),
        status_message=str(status.get("message") or ""),
        disruption=disruption,
        deleting=metadata.get("deletionTimestamp") is not None,
        deletion_window_start=_deletion_window_start(pod, metadata),
        oom_container=oom,
        main=main if isinstance(main, Mapping) else None,
        waiting=waiting,
        age_s=None if created is None else now_s - created,
        grading=grading,
        timeout_is=timeout_is,
        image_error_grace_s=image_error_grace_s,
    )


def _main_terminated(pod: Mapping[str, Any], status: Mapping[str, Any]) -> Any:
    """`state.terminated` of the pod's first container (None while it has not ended)."""
    containers = _get(pod, "spec", "containers")
    main_name = _get(containers[0], "name") if isinstance(containers, list) and containers else None
    statuses = _statuses(status, "containerStatuses")
    main_status = next((s for s in statuses if s.get("name") == main_name), None)
    if main_status is None and main_name is None and statuses:
        main_status = statuses[0]
    return _get(main_status, "state", "terminated")


def pod_result(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """The valid result JSON the pod's first container left as its termination message
    (what the trial spent travels in it), else None."""
    status = _get(pod, "status")
    main = _main_terminated(pod, status if isinstance(status, Mapping) else {})
    return parse_result(main.get("message")) if isinstance(main, Mapping) else None


def _infra(reason: str, message: str) -> Verdict:
    return Verdict(Outcome.INFRA_ERROR, reason, message[:_MAX_MESSAGE])


def _result(facts: PodFacts) -> dict[str, Any] | None:
    return parse_result(facts.main.get("message")) if facts.main is not None else None


def _status_reason(facts: PodFacts) -> str | None:
    if facts.status_reason in STATUS_REASONS:
        return STATUS_REASONS[facts.status_reason]
    if facts.status_reason.startswith(_OUT_OF_PREFIX):
        return REJECTED
    return None


def _disruption(facts: PodFacts) -> Verdict:
    assert facts.disruption is not None
    reason, message = facts.disruption
    default = PREEMPTED if "preempt" in reason.lower() else _DEFAULT_DISRUPTION
    return _infra(DISRUPTION_REASONS.get(reason, default), f"{reason}: {message}")


def _deletion_window_start(pod: Mapping[str, Any], metadata: Mapping[str, Any]) -> float | None:
    # NB: deletionTimestamp = request time + grace period, and the kubelet's last update
    # resets deletionGracePeriodSeconds to 0, so use the pod's own grace period (or more).
    deleted_at = parse_timestamp(metadata.get("deletionTimestamp"))
    if deleted_at is None:
        return None
    grace = _get(pod, "spec", "terminationGracePeriodSeconds")
    grace_s = float(grace) if isinstance(grace, int | float) and grace >= 0 else 0.0
    return deleted_at - max(
        grace_s, _DEFAULT_GRACE_S, _as_float(metadata.get("deletionGracePeriodSeconds"))
    )


def _as_float(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _ended_by_deletion(facts: PodFacts) -> bool:
    """Whether the trial container of a pod being deleted ended because of the deletion.

    It did when it was killed by a signal (143/137), or when it ended after the deletion
    was requested (an agent that traps SIGTERM and exits 1 did not fail its task).
    """
    if not facts.deleting or facts.main is None:
        return False
    code = facts.main_exit_code
    if facts.main.get("signal") or (code is not None and normalize_exit_code(code) >= 128):
        return True
    finished = parse_timestamp(facts.main.get("finishedAt"))
    start = facts.deletion_window_start
    return finished is not None and start is not None and finished >= start


def _exit(facts: PodFacts) -> Verdict:
    return classify_exit(
        exit_code=facts.main_exit_code,
        grading=facts.grading,
        result=_result(facts),
        timeout_is=facts.timeout_is,
    )


def _waiting(facts: PodFacts, reasons: frozenset[str]) -> bool:
    return facts.waiting is not None and facts.waiting[1] in reasons and facts.past_grace


def _waiting_verdict(reason: str) -> Callable[[PodFacts], Verdict]:
    def verdict(facts: PodFacts) -> Verdict:
        assert facts.waiting is not None
        container, why, message = facts.waiting
        return _infra(reason, f"container {container}: {why}: {message}")

    return verdict


# The rows, most specific first; the first that applies decides. None of them applying
# means the attempt has not ended yet.
POD_RULES: tuple[Rule[PodFacts], ...] = (
    # NB: OOM wins even over a result JSON and over exit 0 / phase Succeeded.
    Rule(
        "oom_killed",
        lambda f: f.oom_container is not None,
        lambda f: _infra(OOM_KILLED, f"container {f.oom_container} was OOMKilled"),
    ),
    Rule("result_json", lambda f: _result(f) is not None, _exit),
    # NB: a stale DisruptionTarget on a live pod is cleared again; only trust it once
    # the pod ended or is being deleted (then its node may be gone: decide now).
    Rule(
        "disruption_target",
        lambda f: f.disruption is not None and (f.terminal or f.deleting),
        _disruption,
    ),
    Rule(
        "status_reason",
        lambda f: _status_reason(f) is not None,
        lambda f: _infra(_status_reason(f) or LOST, f"{f.status_reason}: {f.status_message}"),
    ),
    Rule(
        "deadline_exceeded",
        lambda f: f.status_reason == "DeadlineExceeded",
        lambda f: Verdict(
            Outcome.FAIL if f.timeout_is == "fail" else Outcome.INFRA_ERROR,
            TIMEOUT,
            "the pod ran past activeDeadlineSeconds (timeoutSeconds)",
        ),
    ),
    # NB: the kubelet kills the containers of a pod being deleted; that is not a crash.
    Rule(
        "killed_while_deleted",
        _ended_by_deletion,
        lambda f: _infra(DELETED, f"the pod was deleted (exit code {f.main_exit_code})"),
    ),
    Rule(
        "container_status_unknown",
        lambda f: f.main is not None and f.main.get("reason") == "ContainerStatusUnknown",
        lambda f: _infra(LOST, "the container's end is unknown (ContainerStatusUnknown)"),
    ),
    Rule("image_error", lambda f: _waiting(f, _IMAGE_WAITING), _waiting_verdict(IMAGE_ERROR)),
    Rule("config_error", lambda f: _waiting(f, _CONFIG_WAITING), _waiting_verdict(CONFIG_ERROR)),
    Rule("exit_code", lambda f: f.main is not None, _exit),
    Rule(
        "ended_without_exit_code",
        lambda f: f.phase in _TERMINAL_PHASES,
        lambda f: _infra(LOST, f"the pod {f.phase} without the trial container ending"),
    ),
)


def classify_pod(
    pod: Mapping[str, Any],
    *,
    grading: Grading,
    timeout_is: TimeoutIs = "infra_error",
    now: float | datetime,
    image_error_grace_s: float = 60.0,
) -> Verdict | None:
    """The verdict on a trial pod's attempt, or None while it has not ended.

    `pod` is the raw JSON dict the API server returns (camelCase keys). The trial
    container is the first container of `spec.containers`. `now` (epoch seconds or an
    aware datetime) dates image/config errors against the pod's creationTimestamp.
    A pod being deleted that has not ended returns None unless a DisruptionTarget says
    why; the caller decides when such a pod has been gone too long
    (`verdict_for_vanished_pod`).
    """
    facts = pod_facts(
        pod,
        grading=grading,
        timeout_is=timeout_is,
        now=now,
        image_error_grace_s=image_error_grace_s,
    )
    return classify_facts(facts, POD_RULES)


def classify_facts(facts: PodFacts, rules: Sequence[Rule[PodFacts]]) -> Verdict | None:
    """The verdict of the first row of `rules` that applies, or None."""
    for rule in rules:
        if rule.applies(facts):
            return rule.verdict(facts)
    return None


def verdict_for_vanished_pod() -> Verdict:
    """The verdict on an attempt whose pod disappeared (or never ended) before finishing."""
    return _infra(DELETED, "the pod was deleted before the trial finished")
