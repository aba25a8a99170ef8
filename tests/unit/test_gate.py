"""Release gates: the lowerBound statistic in the status, and the exit code of an eval
object read from its conditions (never its phase string)."""

from __future__ import annotations

from typing import Any

import pytest

from passhat.api import conditions as cond
from passhat.api.errors import UsageError
from passhat.api.gate import (
    EXIT_GATE_FAILED,
    EXIT_NOT_FINISHED,
    EXIT_PASSED,
    EXIT_USAGE,
    evaluate_gate,
    exit_code_of_eval,
    is_settled,
    parse_gate,
)
from passhat.api.load import parse_spec
from passhat.api.status import EvalStatus
from passhat.operator.status import StatusInputs, build_status, condition_status
from passhat.stats import TaskTally
from passhat.trials.ledger import SlotLedger
from passhat.trials.outcomes import Outcome, Verdict

TEMPLATE = {"spec": {"containers": [{"name": "agent", "image": "x"}]}}
# nine tasks pass both trials, one fails both: pass^2 = 0.9 exactly
TASKS = [f"t{i}" for i in range(10)]


def _status(**gate: Any) -> dict[str, Any]:
    spec = parse_spec(
        {
            "tasks": [{"id": t} for t in TASKS],
            "trials": 2,
            "ks": [1, 2],
            "trial": {"template": TEMPLATE},
            "gate": {"metric": "passHatK", "k": 2, "min": 0.9, **gate},
        }
    )
    ledger = SlotLedger(len(TASKS), 2)
    for task in range(len(TASKS)):
        outcome = Outcome.FAIL if task == 9 else Outcome.PASS
        for trial in range(2):
            ledger.record(task, trial, 0, Verdict(outcome, "exit_code"), final=True)
    inputs = StatusInputs(
        spec=spec, task_ids=TASKS, ledger=ledger, running=0, generation=1, previous={}, now=1.0
    )
    return build_status(inputs)


def test_lower_bound_gate_fails_where_the_estimate_passes() -> None:
    """Same ledger: the estimate (0.9) meets min 0.9, the bound of its interval does not."""
    estimate = _status()
    assert condition_status(estimate, cond.GATE_PASSED) == "True"
    assert estimate["gate"]["value"] == estimate["gate"]["estimate"] == 0.9
    bound = _status(statistic="lowerBound")
    assert condition_status(bound, cond.GATE_PASSED) == "False"
    gate = bound["gate"]
    assert gate["statistic"] == "lowerBound" and gate["confidence"] == 0.95
    assert gate["estimate"] == 0.9 and gate["value"] == gate["lowerBound"] < 0.9
    (row_2,) = [row for row in bound["summary"]["byK"] if row["k"] == 2]
    assert row_2["passHatKInterval"][0] == gate["lowerBound"]
    message = cond.find_condition(bound["conditions"], cond.GATE_PASSED)
    assert message is not None and "lower bound" in message["message"]
    # NB: seeded: a status rewritten from the same ledger is the same, byte for byte
    assert _status(statistic="lowerBound") == bound
    EvalStatus.model_validate(bound)


def test_status_intervals_are_bounded_and_one_mean_figure() -> None:
    """Each byK row has its three intervals; the mean's is the same figure in every row."""
    status = _status(confidence=0.8)
    rows = status["summary"]["byK"]
    assert status["summary"]["intervalLevel"] == 0.8
    assert rows[0]["meanPassRateInterval"] == rows[1]["meanPassRateInterval"]
    for row in rows:
        for name in ("meanPassRate", "passAtK", "passHatK"):
            low, high = row[f"{name}Interval"]
            assert low <= row[name] <= high


def test_a_gate_with_nothing_scored_fails() -> None:
    """No task with k graded trials: the gate fails, whatever min (0 included)."""
    gate = parse_gate("passHatK@3>=0")
    verdict = evaluate_gate(gate, [TaskTally("a", 2, 0, 0)])
    assert verdict.tasks_scored == 0 and not verdict.passed


def test_parse_gate_names_the_expression() -> None:
    """A gate expression that does not parse is a UsageError quoting it."""
    assert parse_gate(" passAtK @ 3 >= .5 ").min == 0.5
    with pytest.raises(UsageError, match=r"--gate 'pass\^k>=1': expected METRIC@K>=MIN"):
        parse_gate("pass^k>=1")
    with pytest.raises(UsageError, match="confidence"):
        parse_gate("passHatK@1>=0.5", statistic="lowerBound", confidence=0.1)


