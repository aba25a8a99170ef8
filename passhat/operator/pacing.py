"""Pacing an eval's pod creates: slow start, backoff while refused, bounded batches.

Without it a pass POSTed every missing pod at once: an eval of 5,000 trials against a
ResourceQuota of 3 pods sent some 5,000 refused POSTs every 3 s resync, for as long as
the quota stayed full (10,000 POSTs per pass measured), and built every pod body of a
pass in memory first (10 tasks of 63 KiB params at `parallelism: 10000`: 752 MiB peak).
This module does what the Kubernetes Job controller does (`manageJob`'s slow start,
`SlowStartInitialBatchSize`, `MaxPodCreateDeletePerSync`, and its work queue's per-Job
exponential backoff from `DefaultJobApiBackOff` to `MaxJobApiBackOff`):

- A pass creates its pods in batches of 1, 2, 4, ... up to `create_batch_max`, at most
  `create_per_pass_max` in all, and stops at the first batch with an error; the next
  pass goes on at the batch size reached, until a create fails (a batch
  itself stops sending at its first error: `EvalApi.settle`). Only one batch of pod
  bodies exists at a time, so memory does not grow with `parallelism`.
- A create refused for now (403 from admission: quota exceeded, a LimitRange, a missing
  service account; 429: the API server throttles) backs the eval's creates off
  exponentially: `create_backoff_initial_s`, doubling per refused pass up to
  `create_backoff_max_s`. A pass that created pods before its refusal starts the backoff
  over (the quota had room: it may again soon); one with every create done clears it. A
  quota refusal's backoff starts over when one of the eval's own pods has ended (that
  frees quota), and that pass tries again at once, still one pod first.
- While refused the eval says why: the `CreateRefused` condition (reason QuotaExceeded,
  Throttled or Forbidden, the API server's message, the next try) and a Warning event
  (`QuotaExceeded`, else `FailedCreate`) at most once per `refusal_event_interval_s`
  per eval and reason.

The state is in memory, per eval (`CreatePacer`): an operator restart starts slow again
at one pod, which is the safe direction.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from passhat import metrics
from passhat.api import conditions as cond
from passhat.operator import events
from passhat.operator.config import OperatorConfig
from passhat.operator.kube import ApiError

__all__ = [
    "CreatePacer",
    "Paced",
    "Refusal",
    "Settles",
    "create_paced",
    "refusal_of",
    "slow_start",
]

K = TypeVar("K")


class Settles(Protocol):
    """The one call of `passhat.operator.kube.EvalApi` that pacing uses."""

    def settle(
        self,
        namespace: str,
        *,
        keep: Sequence[Mapping[str, Any]],
        release: Sequence[Mapping[str, Any]],
        create: Sequence[Mapping[str, Any]],
        before: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> list[str]:
        """See `EvalApi.settle`."""
        ...


@dataclass(frozen=True)
class Refusal:
    """A create the API server refused for now: the condition's reason and its message."""

    reason: str
    message: str


def refusal_of(err: ApiError) -> Refusal | None:
    """What `err` says when a pod create was refused in a way that may pass later (403
    from quota or other admission, 429 throttling); None for any other error (a 403 from
    Pod Security never passes later: the loop makes it a ConfigError)."""
    if err.verb != "create":
        return None
    text = str(err)
    if err.status == 429:
        return Refusal(cond.REASON_THROTTLED, text)
    if err.status != 403 or "violates PodSecurity" in text:
        return None
    if "exceeded quota" in text:
        return Refusal(cond.REASON_QUOTA_EXCEEDED, text)
    return Refusal(cond.REASON_FORBIDDEN, text)


def slow_start(total: int, *, batch_max: int, first: int = 1) -> Iterator[int]:
    """Batch sizes `first`, twice that, ... (at most `batch_max`) that add up to `total`."""
    size = max(1, first)
    while total > 0:
        batch = min(size, batch_max, total)
        yield batch
        total -= batch
        size *= 2


