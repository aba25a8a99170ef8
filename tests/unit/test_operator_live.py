"""passhat.operator.live: an eval object's packed ledger becomes the same tallies as rows."""

from __future__ import annotations

from typing import Any

import pytest

from passhat.api.errors import InputError, SpecError
from passhat.operator.live import tallies_of
from passhat.stats import tally
from passhat.trials.ledger import SlotLedger
from passhat.trials.outcomes import Outcome, Verdict

TEMPLATE = {"spec": {"containers": [{"name": "t", "image": "busybox", "command": ["true"]}]}}
PASS = Verdict(Outcome.PASS, "exit_code")
FAIL = Verdict(Outcome.FAIL, "exit_code")
INFRA = Verdict(Outcome.INFRA_ERROR, "oom_killed")


def eval_object(spec: dict[str, Any], ledger: SlotLedger | None) -> dict[str, Any]:
    """A ConsistencyEval as the API server returns it."""
    obj: dict[str, Any] = {
        "apiVersion": "passhat.dev/v1alpha1",
        "kind": "ConsistencyEval",
        "metadata": {"name": "ev", "namespace": "ns"},
        "spec": spec,
    }
    if ledger is not None:
        obj["status"] = {"ledger": ledger.pack()}
    return obj


def test_ledger_tallies_equal_row_tallies() -> None:
    """Every attempt folded into the ledger counts exactly like one trials.jsonl row."""
    spec = {"tasks": [{"id": "a"}, {"id": "b"}], "trials": 2, "trial": {"template": TEMPLATE}}
    ledger = SlotLedger(2, 2)
    rows = []
    plan = [
        (0, 0, [PASS]),
        (0, 1, [INFRA, FAIL]),
        (1, 0, [INFRA, INFRA, PASS]),
        (1, 1, [PASS]),
    ]
    for task, trial, verdicts in plan:
        for attempt, verdict in enumerate(verdicts):
            final = verdict.outcome is not Outcome.INFRA_ERROR
            assert ledger.record(task, trial, attempt, verdict, final=final)
            rows.append(("ab"[task], verdict.outcome.value))
    _, task_ids, tallies = tallies_of(eval_object(spec, ledger), {})
    assert task_ids == ["a", "b"]
    assert tallies == tally(rows)


def test_tasks_from_config_map_and_no_status_yet() -> None:
    """Task ids come from the ConfigMap; an eval without a ledger has empty tallies."""
    spec = {"tasksFrom": [{"configMap": "suite"}], "trials": 3, "trial": {"template": TEMPLATE}}
    cms = {"suite": {"part1": '[{"id": "x"}, {"id": "y"}]'}}
    _, task_ids, tallies = tallies_of(eval_object(spec, None), cms)
    assert task_ids == ["x", "y"]
    assert [(t.task_id, t.attempts) for t in tallies] == [("x", 0), ("y", 0)]


def test_changed_config_map_is_a_clear_error() -> None:
    """A ledger that no longer matches the spec's tasks is refused, not misreported."""
    spec = {"tasksFrom": [{"configMap": "suite"}], "trials": 2, "trial": {"template": TEMPLATE}}
    cms = {"suite": {"k": '[{"id": "x"}]'}}
    with pytest.raises(InputError, match=r"status\.ledger has 2 tasks x 2 trials"):
        tallies_of(eval_object(spec, SlotLedger(2, 2)), cms)


def test_bad_spec_names_the_eval_and_field() -> None:
    """An unreadable spec says which eval and which field."""
    spec = {"tasks": [{"id": "a"}], "trials": 0, "trial": {"template": TEMPLATE}}
    with pytest.raises(SpecError) as err:
        tallies_of(eval_object(spec, None), {})
    assert str(err.value).startswith("consistencyeval/ev in namespace ns: spec.trials: ")
