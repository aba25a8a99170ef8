"""Status stays bounded: 10,000 tasks x 10 trials fit well under 256 KiB."""

from __future__ import annotations

import json
import random

from passhat.api.status import EvalStatus, build_summary
from passhat.stats import summarize_many
from passhat.trials import Outcome, RetryPlan, SlotLedger, Verdict

N_TASKS, TRIALS = 10_000, 10
BUDGET = 256 * 1024


def realistic_ledger(seed: int) -> SlotLedger:
    """Tasks of varied difficulty, ~5% infra errors with retries, some slots exhausted."""
    rnd = random.Random(seed)
    plan = RetryPlan(infra_errors=3)
    ledger = SlotLedger(N_TASKS, TRIALS)
    for task in range(N_TASKS):
        p = rnd.random()
        for trial in range(TRIALS):
            attempt = 0
            while True:
                if rnd.random() < 0.05:
                    verdict = Verdict(Outcome.INFRA_ERROR, "evicted")
                else:
                    outcome = Outcome.PASS if rnd.random() < p else Outcome.FAIL
                    verdict = Verdict(outcome, "exit_code")
                final = plan.is_final(verdict, attempt)
                ledger.record(task, trial, attempt, verdict, final=final)
                if final:
                    break
                attempt += 1
    return ledger


def test_full_status_of_10000_by_10_is_under_256_kib() -> None:
    """A complete status (ledger, summary, capped lists, conditions) stays under 256 KiB."""
    ledger = realistic_ledger(seed=7)
    task_ids = [
        f"suite-{i:05d}-refund-over-limit-with-a-long-descriptive-name" for i in range(N_TASKS)
    ]
    tallies = ledger.tallies(task_ids)
    by_k = summarize_many(tallies, [1, 3, 10])
    conditions = [
        {
            "type": kind,
            "status": "True",
            "reason": "SomeReason",
            "message": "m" * 200,
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "observedGeneration": 1,
        }
        for kind in ("Complete", "GatePassed", "ConfigError", "InfraErrorsHigh")
    ]
    status = EvalStatus.model_validate(
        {
            "phase": "Succeeded",
            "observedGeneration": 1,
            "startTime": "2026-01-01T00:00:00Z",
            "completionTime": "2026-01-01T01:00:00Z",
            "progress": {
                "done": ledger.done,
                "running": 0,
                "waiting": 0,
                "pending": 0,
                "retries": ledger.retries,
            },
            "summary": build_summary(
                by_k, headline_k=10, infra_error_rate=by_k[0].infra_error_rate
            ),
            "flaky": by_k[0].flaky[:50],
            "flakyCount": len(by_k[0].flaky),
            "needMoreTrials": by_k[-1].need_more_trials[:50],
            "needMoreTrialsCount": len(by_k[-1].need_more_trials),
            "gate": {"metric": "passHatK", "k": 3, "min": 0.5, "value": 0.6, "passed": True},
            "conditions": conditions,
            "ledger": ledger.pack(),
        }
    )
    size = len(json.dumps(status.model_dump(mode="json", by_alias=True, exclude_none=True)))
    assert ledger.complete
    assert size < BUDGET, f"status is {size} bytes"
    assert SlotLedger.unpack(status.ledger or "") == ledger


def test_worst_case_ledger_is_under_budget() -> None:
    """Even slots with random states and attempt counts pack far below the budget."""
    rnd = random.Random(3)
    ledger = SlotLedger(N_TASKS, TRIALS)
    ledger._states = bytearray(rnd.randrange(4) for _ in range(N_TASKS * TRIALS))
    ledger._attempts = bytearray(rnd.randrange(1, 5) for _ in range(N_TASKS * TRIALS))
    assert len(ledger.pack()) < BUDGET // 2


def test_usage_of_1000_tasks_with_long_ids_stays_small() -> None:
    """status.usage at its per-task bound (1,000 tasks, every figure set, long ids) is
    under 192 KiB and validates; past the bound it is the totals only."""
    from passhat.trials.usage import MAX_USAGE_TASKS, Resources, Spend, UsageSummary

    usage = UsageSummary()
    for index in range(MAX_USAGE_TASKS):
        task = f"suite-{index:05d}-refund-over-limit-with-a-long-descriptive-name"
        for _ in range(10):
            spend = Spend(123_456, 7_890, 0.123456, {"tool_calls": 17.0})
            usage.add(task, spend, Resources(512 * 2**20, 12.345, "cgroup"), invalid=False)
    status = usage.as_status(n_tasks=MAX_USAGE_TASKS)
    EvalStatus.model_validate({"usage": status})
    assert len(json.dumps(status)) < 192 * 1024
    usage.add("one-more", Spend(cost_usd=1.0), None, invalid=False)
    assert "byTask" not in usage.as_status(n_tasks=MAX_USAGE_TASKS + 1)
