"""`kubectl describe ceval` tells the story: started, retry bursts with counts, completed,
the gate's verdict; one event per burst, not one per pod."""

from __future__ import annotations

import re

from passhat.operator import events
from passhat.trials.ledger import SlotLedger
from tests.unit.test_operator_loop import N_TASKS, TRIALS, Harness


def _burst_size(message: str) -> int:
    found = re.match(r"(\d+) trial (attempt|attempts|slot|slots) ", message)
    assert found, message
    return int(found.group(1))


def test_a_run_posts_start_bursts_completion_and_gate() -> None:
    """Started first; the TrialRetried bursts count every retried attempt once, in fewer
    events than attempts, each with the running total; Completed and the gate last."""
    harness = Harness(3)
    posted = harness.collect_events(started=True)
    harness.run()
    ledger = SlotLedger.unpack(harness.status["ledger"])
    reasons = [event.reason for event in posted]
    assert reasons[0] == events.STARTED
    assert posted[0].message.startswith(
        f"started {N_TASKS} tasks x {TRIALS} trials = {N_TASKS * TRIALS} trial slots"
    )
    assert reasons.count(events.STARTED) == 1
    assert reasons[-2:] == [events.COMPLETED, events.GATE_PASSED]
    bursts = [event for event in posted if event.reason == events.TRIAL_RETRIED]
    assert ledger.retries > 0
    assert sum(_burst_size(event.message) for event in bursts) == ledger.retries
    assert len(bursts) < ledger.retries
    totals = [int(re.findall(r"(\d+) retr(?:y|ies) so far", event.message)[0]) for event in bursts]
    assert totals == sorted(totals) and totals[-1] == ledger.retries
    exhausted = [event for event in posted if event.reason == events.RETRIES_EXHAUSTED]
    slots_exhausted = sum(
        ledger.state(task, trial).name == "INFRA_ERROR"
        for task in range(N_TASKS)
        for trial in range(TRIALS)
    )
    assert sum(_burst_size(event.message) for event in exhausted) == slots_exhausted
