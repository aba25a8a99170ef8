"""spec.budget on the operator's reconcile pass (in-memory API server): a reported cost
that reaches maxCostUSD stops the eval with nothing running and nothing recorded lost,
also across operator kills; pods waiting for Kueue's admission are deleted and not counted
as spent; maxAttempts never lets an attempt start past it."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from passhat.api import conditions as cond
from passhat.api.gate import EXIT_GATE_FAILED, EXIT_NOT_FINISHED, exit_code_of
from passhat.operator.pods import LABEL_RECORDED
from passhat.operator.status import condition_status
from passhat.trials.ledger import SlotLedger
from passhat.trials.usage import UsageSummary
from tests.unit.operator_fake import FakeKubelet
from tests.unit.test_operator_loop import Harness, script, spec
from tests.unit.test_operator_queueing import FakeKueue

COST = 0.25
_OUTCOMES = {0: "pass", 1: "fail", 75: "infra_error"}


class CostlyKubelet(FakeKubelet):
    """Each attempt's container ends with a result JSON reporting COST dollars and 10
    input tokens as its termination message (an OOM-killed one reports nothing)."""

    def step(self, *, share: float = 0.5) -> int:
        ended = super().step(share=share)
        for pod in self.api.pods.values():
            for item in pod["status"].get("containerStatuses") or []:
                end = item["state"].get("terminated")
                if end is None or "message" in end or end["exitCode"] not in _OUTCOMES:
                    continue
                end["message"] = json.dumps(
                    {
                        "outcome": _OUTCOMES[end["exitCode"]],
                        "cost_usd": COST,
                        "usage": {"input_tokens": 10, "output_tokens": 1},
                    }
                )
        return ended


def costly_harness(seed: int, **overrides: Any) -> Harness:
    harness = Harness(seed, body=spec(**overrides))
    harness.kubelet = CostlyKubelet(harness.api, script, rng=random.Random(seed + 2))
    return harness


def reporting_attempts(ledger: SlotLedger, harness: Harness) -> int:
    """Recorded attempts whose pod reported a cost (all but the OOM-killed ones)."""
    kept = [
        pod for pod in harness.api.pods.values() if pod["metadata"]["labels"].get(LABEL_RECORDED)
    ]
    return sum(
        1
        for pod in kept
        if any(
            "message" in (i["state"].get("terminated") or {})
            for i in pod["status"]["containerStatuses"]
        )
    )


def assert_nothing_runs(harness: Harness) -> None:
    """Every pod left is a finished, recorded attempt; none runs, waits or is unreleased."""
    assert harness.api.list_pods("ns", harness.ref.uid) == []
    for pod in harness.api.pods.values():
        assert pod["metadata"]["labels"].get(LABEL_RECORDED) == "true"
        assert pod["status"]["phase"] in ("Succeeded", "Failed")


@pytest.mark.parametrize("kill_chance", [0.0, 0.3])
def test_reported_cost_stops_the_eval_and_every_recorded_cost_counts_once(
    kill_chance: float,
) -> None:
    """maxCostUSD 2.0 at $0.25 an attempt: the eval stops (BudgetExhausted, phase Failed,
    Complete=False, GatePassed=False, exit 1), nothing runs afterwards, and status.usage
    is exactly the recorded attempts' reports, however often the operator died."""
    harness = costly_harness(11, budget={"maxCostUSD": 2.0})
    harness.run(kill_chance=kill_chance)
    status = harness.status
    assert status["phase"] == "Failed"
    assert condition_status(status, cond.BUDGET_EXHAUSTED) == "True"
    assert condition_status(status, cond.COMPLETE) == "False"
    assert condition_status(status, cond.GATE_PASSED) == "False"
    assert status["gate"]["passed"] is False and status["display"]["gate"] == "Missed"
    assert status["progress"]["running"] == 0
    assert exit_code_of(status, generation=1, has_gate=True) == EXIT_GATE_FAILED
    ledger = SlotLedger.unpack(status["ledger"])
    assert not ledger.complete
    usage = UsageSummary.from_status(status["usage"])
    reported = reporting_attempts(ledger, harness)
    assert usage.total.reported == reported
    assert usage.total.cost_usd == pytest.approx(COST * reported) and usage.total.cost_usd >= 2.0
    assert usage.total.input_tokens == 10 * reported
    assert usage.by_task is not None
    assert sum(t.cost_usd for t in usage.by_task.values()) == pytest.approx(COST * reported)
    assert_nothing_runs(harness)


