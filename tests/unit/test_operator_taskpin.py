"""The tasksFrom ConfigMaps are pinned at the start (#17 §2): status.taskSources holds their
uid, resourceVersion and digest; a change mid-run, a deletion or a replacement stops the
eval with a ConfigError naming the ConfigMap, keeping what was scored, and no pod ever runs
a task the eval did not start with; `passhat report` refuses to name changed tasks."""

from __future__ import annotations

from typing import Any

import pytest

from passhat.api import conditions as cond
from passhat.api.errors import InputError
from passhat.api.load import parse_spec
from passhat.operator import events
from passhat.operator.live import tallies_of
from passhat.operator.loop import PassState
from passhat.operator.pods import LABEL_TASK
from passhat.operator.status import condition_status
from passhat.operator.taskpin import data_digest
from passhat.trials.ledger import SlotLedger
from tests.unit.test_operator_loop import Harness, spec

TASKS = "- id: a\n- id: b\n- id: c\n"
CHANGED = "- id: z\n- id: b\n- id: c\n"


def pinned_harness(
    data: dict[str, str] | None = None, **overrides: Any
) -> tuple[Harness, list[Any], list[str]]:
    """Three tasks from key `t` of ConfigMap `suite`, 1 trial, 2 at a time; the loop keeps
    its events, and the ConfigMap GETs are counted (full ones as "data", else "meta")."""
    body = spec(tasksFrom=[{"configMap": "suite", "key": "t"}], trials=1, ks=[1], parallelism=2)
    body.pop("tasks")
    body.pop("gate")
    body.update(overrides)
    harness = Harness(80, body=body)
    harness.api.config_maps["suite"] = {"data": data or {"t": TASKS, "notes": "x"}}
    gets: list[str] = []
    api = harness.api
    full, meta = api.get_config_map, api.get_config_map_meta

    def get_full(namespace: str, name: str) -> dict[str, Any] | None:
        gets.append("data")
        return full(namespace, name)

    def get_meta(namespace: str, name: str) -> dict[str, Any] | None:
        gets.append("meta")
        return meta(namespace, name)

    api.get_config_map = get_full  # type: ignore[method-assign]
    api.get_config_map_meta = get_meta  # type: ignore[method-assign]
    return harness, harness.collect_events(), gets


def test_the_first_pass_pins_the_config_map() -> None:
    """status.taskSources names the ConfigMap, its uid and resourceVersion, and the sha256
    of the key the tasks come from."""
    harness, _, _ = pinned_harness()
    harness.loop.run_pass()
    stored = harness.api.get_config_map_meta("ns", "suite")
    assert stored is not None
    parsed = parse_spec(harness.api.evals["demo"]["spec"])
    assert harness.status["taskSources"] == [
        {
            "configMap": "suite",
            "uid": stored["uid"],
            "resourceVersion": stored["resourceVersion"],
            "sha256": data_digest(parsed, "suite", {"t": TASKS}),
        }
    ]
    assert len(harness.api.pods) == 2


def test_a_config_map_changed_mid_run_stops_the_eval_keeping_what_was_scored() -> None:
    """The pass that sees new data folds in the pod that finished, writes ConfigError
    TasksChanged naming the ConfigMap, deletes the running pod and creates none (task c
    never runs, nor the new task z); later passes change nothing."""
    harness, posted, _ = pinned_harness()
    harness.loop.run_pass()
    first, _ = sorted(harness.api.pods)
    harness.finish(first, 0)
    harness.api.config_maps["suite"]["data"]["t"] = CHANGED
    harness.clock.now += 1
    assert harness.loop.run_pass().state is PassState.DONE
    status = harness.status
    assert status["phase"] == "Failed"
    error = cond.find_condition(status["conditions"], cond.CONFIG_ERROR)
    assert error is not None and error["status"] == "True"
    assert error["reason"] == "TasksChanged"
    assert error["message"].startswith(
        'spec.tasksFrom: ConfigMap "suite" changed after the eval started (its tasks\' data '
        "had sha256 "
    )
    assert "restore the ConfigMap's data, or create a new eval" in error["message"]
    ledger = SlotLedger.unpack(status["ledger"])
    assert ledger.done == 1 and ledger.is_final(0, 0)
    assert status["progress"]["done"] == 1 and status["progress"]["running"] == 0
    assert status["summary"]["byK"][0]["tasksScored"] == 1
    assert list(harness.api.pods) == [first]
    assert len(harness.api.created_names) == 2
    assert [event.reason for event in posted] == [events.CONFIG_ERROR]
    harness.clock.now += 10
    assert harness.loop.run_pass().state is PassState.DONE
    assert len(harness.api.created_names) == 2


