"""Property tests: the ledger is exactly-once under any interleaving and duplication."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from passhat.trials import Outcome, RetryPlan, SlotLedger, Verdict

PLAN = RetryPlan(infra_errors=2)
VERDICTS = {
    "pass": Verdict(Outcome.PASS, "exit_code"),
    "fail": Verdict(Outcome.FAIL, "exit_code"),
    "infra": Verdict(Outcome.INFRA_ERROR, "evicted"),
}
Call = tuple[int, int, int, Verdict, bool]


@st.composite
def histories(draw: st.DrawFn) -> tuple[int, int, list[list[Call]]]:
    """Per slot, the attempt sequence a run would record (infra errors, then a final one)."""
    n_tasks = draw(st.integers(1, 4))
    trials = draw(st.integers(1, 3))
    per_slot = []
    for task in range(n_tasks):
        for trial in range(trials):
            length = draw(st.integers(0, PLAN.max_attempts))
            calls: list[Call] = []
            for attempt in range(length):
                name = draw(st.sampled_from(sorted(VERDICTS)))
                verdict = VERDICTS[name]
                final = PLAN.is_final(verdict, attempt)
                calls.append((task, trial, attempt, verdict, final))
                if final:
                    break
            per_slot.append(calls)
    return n_tasks, trials, per_slot


def apply_in_order(n_tasks: int, trials: int, per_slot: list[list[Call]]) -> SlotLedger:
    ledger = SlotLedger(n_tasks, trials)
    for calls in per_slot:
        for task, trial, attempt, verdict, final in calls:
            assert ledger.record(task, trial, attempt, verdict, final=final)
    return ledger


@settings(max_examples=200, deadline=None, derandomize=True)
@given(histories(), st.randoms(use_true_random=False))
def test_any_interleaving_with_duplicates_gives_the_same_ledger(
    history: tuple[int, int, list[list[Call]]], rnd: random.Random
) -> None:
    """Slots interleaved at random and every call replayed later give the same final ledger."""
    n_tasks, trials, per_slot = history
    expected = apply_in_order(n_tasks, trials, per_slot)

    queues = [list(calls) for calls in per_slot]
    seen: list[Call] = []
    ledger = SlotLedger(n_tasks, trials)
    accepted = 0
    while any(queues):
        if seen and rnd.random() < 0.4:
            call = rnd.choice(seen)  # a replay: a pod folded again after a restart
        else:
            queue = rnd.choice([q for q in queues if q])
            call = queue.pop(0)
            seen.append(call)
            accepted += 1
            task, trial, attempt, verdict, final = call
            assert ledger.record(task, trial, attempt, verdict, final=final)
            continue
        task, trial, attempt, verdict, final = call
        assert not ledger.record(task, trial, attempt, verdict, final=final)
    assert ledger == expected
    assert accepted == sum(len(calls) for calls in per_slot)
    assert SlotLedger.unpack(ledger.pack()) == expected


@settings(max_examples=200, deadline=None, derandomize=True)
@given(histories())
def test_tallies_match_the_attempt_rows(history: tuple[int, int, list[list[Call]]]) -> None:
    """Tallies equal counting the recorded attempts as rows (what `passhat score` does)."""
    n_tasks, trials, per_slot = history
    ledger = apply_in_order(n_tasks, trials, per_slot)
    task_ids = [f"t{i}" for i in range(n_tasks)]
    for tally in ledger.tallies(task_ids):
        task = task_ids.index(tally.task_id)
        rows = [c for calls in per_slot for c in calls if c[0] == task]
        infra = sum(1 for c in rows if c[3].outcome is Outcome.INFRA_ERROR)
        passed = sum(1 for c in rows if c[3].outcome is Outcome.PASS)
        failed = sum(1 for c in rows if c[3].outcome is Outcome.FAIL)
        assert (tally.passed, tally.failed, tally.infra_errors) == (passed, failed, infra)
    assert ledger.done == sum(1 for calls in per_slot if calls and calls[-1][4])
    assert ledger.retries == sum(1 for calls in per_slot for c in calls if not c[4])