def _eval(*conditions: tuple[str, str, str], generation: int = 1, gate: bool = True) -> Any:
    return {
        "metadata": {"generation": generation},
        "spec": {"gate": {"metric": "passHatK", "k": 1, "min": 0.5}} if gate else {},
        "status": {
            "conditions": [
                {"type": t, "status": s, "reason": r, "observedGeneration": 1}
                for t, s, r in conditions
            ]
        },
    }


RUNNING = (cond.COMPLETE, "False", cond.REASON_RUNNING)
COMPLETE = (cond.COMPLETE, "True", cond.REASON_ALL_FINAL)
MET = (cond.GATE_PASSED, "True", cond.REASON_GATE_MET)
MISSED = (cond.GATE_PASSED, "False", cond.REASON_GATE_MISSED)


@pytest.mark.parametrize(
    ("obj", "code", "settled"),
    [
        pytest.param(_eval(), EXIT_NOT_FINISHED, False, id="no-status-yet"),
        pytest.param(_eval(RUNNING), EXIT_NOT_FINISHED, False, id="running"),
        pytest.param(_eval(COMPLETE, MET), EXIT_PASSED, True, id="gate-passed"),
        pytest.param(_eval(COMPLETE, gate=False), EXIT_PASSED, True, id="no-gate"),
        pytest.param(_eval(COMPLETE, MISSED), EXIT_GATE_FAILED, True, id="gate-failed"),
        pytest.param(_eval(RUNNING, MISSED), EXIT_GATE_FAILED, True, id="failed-before-end"),
        pytest.param(
            _eval(RUNNING, (cond.FAILED, "True", cond.REASON_DEADLINE_EXCEEDED)),
            EXIT_NOT_FINISHED,
            True,
            id="deadline-exceeded",
        ),
        pytest.param(
            _eval((cond.CONFIG_ERROR, "True", cond.REASON_INVALID_SPEC)),
            EXIT_USAGE,
            True,
            id="config-error",
        ),
        pytest.param(
            _eval((cond.CONFIG_ERROR, "True", cond.REASON_TASKS_UNAVAILABLE)),
            EXIT_NOT_FINISHED,
            False,
            id="waits-for-its-tasks",
        ),
        pytest.param(
            _eval(COMPLETE, MET, generation=2), EXIT_NOT_FINISHED, False, id="stale-generation"
        ),
        pytest.param(_eval(COMPLETE), EXIT_NOT_FINISHED, False, id="gate-not-yet-decided"),
    ],
)
def test_exit_code_of_an_eval_follows_its_conditions(obj: Any, code: int, settled: bool) -> None:
    """Conditions decide (the phase is not read for the code): 0, 1, 2 or 3, and whether
    waiting can help (phase Failed: always settled, whatever condition stopped it)."""
    for phase in ("Succeeded", "Failed", "Complete", None):
        obj["status"]["phase"] = phase
        assert exit_code_of_eval(obj) == code
        assert is_settled(obj) is (settled or phase == "Failed")


def test_an_eval_stopped_by_its_budget_is_not_waited_for() -> None:
    """BudgetExhausted=True without GatePassed=False (no gate): 3, settled in any phase;
    an unknown stopping condition is settled by phase Failed alone."""
    obj = _eval(RUNNING, ("BudgetExhausted", "True", "MaxCostReached"))
    assert exit_code_of_eval(obj) == EXIT_NOT_FINISHED and is_settled(obj)
    other = _eval(RUNNING, ("SomethingNew", "True", "Stopped"))
    assert not is_settled(other)
    other["status"]["phase"] = "Failed"
    assert exit_code_of_eval(other) == EXIT_NOT_FINISHED and is_settled(other)


def test_a_mean_at_the_bar_meets_it_despite_float_rounding() -> None:
    """Three tasks passing 7 of 10 average to 0.6999999999999998 in floats: min 0.7 is met
    (without the allowance the gate failed at exactly its bar); 0.7000001 is not."""
    tallies = [TaskTally(t, 7, 3, 0) for t in "abc"]
    assert evaluate_gate(parse_gate("meanPassRate@1>=0.7"), tallies).passed
    assert not evaluate_gate(parse_gate("meanPassRate@1>=0.7000001"), tallies).passed