def test_a_restarted_operator_never_runs_the_new_tasks() -> None:
    """An operator that starts after the change (no tasks in memory) refuses at once."""
    harness, _, _ = pinned_harness()
    harness.loop.run_pass()
    harness.api.config_maps["suite"]["data"]["t"] = CHANGED
    for name in list(harness.api.pods):
        harness.finish(name, 1)
    harness.loop = harness.new_loop()
    harness.clock.now += 1
    assert harness.loop.run_pass().state is PassState.DONE
    assert condition_status(harness.status, cond.CONFIG_ERROR) == "True"
    assert 'ConfigMap "suite" changed after the eval started' in harness.status["message"]
    assert len(harness.api.created_names) == 2
    assert {pod["metadata"]["labels"][LABEL_TASK] for pod in harness.api.pods.values()} <= {
        "0",
        "1",
    }


def test_metadata_changes_and_other_keys_cost_one_read_and_no_error() -> None:
    """A label change (new resourceVersion, same data) and a change to a key the eval does
    not read are fine: each new resourceVersion is read once, then only metadata is."""
    harness, _, gets = pinned_harness()
    harness.loop.run_pass()
    assert gets == ["data", "meta"]
    gets.clear()
    harness.clock.now += 1
    harness.loop.run_pass()
    assert gets == ["meta"]
    harness.api.config_maps["suite"]["data"]["notes"] = "edited"
    gets.clear()
    for _ in range(3):
        harness.clock.now += 1
        assert harness.loop.run_pass().state is PassState.CONTINUE
    assert gets == ["meta", "data", "meta", "meta"]
    assert condition_status(harness.status, cond.CONFIG_ERROR) is None
    assert len(harness.api.pods) == 2


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("delete", 'ConfigMap "suite" was deleted after the eval started'),
        ("replace", 'ConfigMap "suite" was deleted and created again after the eval started'),
    ],
)
def test_a_deleted_or_replaced_config_map_stops_the_eval(change: str, words: str) -> None:
    """A ConfigMap deleted, or deleted and created again with the same data (a new uid),
    is a ConfigError too."""
    harness, _, _ = pinned_harness()
    harness.loop.run_pass()
    if change == "delete":
        del harness.api.config_maps["suite"]
    else:
        harness.api.config_maps["suite"]["metadata"] = {"uid": "another-uid"}
    harness.clock.now += 1
    assert harness.loop.run_pass().state is PassState.DONE
    assert condition_status(harness.status, cond.CONFIG_ERROR) == "True"
    assert words in harness.status["message"]


def test_inline_tasks_pin_nothing() -> None:
    """An eval with inline tasks has no taskSources and makes no ConfigMap reads."""
    harness = Harness(81)
    harness.loop.run_pass()
    assert "taskSources" not in harness.status


def test_report_refuses_to_name_changed_tasks() -> None:
    """`passhat report` (tallies_of) with a changed ConfigMap is an error naming it and
    the way out; with the pinned data it reports."""
    harness, _, _ = pinned_harness()
    harness.loop.run_pass()
    obj = harness.api.evals["demo"]
    _, task_ids, _ = tallies_of(obj, {"suite": {"t": TASKS, "notes": "other"}})
    assert task_ids == ["a", "b", "c"]
    with pytest.raises(InputError) as info:
        tallies_of(obj, {"suite": {"t": CHANGED}})
    message = str(info.value)
    assert message.startswith("consistencyeval/demo in namespace ns: spec.tasksFrom: ")
    assert 'ConfigMap "suite" changed after the eval started' in message
    assert "passhat trials demo --out trials.jsonl && passhat score trials.jsonl" in message
    with pytest.raises(InputError, match='ConfigMap "suite" was deleted'):
        tallies_of(obj, {})
