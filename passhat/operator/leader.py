"""Leader election on a `coordination.k8s.io/v1` Lease: one active operator, the rest standby.

kopf has no leader election: its peering (`KopfPeering` objects with priorities) pauses an
operator while one of a higher priority runs, and two of the same priority only warn and
carry on (docs.kopf.dev/en/latest/peering). So the election is our own, with the
semantics of client-go's `tools/leaderelection` (what kube-controller-manager, the
scheduler and every controller-runtime operator use) on a Lease:

- a candidate GETs the Lease; if nobody holds it, or its holder has not renewed it for
  `leaseDurationSeconds` *as measured on the candidate's own clock since it last saw the
  record change* (client-go's `observedTime`, so clock skew between nodes does not
  matter, only skew rate), the candidate writes itself in as holder. Every write is an
  update carrying the resourceVersion it read (or a create), so of two candidates only
  one wins (the other gets 409);
- the leader renews every `retry_period_s`; if it has not renewed for `renew_deadline_s`
  it stops leading, and `renew_deadline_s < lease_duration_s`: it has stopped before
  anyone else may take the Lease (`passhat.operator.main` exits the process then, as
  client-go's users do in `OnStoppedLeading`);
- on a clean stop the leader releases the Lease (holder "", duration 1 s: client-go's
  `ReleaseOnCancel`), so a standby takes over at its next try instead of after the lease
  duration.

Defaults: lease 10 s, renew deadline 7 s, retry 2 s. A standby takes over a leader that
died without releasing within lease + 2 retry periods of the leader's last renew
(at most 14 s: it saw the renew at most one retry period late, and tries once per retry
period). `NamespaceClaims` puts the same kind of Lease in every served namespace, held
by the release rather than the pod, so that a second release refuses to serve a
namespace another one serves (that namespace only: the claims live in tenants'
namespaces, where a tenant may forge one).

The election decides who drives evals; it is not what makes counts exact (a Lease cannot
fence a write already in flight): every status write is conditional on the eval's
resourceVersion and every pod name is fixed, so even two leaders at once could not count
a trial twice (docs/operator.md).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from passhat.operator.kube import ApiError, Conflict

__all__ = [
    "CLAIM_LEASE",
    "LeaseApi",
    "LeaseElector",
    "LeaseTimings",
    "NamespaceClaims",
    "lease_holder",
    "micro_time",
]

logger = logging.getLogger(__name__)

# The Lease in each served namespace naming the release that serves it.
CLAIM_LEASE = "passhat-operator"
# client-go's JitterFactor: a retry waits retry_period * (1 + up to 0.2).
_JITTER = 0.2


@dataclass(frozen=True)
class LeaseTimings:
    """client-go's three durations (seconds). Raises ValueError unless
    lease_duration > renew_deadline > (1 + jitter) x retry_period > 0."""

    lease_duration_s: int = 10
    renew_deadline_s: float = 7.0
    retry_period_s: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration_s > self.renew_deadline_s:
            raise ValueError(
                f"lease duration {self.lease_duration_s}s must be longer than the renew "
                f"deadline {self.renew_deadline_s:g}s (the leader must stop before others "
                "may take over)"
            )
        if not self.renew_deadline_s > (1 + _JITTER) * self.retry_period_s > 0:
            raise ValueError(
                f"renew deadline {self.renew_deadline_s:g}s must be longer than 1.2 x the "
                f"retry period {self.retry_period_s:g}s (at least one retry before it)"
            )

    @property
    def takeover_bound_s(self) -> float:
        """The longest a standby waits after a dead leader's last renew."""
        return self.lease_duration_s + 2 * (1 + _JITTER) * self.retry_period_s


