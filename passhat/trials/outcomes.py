"""What a trial attempt ended as: the three outcomes and the named reasons.

Both executors (local subprocesses, operator pods) and the readers speak this vocabulary,
so a `trials.jsonl` written locally and a status written by the operator mean the same.
Reasons are plain strings (they travel through JSON and Prometheus labels); the constants
below are the ones passhat itself produces.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "CONFIG_ERROR",
    "DELETED",
    "EVICTED",
    "EXIT_CODE",
    "IMAGE_ERROR",
    "LOST",
    "NODE_LOST",
    "OOM_KILLED",
    "PREEMPTED",
    "REJECTED",
    "REPORTED",
    "RESULT",
    "TIMEOUT",
    "Outcome",
    "Verdict",
    "exit_reason",
    "infra_reasons",
]


class Outcome(StrEnum):
    """How an attempt ended; only pass and fail are scored."""

    PASS = "pass"
    FAIL = "fail"
    INFRA_ERROR = "infra_error"


# infra_error: the kernel / kubelet killed the trial for exceeding its memory ceiling
OOM_KILLED = "oom_killed"
# infra_error: the wall-clock limit (timeoutSeconds / activeDeadlineSeconds) was hit
TIMEOUT = "timeout"
# infra_error: the trial itself said so (exit code in grading.infraError or result JSON)
REPORTED = "reported"
# infra_error: the pod was evicted (API eviction, node pressure, kubelet termination)
EVICTED = "evicted"
# infra_error: the pod was preempted by a higher-priority workload (scheduler or Kueue)
PREEMPTED = "preempted"
# infra_error: the node went away (shutdown, lost, deleted by the taint manager or pod GC)
NODE_LOST = "node_lost"
# infra_error: the kubelet refused to admit the pod (OutOfcpu, UnexpectedAdmissionError, ...)
REJECTED = "rejected"
# infra_error: the container's end is unknown (ContainerStatusUnknown; its exit code is made up)
LOST = "lost"
# infra_error: the pod was deleted before it reached a terminal state
DELETED = "deleted"
# infra_error: the image could not be pulled or is invalid
IMAGE_ERROR = "image_error"
# infra_error: the container could not be created from its config (missing ConfigMap, ...)
CONFIG_ERROR = "config_error"
# pass / fail: decided by an exit code listed in grading.exitCodes
EXIT_CODE = "exit_code"
# pass / fail: decided by a valid result JSON
RESULT = "result"


def exit_reason(code: int) -> str:
    """The reason of an unlisted non-zero exit (the agent crashed): `exit_<code>`."""
    return f"exit_{code}"


def infra_reasons(attempts: Iterable[tuple[str, str | None]]) -> dict[str, int]:
    """Infra-error attempts per reason from (outcome, reason) pairs, most first.

    An infra error without a reason counts as `unknown`. The one count behind every
    report's "infra errors by reason" (score, run, report, trials).
    """
    counts = Counter(
        reason or "unknown" for outcome, reason in attempts if outcome == Outcome.INFRA_ERROR
    )
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


@dataclass(frozen=True)
class Verdict:
    """The classification of one finished attempt."""

    outcome: Outcome
    reason: str
    message: str = ""

    @property
    def is_infra_error(self) -> bool:
        """Whether this attempt is an infra error (retried, never scored)."""
        return self.outcome is Outcome.INFRA_ERROR
