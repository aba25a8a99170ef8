"""The status writer: bounded size, phases, conditions and the gate, from the ledger alone."""

from __future__ import annotations

import json
import random
from typing import Any

from passhat.api.load import parse_spec
from passhat.api.status import EvalStatus
from passhat.operator.status import (
    StatusInputs,
    build_status,
    condition_status,
    config_error_status,
    is_terminal,
)
from passhat.trials.ledger import SlotLedger
from passhat.trials.outcomes import Outcome, Verdict

NOW = 1_700_000_000.0
TEMPLATE = {"spec": {"containers": [{"name": "agent", "image": "x"}]}}


def make_spec(tasks: int, trials: int, **extra: Any) -> Any:
    """A spec with `tasks` tasks of long ids."""
    return parse_spec(
        {
            "tasks": [{"id": f"suite/category-{i % 97}/task-{i:06d}"} for i in range(tasks)],
            "trials": trials,
            "parallelism": 100,
            "trial": {"timeoutSeconds": 600, "template": TEMPLATE},
            **extra,
        }
    )


def fill(ledger: SlotLedger, rng: random.Random, share: float = 1.0) -> None:
    """Record random outcomes (with some retried infra errors) for `share` of the slots."""
    for task in range(ledger.n_tasks):
        rate = rng.random()
        for trial in range(ledger.trials):
            if rng.random() > share:
                continue
            attempt = 0
            while rng.random() < 0.1 and attempt < 3:
                ledger.record(task, trial, attempt, Verdict(Outcome.INFRA_ERROR, "x"), final=False)
                attempt += 1
            outcome = Outcome.PASS if rng.random() < rate else Outcome.FAIL
            ledger.record(task, trial, attempt, Verdict(outcome, "exit_code"), final=True)


def inputs(spec: Any, ledger: SlotLedger, **overrides: Any) -> StatusInputs:
    """StatusInputs for a pass at NOW."""
    values: dict[str, Any] = {
        "spec": spec,
        "task_ids": [task.id for task in spec.tasks],
        "ledger": ledger,
        "running": 0,
        "generation": 1,
        "previous": {},
        "now": NOW,
    }
    values.update(overrides)
    return StatusInputs(**values)


def test_status_of_10000_tasks_x_10_trials_stays_under_256_kib() -> None:
    """A finished 10,000 x 10 eval with many flaky tasks writes a status < 256 KiB."""
    spec = make_spec(10_000, 10, ks=[1, 2, 3, 5, 10])
    ledger = SlotLedger(10_000, 10)
    fill(ledger, random.Random(0))
    status = build_status(inputs(spec, ledger))
    size = len(json.dumps(status, separators=(",", ":")))
    assert size < 256 * 1024, size
    assert status["flakyCount"] > 50 and len(status["flaky"]) == 50
    assert SlotLedger.unpack(status["ledger"]) == ledger
    # every key is one the CRD's status schema keeps (the model forbids extras)
    assert EvalStatus.model_validate(status).model_dump(mode="json", by_alias=True) == {
        **EvalStatus().model_dump(mode="json", by_alias=True),
        **status,
    }


def test_phases_follow_progress_and_gate() -> None:
    """Pending, Running, then Succeeded once every slot is final, whatever the gate says:
    a missed gate is GatePassed=False (and the Gate column Missed), not phase Failed."""
    spec = make_spec(3, 2, gate={"metric": "meanPassRate", "k": 1, "min": 0.5})
    ledger = SlotLedger(3, 2)
    assert build_status(inputs(spec, ledger))["phase"] == "Pending"
    running = build_status(inputs(spec, ledger, running=2))
    assert running["phase"] == "Running"
    assert running["progress"] == {
        "done": 0,
        "running": 2,
        "waiting": 0,
        "pending": 4,
        "retries": 0,
    }
    assert condition_status(running, "Complete") == "False"
    for task in range(3):
        for trial in range(2):
            outcome = Outcome.PASS if task < 2 else Outcome.FAIL
            ledger.record(task, trial, 0, Verdict(outcome, "exit_code"), final=True)
    done = build_status(inputs(spec, ledger, previous=running, now=NOW + 60))
    assert done["phase"] == "Succeeded"
    assert condition_status(done, "Complete") == "True"
    assert condition_status(done, "GatePassed") == "True"
    assert done["gate"]["value"] == 2 / 3 and done["gate"]["passed"] is True
    assert is_terminal(done)
    assert done["startTime"] == running["startTime"]
    assert "completionTime" in done

    assert done["display"]["gate"] == "Passed"

    strict = make_spec(3, 2, gate={"metric": "passHatK", "k": 2, "min": 0.9})
    missed = build_status(inputs(strict, ledger))
    assert missed["phase"] == "Succeeded"
    assert condition_status(missed, "Complete") == "True"
    assert condition_status(missed, "GatePassed") == "False"
    assert missed["display"]["gate"] == "Missed"
    assert is_terminal(missed)