class LeaseApi(Protocol):
    """The three Lease calls the election makes (`kube.Kube` implements them)."""

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Lease; None when it does not exist."""
        ...

    def create_lease(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create it; Conflict when it exists already."""
        ...

    def update_lease(self, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Replace it (body carries metadata.resourceVersion); Conflict when stale."""
        ...


def micro_time(wall: float) -> str:
    """A MicroTime as the API server writes it."""
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_holder(lease: Mapping[str, Any] | None) -> str:
    """Who holds a Lease ("" when nobody does or it does not exist)."""
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


class LeaseElector:
    """One candidate for one Lease: `try_acquire_or_renew()` is client-go's step of the
    same name; `run()` loops over it in a thread."""

    def __init__(
        self,
        api: LeaseApi,
        *,
        namespace: str,
        name: str,
        identity: str,
        timings: LeaseTimings | None = None,
        labels: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if not identity:
            raise ValueError("a lease candidate needs an identity")
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.timings = timings or LeaseTimings()
        self._labels = dict(labels or {})
        self._clock = clock
        self._wall = wall
        # The last record seen and when (our clock) it was first seen as it is.
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        # When (our clock) the request of our last successful acquire or renew was sent.
        self._renewed_at: float | None = None
        self._led = False
        self._lock = threading.Lock()

    @property
    def holder(self) -> str:
        """The holder in the record last seen ("" for none)."""
        return str((self._observed or {}).get("holderIdentity") or "")

    @property
    def observed(self) -> dict[str, Any] | None:
        """The Lease's spec as last seen."""
        return dict(self._observed) if self._observed is not None else None

    def leading(self) -> bool:
        """Whether this candidate holds the Lease and renewed it within the renew deadline
        (false from the instant the deadline passes, whatever a call in flight returns)."""
        with self._lock:
            renewed = self._renewed_at
        return renewed is not None and self._clock() - renewed <= self.timings.renew_deadline_s

    def lost(self) -> bool:
        """Whether this candidate led and no longer does (its renew deadline passed, or it
        saw another holder): its work must stop now."""
        return self._led and not self.leading()

    def held_by_other(self) -> bool:
        """Whether another candidate held the Lease, unexpired, at the last try."""
        record = self._observed or {}
        holder = str(record.get("holderIdentity") or "")
        duration = float(record.get("leaseDurationSeconds") or 0)
        return (
            bool(holder)
            and holder != self.identity
            and (self._observed_at + duration > self._clock())
        )

    def try_acquire_or_renew(self) -> bool:
        """One step: take the Lease if free or expired, renew it if ours. True when this
        candidate holds it now. Raises ApiError when the API server does not answer."""
        sent = self._clock()
        now = micro_time(self._wall())
        lease = self.api.get_lease(self.namespace, self.name)
        if lease is None:
            spec = self._spec(now, acquired=now, transitions=0)
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace, **self._meta()},
                "spec": spec,
            }
            try:
                self.api.create_lease(self.namespace, body)
            except Conflict:
                return False
            self._succeeded(spec, sent)
            return True
        record = dict(lease.get("spec") or {})
        if record != self._observed:
            self._observed, self._observed_at = record, self._clock()
        holder = str(record.get("holderIdentity") or "")
        if self.held_by_other():
            return False
        if holder == self.identity:
            acquired = str(record.get("acquireTime") or now)
            transitions = int(record.get("leaseTransitions") or 0)
        else:
            acquired, transitions = now, int(record.get("leaseTransitions") or 0) + 1
        spec = self._spec(now, acquired=acquired, transitions=transitions)
        meta = dict(lease.get("metadata") or {})
        body = {
            **lease,
            "metadata": {**meta, "labels": {**(meta.get("labels") or {}), **self._labels}},
            "spec": spec,
        }
        try:
            self.api.update_lease(self.namespace, self.name, body)
        except Conflict:
            return False
        self._succeeded(spec, sent)
        return True

    def release(self) -> bool:
        """Give the Lease up if this candidate holds it (client-go's ReleaseOnCancel):
        holder "" and a duration of 1 s, so a standby takes it at its next try. True when
        released; never raises."""
        with self._lock:
            self._renewed_at = None
        try:
            lease = self.api.get_lease(self.namespace, self.name)
            if lease is None or lease_holder(lease) != self.identity:
                return False
            now = micro_time(self._wall())
            spec = {
                **(lease.get("spec") or {}),
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "renewTime": now,
                "acquireTime": now,
            }
            self.api.update_lease(self.namespace, self.name, {**lease, "spec": spec})
        except ApiError as err:
            logger.warning("could not release Lease %s/%s: %s", self.namespace, self.name, err)
            return False
        return True

    def run(
        self,
        stop: threading.Event,
        *,
        on_started: Callable[[], None],
        on_stopped: Callable[[], None],
    ) -> None:
        """Try until this candidate leads (or `stop`), call `on_started`, renew until the
        renew deadline passes without a renew or `stop` is set, then call `on_stopped`
        (not after `stop`: the caller releases)."""
        while not stop.is_set():
            if self.step():
                break
            stop.wait(self._jittered())
        else:
            return
        logger.info("leading: Lease %s/%s held by %s", self.namespace, self.name, self.identity)
        on_started()
        while not stop.wait(self.timings.retry_period_s):
            self.step()
            if self.lost():
                logger.error(
                    "stopped leading: Lease %s/%s %s",
                    self.namespace,
                    self.name,
                    f"taken by {self.holder}"
                    if self.held_by_other()
                    else f"not renewed for {self.timings.renew_deadline_s:g}s",
                )
                on_stopped()
                return

    def step(self) -> bool:
        """`try_acquire_or_renew` that never raises (an API error is logged: not held now),
        and forgets the lead at once when another holder is seen (the drain took it)."""
        try:
            ok = self.try_acquire_or_renew()
        except ApiError as err:
            logger.warning("Lease %s/%s: %s", self.namespace, self.name, err)
            return False
        if not ok:
            # NB: once another holder is seen, this candidate no longer leads at all
            with self._lock:
                if self.held_by_other():
                    self._renewed_at = None
        return ok

    def _jittered(self) -> float:
        return self.timings.retry_period_s * (1 + _JITTER * random.random())

    def _spec(self, now: str, *, acquired: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.timings.lease_duration_s),
            "acquireTime": acquired,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def _meta(self) -> dict[str, Any]:
        return {"labels": dict(self._labels)} if self._labels else {}

    def _succeeded(self, spec: dict[str, Any], sent: float) -> None:
        self._observed, self._observed_at = spec, self._clock()
        with self._lock:
            # NB: measured from before the request went out: the renew deadline is never
            # later than the other candidates' view of the lease
            self._renewed_at = sent
            self._led = True


