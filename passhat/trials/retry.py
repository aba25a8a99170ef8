"""When an infra error is retried, and after how long.

One plan for both executors: a slot gets at most `infra_errors` retries after infra
errors, each after an exponentially growing, capped delay. Deterministic (no jitter) so a
run can be replayed and tested; the operator spreads pods anyway by `parallelism`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from passhat.trials.outcomes import Verdict

if TYPE_CHECKING:
    # NB: annotations only; importing the pydantic models costs `passhat trial` ~0.3 s
    from passhat.api.spec import RetryPolicy

__all__ = ["RetryPlan"]


@dataclass(frozen=True)
class RetryPlan:
    """Retries after infra errors: how many, and the backoff between them."""

    infra_errors: int = 3
    backoff_seconds: float = 10.0
    max_backoff_seconds: float = 300.0

    @classmethod
    def from_policy(cls, policy: RetryPolicy) -> RetryPlan:
        """The plan of a spec's `retry` section."""
        return cls(policy.infra_errors, policy.backoff_seconds, policy.max_backoff_seconds)

    @property
    def max_attempts(self) -> int:
        """Attempts a slot may take in all: the first plus the retries."""
        return self.infra_errors + 1

    def may_retry(self, attempt: int) -> bool:
        """Whether a slot whose attempt `attempt` (0-based) was an infra error gets another."""
        return attempt + 1 < self.max_attempts

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retrying after infra-error attempt `attempt` (0-based)."""
        if attempt < 0:
            raise ValueError(f"attempt={attempt} must be >= 0")
        if self.backoff_seconds <= 0:
            return 0.0
        # NB: cap the exponent first so huge attempt numbers cannot overflow a float.
        exponent = min(attempt, 64)
        return float(min(self.backoff_seconds * 2.0**exponent, self.max_backoff_seconds))

    def is_final(self, verdict: Verdict, attempt: int) -> bool:
        """Whether attempt `attempt` with this verdict settles its slot (no retry follows)."""
        return not verdict.is_infra_error or not self.may_retry(attempt)