def test_display_reads_like_kubectl_get_jobs() -> None:
    """status.display carries the printer columns' text: `DONE 3/6`, rates as `54.2%`,
    nothing for a k no task is scored at yet, and no gate verdict before the end."""
    spec = make_spec(3, 2, ks=[1, 2], gate={"metric": "passHatK", "k": 2, "min": 0.5})
    ledger = SlotLedger(3, 2)
    ledger.record(0, 0, 0, Verdict(Outcome.INFRA_ERROR, "oom_killed"), final=False)
    ledger.record(0, 0, 1, Verdict(Outcome.PASS, "exit_code"), final=True)
    ledger.record(1, 0, 0, Verdict(Outcome.FAIL, "exit_code"), final=True)
    ledger.record(2, 0, 0, Verdict(Outcome.PASS, "exit_code"), final=True)
    partway = build_status(inputs(spec, ledger, running=3))
    assert partway["display"] == {
        "done": "3/6",
        "meanPassRate": "66.7%",
        "passHatK": "",
        "infraErrorRate": "25.0%",
        "gate": "",
    }
    for task, outcome in ((0, Outcome.PASS), (1, Outcome.PASS), (2, Outcome.FAIL)):
        ledger.record(task, 1, 0, Verdict(outcome, "exit_code"), final=True)
    done = build_status(inputs(spec, ledger))
    assert done["display"] == {
        "done": "6/6",
        "meanPassRate": "66.7%",
        "passHatK": "33.3%",
        "infraErrorRate": "14.3%",
        "gate": "Missed",
    }


def test_infra_errors_high_condition() -> None:
    """InfraErrorsHigh turns True above the threshold."""
    spec = make_spec(1, 2)
    ledger = SlotLedger(1, 2)
    ledger.record(0, 0, 0, Verdict(Outcome.INFRA_ERROR, "oom_killed"), final=False)
    ledger.record(0, 0, 1, Verdict(Outcome.PASS, "exit_code"), final=True)
    status = build_status(inputs(spec, ledger, infra_error_threshold=0.2))
    assert status["summary"]["infraErrorRate"] == 0.5
    assert condition_status(status, "InfraErrorsHigh") == "True"
    status = build_status(inputs(spec, ledger, infra_error_threshold=0.6))
    assert condition_status(status, "InfraErrorsHigh") == "False"


def test_config_error_status_names_the_field_and_is_terminal_only_when_told() -> None:
    """A terminal ConfigError fails the eval; a waiting one keeps it Pending."""
    failed = config_error_status(
        previous={},
        message="spec.ks[1]: k=9 is larger than trials=8",
        reason="InvalidSpec",
        terminal=True,
        generation=2,
        now=NOW,
    )
    assert failed["phase"] == "Failed" and is_terminal(failed)
    assert failed["observedGeneration"] == 2
    assert condition_status(failed, "ConfigError") == "True"
    waiting = config_error_status(
        previous={}, message="m", reason="TasksUnavailable", terminal=False, generation=1, now=NOW
    )
    assert waiting["phase"] == "Pending" and not is_terminal(waiting)


def test_a_stopped_eval_runs_nothing_in_its_status() -> None:
    """A terminal ConfigError lets every pod go (live ones deleted): progress.running is 0
    (it was copied from before, and a restarted operator's gauge showed it); a waiting one
    keeps its count."""
    previous = {"progress": {"done": 3, "running": 2, "pending": 5, "retries": 1}}
    for terminal, running in ((True, 0), (False, 2)):
        status = config_error_status(
            previous=previous, message="m", reason="r", terminal=terminal, generation=1, now=NOW
        )
        assert status["progress"] == {**previous["progress"], "running": running}