class NamespaceClaims:
    """The Lease `passhat-operator` in each served namespace, held by one release (its
    identity is the release's, shared by its replicas): a second release that would serve
    a namespace finds it held and does not serve *that namespace* (the refusal says by
    whom) instead of double-driving its evals. Namespaced mode claims its namespaces up
    front; cluster-wide mode claims each namespace as it first serves an eval there
    (`claim`); an eval's daemon asks `refusal` before each pass (no API call).

    NB: a claim is a Lease in a tenant's namespace, which whoever may write Leases there
    can forge (docs/security.md): a refused claim stops serving that namespace only, never
    the operator, so a forged claim costs its forger their own namespace and nothing else.
    """

    def __init__(
        self,
        api: LeaseApi,
        *,
        namespaces: Sequence[str],
        release: str,
        timings: LeaseTimings | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._api = api
        self._release = release
        self._timings = timings
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._electors = [self._elector(namespace) for namespace in namespaces]

    def _elector(self, namespace: str) -> LeaseElector:
        return LeaseElector(
            self._api,
            namespace=namespace,
            name=CLAIM_LEASE,
            identity=self._release,
            timings=self._timings,
            labels={"app.kubernetes.io/managed-by": "passhat-operator"},
            clock=self._clock,
            wall=self._wall,
        )

    def claim(self, namespace: str) -> str | None:
        """Claim one more namespace now (cluster-wide mode: each namespace where an eval
        is to be served), kept and renewed by `acquire()` from then on; its refusal, or
        None when this release may serve it (an API error is not a refusal)."""
        with self._lock:
            elector = next((e for e in self._electors if e.namespace == namespace), None)
            if elector is None:
                elector = self._elector(namespace)
                self._electors.append(elector)
        if elector.leading():
            return None  # NB: renewed moments ago: no API call per eval daemon that starts
        try:
            if elector.try_acquire_or_renew() or not elector.held_by_other():
                return None
        except ApiError as err:
            logger.warning("cannot claim namespace %s: %s", namespace, err)
            return None
        return self._refusal(elector)

    def acquire(self) -> list[str]:
        """Claim (or renew the claim on) every namespace; the refusals, one line each
        (empty: no other release holds any of them). A namespace the API server does not
        let us claim now (being deleted, its Role gone, the API server away) is not a
        refusal: logged, and tried again next time."""
        refusals = []
        with self._lock:
            electors = list(self._electors)
        for elector in electors:
            try:
                held = elector.try_acquire_or_renew()
            except ApiError as err:
                logger.warning("cannot claim namespace %s: %s", elector.namespace, err)
                continue
            if not held and elector.held_by_other():
                refusals.append(self._refusal(elector))
        return refusals

    def refusal(self, namespace: str) -> str | None:
        """Why this release may not serve `namespace` now, as of the last try (no API
        call): another holder's unexpired claim; None when it holds the claim, never tried
        it, or could not reach the API server (an API error is not a refusal)."""
        with self._lock:
            elector = next((e for e in self._electors if e.namespace == namespace), None)
        if elector is None or not elector.held_by_other():
            return None
        return self._refusal(elector)

    def release(self) -> None:
        """Give every claim up (the release stops serving; `passhat operator drain`)."""
        with self._lock:
            electors = list(self._electors)
        for elector in electors:
            elector.release()

    @staticmethod
    def _refusal(elector: LeaseElector) -> str:
        return (
            f"namespace {elector.namespace} is served by another passhat release "
            f"({elector.holder or 'unknown'}: Lease {elector.namespace}/{CLAIM_LEASE}); "
            f"this one ({elector.identity}) will not serve it: uninstall one of them or "
            "give them different watchNamespaces"
        )