def test_without_a_gate_a_budget_stop_is_not_finished() -> None:
    """No gate: BudgetExhausted leaves no verdict, exit 3 (docs/scoring.md#exit-codes)."""
    harness = costly_harness(12, budget={"maxCostUSD": 1.0}, gate=None)
    harness.run()
    status = harness.status
    assert condition_status(status, cond.BUDGET_EXHAUSTED) == "True"
    assert condition_status(status, cond.GATE_PASSED) is None
    assert exit_code_of(status, generation=1, has_gate=False) == EXIT_NOT_FINISHED


def test_pods_waiting_for_admission_are_deleted_and_not_counted_as_spent() -> None:
    """Quota 1, parallelism 4: when the cost is reached, the gated pods (never admitted,
    never run) are deleted, not recorded, and not in status.usage."""
    harness = costly_harness(13, budget={"maxCostUSD": 1.0}, queueName="team-a")
    kueue = FakeKueue(harness, quota=1)
    gated_seen: set[str] = set()

    def between() -> None:
        kueue.admit()
        gated_seen.update(pod["metadata"]["name"] for pod in kueue.gated())

    harness.run(between=between)
    status = harness.status
    assert condition_status(status, cond.BUDGET_EXHAUSTED) == "True"
    assert status["progress"]["waiting"] == 0 and status["progress"]["running"] == 0
    ledger = SlotLedger.unpack(status["ledger"])
    usage = UsageSummary.from_status(status["usage"])
    assert usage.total.reported == reporting_attempts(ledger, harness)
    # NB: some pod was still waiting when the budget ran out, and it is gone, unrecorded
    left_waiting = [name for name in gated_seen if name not in harness.api.pods]
    assert left_waiting, "the test should have caught a pod waiting for admission"
    assert not kueue.gated() and not kueue.admitted()
    assert_nothing_runs(harness)


def test_max_attempts_never_starts_an_attempt_past_it() -> None:
    """maxAttempts 7: 7 pods are created and all 7 are recorded (none stopped while
    running), then the eval stops with reason MaxAttemptsReached."""
    harness = costly_harness(14, budget={"maxAttempts": 7})
    harness.run()
    status = harness.status
    assert len(set(harness.api.created_names)) == 7
    assert SlotLedger.unpack(status["ledger"]).attempts_recorded == 7
    found = cond.find_condition(status["conditions"], cond.BUDGET_EXHAUSTED)
    assert found is not None and found["reason"] == cond.REASON_MAX_ATTEMPTS
    assert_nothing_runs(harness)


def test_a_budget_the_eval_fits_in_completes_it() -> None:
    """A budget never reached: Complete=True, no BudgetExhausted, usage summed."""
    harness = costly_harness(15, budget={"maxCostUSD": 1000.0})
    harness.run()
    status = harness.status
    assert condition_status(status, cond.COMPLETE) == "True"
    assert condition_status(status, cond.BUDGET_EXHAUSTED) is None
    assert status["usage"]["costUSD"] > 0


class BadCostKubelet(CostlyKubelet):
    """As CostlyKubelet, but task 0's attempts report a negative cost."""

    def step(self, *, share: float = 0.5) -> int:
        ended = super().step(share=share)
        for pod in self.api.pods.values():
            if pod["metadata"]["labels"].get("passhat.dev/task") != "0":
                continue
            for item in pod["status"].get("containerStatuses") or []:
                end = item["state"].get("terminated") or {}
                if "message" in end:
                    end["message"] = end["message"].replace(f'"cost_usd": {COST}', '"cost_usd": -1')
        return ended


def test_refused_spend_and_the_stop_are_told_in_events() -> None:
    """A negative cost: a TrialSpendInvalid event naming the task, trial, attempt and
    field; the attempt is recorded, its report counted as invalid, not as money; the stop
    posts BudgetExhausted (and no Completed)."""
    harness = costly_harness(16, budget={"maxCostUSD": 1.5})
    harness.kubelet = BadCostKubelet(harness.api, script, rng=random.Random(18))
    posted = harness.collect_events()
    harness.run()
    reasons = [event.reason for event in posted]
    assert "BudgetExhausted" in reasons and "Completed" not in reasons
    invalid = [event.message for event in posted if event.reason == "TrialSpendInvalid"]
    assert invalid and "task task-0 trial" in invalid[0]
    assert "result JSON cost_usd: -1 is negative" in invalid[0]
    usage = UsageSummary.from_status(harness.status["usage"])
    assert usage.total.invalid >= 1
    assert usage.by_task is not None and usage.by_task["task-0"].cost_usd == 0.0