@dataclass
class CreatePacer:
    """One eval's slow start and backoff state (in memory; see the module docstring)."""

    config: OperatorConfig = field(default_factory=OperatorConfig)
    clock: Callable[[], float] = time.time
    # The last create refusal, None once a pass created every pod it tried.
    refusal: Refusal | None = None
    # Refused passes in a row (a pass that created pods first counts as the first).
    refusals: int = 0
    # No create before this time (the backoff), unless one of our pods ended since.
    not_before: float = 0.0
    # Ever refused: the condition is written False once creates work again.
    ever_refused: bool = False
    # The first batch of the next pass: 1 at the start and after any failed create, else
    # the size the last pass's slow start had reached (see `batches`).
    window: int = 1
    # Seconds a create of this eval took per pod in its last batch (the batch's wall time
    # over its size; None before the first): how big a batch still fits a pass's budget.
    per_pod_s: float | None = None
    _reported: dict[str, float] = field(default_factory=dict)

    def may_create(self, *, pods_ended: bool) -> bool:
        """Whether this pass may create pods: not backing off, or backing off from a
        quota refusal while one of the eval's pods has ended since; then the backoff
        starts over (its quota is free, or will be as soon as the kubelet moves the pod's
        phase, which may come a moment after its containers ended)."""
        if self.refusal is None:
            return True
        if pods_ended and self.refusal.reason == cond.REASON_QUOTA_EXCEEDED:
            self.refusals, self.not_before = 0, 0.0
        return self.clock() >= self.not_before

    def budget(self, wanted: int) -> int:
        """How many of `wanted` missing pods a pass creates: at most `create_per_pass_max`."""
        return max(0, min(wanted, self.config.create_per_pass_max))

    def batches(self, total: int) -> Iterator[int]:
        """The slow-start batch sizes of a pass creating `total` pods.

        A pass starts where the last one's slow start got to (`window`), not at 1 again:
        once creates go through, an eval whose pods end in waves (every pass creates a
        wave) would otherwise pay log2(create_batch_max) round trips per wave (measured
        in #22). Any failed create starts over at 1, as a new operator process does."""
        return slow_start(total, batch_max=self.config.create_batch_max, first=self.window)

    def batch_done(self, size: int, seconds: float | None = None) -> None:
        """A batch of `size` creates went through (in `seconds`): the next one may be twice
        as big (a short last batch of a pass does not shrink the window)."""
        self.window = min(self.config.create_batch_max, max(self.window, 2 * size))
        if seconds is not None and size:
            self.per_pod_s = max(0.0, seconds) / size

    def fit(self, size: int, left_s: float) -> int:
        """`size`, or fewer pods: as many as the last batch's pace gets created in the
        `left_s` seconds left of the pass's budget (0: not even one)."""
        if left_s <= 0:
            return 0
        if self.per_pod_s is None or self.per_pod_s <= 0:
            return size
        # NB: a hair of slack, so that 0.3 s at 0.1 s a pod are 3 pods, not 2.999...
        return max(0, min(size, math.floor(left_s / self.per_pod_s + 1e-3)))

    def delay_s(self) -> float:
        """The current backoff (0 when not refused)."""
        if not self.refusals:
            return 0.0
        initial, cap = self.config.create_backoff_initial_s, self.config.create_backoff_max_s
        return float(min(cap, initial * 2 ** min(self.refusals - 1, 62)))

    def created(self) -> None:
        """Every create of the pass went through: no backoff any more."""
        self.refusal, self.refusals, self.not_before = None, 0, 0.0

    def refused(self, refusal: Refusal, *, created_first: bool) -> bool:
        """A create of this pass was refused (after `created_first` pods went through, or
        none); True when the refusal should be reported as an event now."""
        now = self.clock()
        metrics.observe_create_backoff(refusal.reason)
        self.refusals = 1 if created_first else self.refusals + 1
        self.refusal = refusal
        self.window = 1
        self.ever_refused = True
        self.not_before = now + self.delay_s()
        last = self._reported.get(refusal.reason)
        if last is not None and now - last < self.config.refusal_event_interval_s:
            return False
        self._reported[refusal.reason] = now
        return True

    def conditions(
        self, conditions: Sequence[Mapping[str, Any]], *, generation: int, now: float
    ) -> list[dict[str, Any]]:
        """`conditions` with CreateRefused set from this state (absent while never refused)."""
        current = [dict(item) for item in conditions if isinstance(item, Mapping)]
        if self.refusal is not None:
            until = cond.timestamp(self.not_before)
            message = (
                f"the API server refuses this eval's trial pods for now ({self.refusals} "
                f"refused passes in a row); creates resume at {until} at the latest, one pod "
                f"first (backoff {self.delay_s():g}s, doubling up to "
                f"{self.config.create_backoff_max_s:g}s): {self.refusal.message}"
            )
            return cond.set_condition(
                current,
                cond.CREATE_REFUSED,
                "True",
                self.refusal.reason,
                message,
                generation=generation,
                now=now,
            )
        if self.ever_refused or cond.find_condition(current, cond.CREATE_REFUSED) is not None:
            return cond.set_condition(
                current,
                cond.CREATE_REFUSED,
                "False",
                cond.REASON_CREATED,
                "trial pods are created again",
                generation=generation,
                now=now,
            )
        return current

    def event(self) -> events.Event | None:
        """The event of the current refusal (None when not refused)."""
        if self.refusal is None:
            return None
        return events.create_refused(
            quota=self.refusal.reason == cond.REASON_QUOTA_EXCEEDED,
            message=self.refusal.message,
            retry_s=self.delay_s(),
        )


