"""Retry backoff and the create backoff survive an operator restart or failover (#24):
they are written into status.timing with the ledger, and a new loop waits them out instead
of retrying everything at once."""

from __future__ import annotations

from passhat.api import conditions as cond
from passhat.api.status import MAX_RETRY_WAITS
from passhat.operator.config import OperatorConfig
from passhat.operator.loop import PassState
from passhat.operator.pacing import CreatePacer, Refusal
from passhat.operator.timing import restore, timing_status
from tests.unit.operator_fake import terminated
from tests.unit.test_operator_loop import Harness, spec
from tests.unit.test_operator_pacing import QUOTA

BACKOFF = 30


def infra_error(harness: Harness, name: str) -> None:
    """End pod `name` with exit 75 (an infra error the example grading retries)."""
    now = harness.clock.now
    status = harness.api.pods[name]["status"]
    status["phase"] = "Failed"
    status["containerStatuses"] = [terminated(75, reason="Error", now=now, start=now - 1)]


def one_slot_with_backoff() -> Harness:
    body = spec(
        tasks=[{"id": "t0"}],
        trials=1,
        ks=[1],
        retry={"infraErrors": 2, "backoffSeconds": BACKOFF},
        grading={"exitCodes": {"pass": [0], "fail": [1], "infraError": [75]}},
    )
    body.pop("gate")
    return Harness(3, body=body)


def test_a_new_leader_waits_out_the_retry_backoff() -> None:
    """Attempt 0 ends as an infra error; a fresh loop (a new leader) creates attempt 1 only
    after the 30 s backoff, not at its first pass."""
    harness = one_slot_with_backoff()
    assert harness.loop.run_pass().state is PassState.CONTINUE
    (first,) = harness.api.pods
    infra_error(harness, first)
    harness.loop.run_pass()
    timing = harness.status["timing"]
    assert [(r["task"], r["trial"]) for r in timing["retries"]] == [(0, 0)]
    harness.loop = harness.new_loop()  # NB: the old leader is gone, and its memory
    harness.clock.now += BACKOFF - 5
    harness.loop.run_pass()
    assert harness.api.created_names == [first]
    harness.clock.now += 6
    harness.loop.run_pass()
    assert len(harness.api.created_names) == 2
    assert harness.api.created_names[1].endswith("-a1")


def test_without_status_timing_a_new_loop_would_retry_at_once() -> None:
    """The same with the timing dropped from status: the retry is created at the first
    pass (what happened before #24)."""
    harness = one_slot_with_backoff()
    harness.loop.run_pass()
    (first,) = harness.api.pods
    infra_error(harness, first)
    harness.loop.run_pass()
    del harness.api.evals["demo"]["status"]["timing"]
    harness.loop = harness.new_loop()
    harness.clock.now += 1
    harness.loop.run_pass()
    assert len(harness.api.created_names) == 2


def test_the_create_backoff_is_restored() -> None:
    """A pacer backing off from a quota refusal is written into status; a new pacer
    restored from it refuses creates until then, and an expired one is not restored."""
    config = OperatorConfig()
    now = 1_700_000_000.0
    pacer = CreatePacer(config=config, clock=lambda: now)
    pacer.refused(Refusal(cond.REASON_QUOTA_EXCEEDED, QUOTA), created_first=False)
    pacer.refused(Refusal(cond.REASON_QUOTA_EXCEEDED, QUOTA), created_first=False)
    timing = timing_status({}, pacer, now=now)
    assert timing is not None and timing["createBackoff"]["refusals"] == 2
    status = {"timing": timing}
    fresh = CreatePacer(config=config, clock=lambda: now + 1)
    assert restore(status, fresh, now=now + 1) == {}
    assert fresh.refusal is not None and fresh.refusals == 2
    assert not fresh.may_create(pods_ended=False)
    late = CreatePacer(config=config, clock=lambda: now + 3)
    restore(status, late, now=now + 3)
    assert late.refusal is None and late.may_create(pods_ended=False)


def test_the_retry_waits_in_status_are_bounded() -> None:
    """At most MAX_RETRY_WAITS waits, the longest ones; past ones are dropped."""
    now = 1000.0
    waits = {(task, 0): now + task for task in range(MAX_RETRY_WAITS + 50)}
    waits[(9999, 0)] = now - 1
    timing = timing_status(waits, CreatePacer(), now=now)
    assert timing is not None
    tasks = sorted(r["task"] for r in timing["retries"])
    assert tasks == list(range(50, MAX_RETRY_WAITS + 50))
    assert restore({"timing": timing}, CreatePacer(), now=now + 100) == {
        (task, 0): float(now + task) for task in range(101, MAX_RETRY_WAITS + 50)
    }
