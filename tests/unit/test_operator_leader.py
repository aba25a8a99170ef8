"""The Lease elector has client-go's semantics: one leader, expiry measured on the
candidate's own clock, optimistic concurrency, a renew deadline before the lease expires,
release on a clean stop, and namespace claims that refuse a second release."""

from __future__ import annotations

import threading
import time

import pytest

from passhat.operator.leader import (
    CLAIM_LEASE,
    LeaseElector,
    LeaseTimings,
    NamespaceClaims,
    lease_holder,
)
from tests.unit.lease_fake import Clock, Leases

TIMINGS = LeaseTimings(lease_duration_s=10, renew_deadline_s=7.0, retry_period_s=2.0)


def elector(api: Leases, identity: str, clock: Clock, wall: Clock | None = None) -> LeaseElector:
    return LeaseElector(
        api,
        namespace="sys",
        name="op",
        identity=identity,
        timings=TIMINGS,
        clock=clock,
        wall=wall or clock,
    )


def test_one_candidate_leads_the_other_stands_by() -> None:
    """The first candidate creates the Lease and leads; the second sees it held."""
    api, clock = Leases(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    assert a.try_acquire_or_renew() and a.leading()
    assert not b.try_acquire_or_renew() and not b.leading()
    assert b.held_by_other() and b.holder == "a"
    spec = api.items[("sys", "op")]["spec"]
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 10
    assert spec["leaseTransitions"] == 0


def test_expiry_is_measured_on_the_standbys_clock_from_when_it_saw_the_record() -> None:
    """A record renewed long ago by wall clock (a skewed node) still waits a full lease
    duration from when the standby first saw it; then the standby takes over."""
    api, clock = Leases(), Clock()
    skewed = Clock(start=clock.now - 3600)
    a = elector(api, "a", clock, wall=skewed)
    assert a.try_acquire_or_renew()
    b = elector(api, "b", clock)
    clock.now += 1
    assert not b.try_acquire_or_renew()  # first seen now
    clock.now += 9.9
    assert not b.try_acquire_or_renew()
    clock.now += 0.2
    assert b.try_acquire_or_renew() and b.holder == "b"
    assert api.items[("sys", "op")]["spec"]["leaseTransitions"] == 1


def test_a_renewal_keeps_the_acquire_time_and_resets_the_standbys_wait() -> None:
    """Each renew changes the record, so a standby's wait starts over."""
    api, clock = Leases(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    assert a.try_acquire_or_renew()
    acquired = api.items[("sys", "op")]["spec"]["acquireTime"]
    for _ in range(10):
        clock.now += 2
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()
    spec = api.items[("sys", "op")]["spec"]
    assert spec["acquireTime"] == acquired and spec["renewTime"] != acquired
    assert spec["leaseTransitions"] == 0


def test_the_leader_stops_before_anyone_may_take_over() -> None:
    """With the API server unreachable, the leader counts as lost at the renew deadline
    (7 s), and a standby that saw its last renew cannot take the Lease before 10 s."""
    api, clock = Leases(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    api.down = True
    clock.now += 7.0
    assert a.leading() and not a.lost()
    clock.now += 0.01
    assert a.lost() and not a.leading()
    api.down = False
    clock.now = 1000.0 + 9.9
    assert not b.try_acquire_or_renew()
    clock.now = 1000.0 + 10.1
    assert b.try_acquire_or_renew()
    # NB: the old leader cannot come back by a late renew: the record is b's
    assert not a.try_acquire_or_renew() and a.holder == "b"


def test_only_one_of_two_racing_candidates_wins() -> None:
    """Both read an expired Lease; the first update wins, the second gets 409."""
    api, clock = Leases(), Clock()
    a, b, c = (elector(api, name, clock) for name in "abc")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew() and not c.try_acquire_or_renew()
    clock.now += 11
    api.between = lambda: c.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert lease_holder(api.items[("sys", "op")]) == "c"
    assert c.leading() and not b.leading()


def test_two_creates_at_once_make_one_leader() -> None:
    """With no Lease yet, the second create is a 409: not leading."""
    api, clock = Leases(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    api.between = lambda: a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.leading() and lease_holder(api.items[("sys", "op")]) == "a"


def test_release_lets_a_standby_take_over_at_its_next_try() -> None:
    """A clean stop writes holder "" and the standby takes the Lease at once."""
    api, clock = Leases(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.release()
    assert not a.leading()
    clock.now += 0.1
    assert b.try_acquire_or_renew()
    assert b.holder == "b" and not b.held_by_other()
    assert not a.release()  # NB: not the holder any more


def test_timings_must_leave_the_leader_time_to_stop() -> None:
    """lease > renew deadline > 1.2 x retry period, or ValueError."""
    with pytest.raises(ValueError, match="longer than the renew deadline"):
        LeaseTimings(lease_duration_s=7, renew_deadline_s=7.0, retry_period_s=2.0)
    with pytest.raises(ValueError, match="retry period"):
        LeaseTimings(lease_duration_s=10, renew_deadline_s=2.0, retry_period_s=2.0)
    assert LeaseTimings().takeover_bound_s == pytest.approx(14.8)


def test_a_second_release_is_refused_its_namespaces() -> None:
    """Claims are held per release: another pod of the same release renews them, another
    release is refused with a message naming the holder, until the claim expires."""
    api, clock = Leases(), Clock()

    def claims(release: str) -> NamespaceClaims:
        return NamespaceClaims(
            api, namespaces=["evals", "more"], release=release, timings=TIMINGS,
            clock=clock, wall=clock,
        )  # fmt: skip

    assert claims("sys/ph-a").acquire() == []
    assert claims("sys/ph-a").acquire() == []  # the standby replica of the same release
    refusals = claims("other/ph-b").acquire()
    assert len(refusals) == 2
    assert refusals[0].startswith(
        f"namespace evals is served by another passhat release (sys/ph-a: Lease "
        f"evals/{CLAIM_LEASE}); this one (other/ph-b) will not serve it"
    )
    first = claims("sys/ph-a")
    first.release()
    assert claims("other/ph-b").acquire() == []


def test_run_hands_over_to_the_standby_when_the_leader_dies() -> None:
    """Two candidates in threads with short timings: the one that leads is stopped without
    releasing (killed); the other leads within the lease duration plus two retries."""
    api = Leases()
    timings = LeaseTimings(lease_duration_s=1, renew_deadline_s=0.7, retry_period_s=0.1)
    started: dict[str, float] = {}
    stops = {name: threading.Event() for name in "ab"}

    def candidate(name: str) -> threading.Thread:
        one = LeaseElector(api, namespace="sys", name="op", identity=name, timings=timings)

        def lead() -> None:
            started[name] = time.monotonic()

        thread = threading.Thread(
            target=one.run, args=(stops[name],), kwargs={"on_started": lead, "on_stopped": lead}
        )
        thread.start()
        return thread

    threads = [candidate("a")]
    deadline = time.monotonic() + 5
    while "a" not in started and time.monotonic() < deadline:
        time.sleep(0.01)
    threads.append(candidate("b"))
    time.sleep(0.5)
    assert list(started) == ["a"]
    killed = time.monotonic()
    stops["a"].set()  # NB: no release: as a killed pod
    while "b" not in started and time.monotonic() < killed + 5:
        time.sleep(0.01)
    stops["b"].set()
    for thread in threads:
        thread.join(5)
    assert "b" in started
    assert started["b"] - killed <= timings.takeover_bound_s


def test_cluster_wide_mode_claims_each_namespace_as_it_serves_it() -> None:
    """A cluster-wide release claims a namespace when it first serves an eval there, renews
    it with the others, and is refused one a namespaced release holds."""
    api, clock = Leases(), Clock()
    namespaced = NamespaceClaims(
        api, namespaces=["team-a"], release="sys/ph-a", timings=TIMINGS, clock=clock, wall=clock
    )
    assert namespaced.acquire() == []
    wide = NamespaceClaims(
        api, namespaces=[], release="sys/ph-wide", timings=TIMINGS, clock=clock, wall=clock
    )
    assert wide.claim("team-b") is None
    refusal = wide.claim("team-a")
    assert refusal is not None and refusal.startswith(
        "namespace team-a is served by another passhat release (sys/ph-a: "
    )
    clock.now += 2
    assert wide.acquire() == [refusal]  # NB: still refused, team-b renewed
    assert api.items[("team-b", CLAIM_LEASE)]["spec"]["holderIdentity"] == "sys/ph-wide"
    api.down = True
    assert wide.claim("team-c") is None  # NB: an API error is no refusal