@dataclass
class Paced:
    """What `create_paced` did: pods sent and accepted, names found taken, a refusal."""

    created: int = 0
    taken: list[str] = field(default_factory=list)
    refusal: Refusal | None = None
    report: bool = False


def create_paced(
    api: Settles,
    namespace: str,
    keys: Sequence[K],
    build: Callable[[K], Mapping[str, Any]],
    pacer: CreatePacer,
    *,
    keep: Sequence[Mapping[str, Any]] = (),
    release: Sequence[Mapping[str, Any]] = (),
    before: Callable[[Mapping[str, Any]], None] | None = None,
) -> Paced:
    """Create the pods of `keys` (built by `build`, one batch at a time) in slow-start
    batches; stop at the first refusal, which backs the eval off. `keep` and `release`
    go with the first batch (`EvalApi.settle`). Errors other than a refusal for now are
    raised (nothing more is sent after them).

    The creates' budget, `create_pass_max_s` from the first batch: that batch always
    goes, each later one only as big as the last batch's pace lets it end within the
    budget, and none once not one pod fits. The next pass goes on at once, so the creates
    keep their pace in passes that stay short."""
    paced = Paced()
    start = 0
    clock = pacer.clock
    deadline = clock() + pacer.config.create_pass_max_s
    for size in list(pacer.batches(len(keys))) or [0]:
        if paced.created:
            size = pacer.fit(size, deadline - clock())
            if not size:
                break  # NB: the next pass goes on at once; a pass stays short under a slow API
        pods = [build(key) for key in keys[start : start + size]]
        sent = clock()
        try:
            paced.taken += api.settle(
                namespace, keep=keep, release=release, create=pods, before=before
            )
        except ApiError as err:
            refusal = refusal_of(err) if pods else None
            if refusal is None:
                pacer.window = 1
                raise
            paced.refusal = refusal
            paced.report = pacer.refused(refusal, created_first=paced.created > 0)
            return paced
        finally:
            del pods  # NB: one batch of bodies at a time (a task's params may be large)
        keep, release, before = (), (), None
        if size:
            pacer.batch_done(size, clock() - sent)
        paced.created += size
        start += size
    if keys and paced.created == len(keys):
        pacer.created()
    return paced
