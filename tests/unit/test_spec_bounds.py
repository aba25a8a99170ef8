"""Bounded input (#17 §2): params, all tasks together, tasksFrom read once, the slot limit
reached without parsing the rest, and parallelism, each refused naming its field."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from passhat.api import InputError, SpecError, parse_spec, resolve_tasks
from passhat.api.crd import build_crd
from passhat.api.load import MAX_SLOTS, parse_eval, read_local_config_maps
from passhat.api.spec import MAX_PARALLELISM, MAX_PARAMS_BYTES, MAX_TASKS_BYTES
from passhat.operator.loop import EvalLoop, PassState
from passhat.operator.pods import EvalRef
from tests.unit.test_operator_loop import CONFIG, Clock
from tests.unit.test_operator_loop import spec as loop_spec

TEMPLATE = {"spec": {"containers": [{"name": "agent", "command": ["true"]}]}}
KIB = 1024


def inline(tasks: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {"tasks": tasks, "trials": 1, "trial": {"template": TEMPLATE}, **more}


def from_maps(sources: list[dict[str, Any]], trials: int = 1) -> Any:
    return parse_spec({"tasksFrom": sources, "trials": trials, "trial": {"template": TEMPLATE}})


def blob(n_bytes: int) -> dict[str, str]:
    """Params whose JSON (`{"b": "x..."}`) is exactly n_bytes long."""
    return {"b": "x" * (n_bytes - len('{"b": ""}'))}


def refusal(spec: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as info:
        parse_spec(spec)
    return str(info.value)


def test_params_are_at_most_64_kib_as_json() -> None:
    """64 KiB of params (as PASSHAT_TASK carries them) pass; one byte more names the task."""
    parse_spec(inline([{"id": "a", "params": blob(MAX_PARAMS_BYTES)}]))
    message = refusal(inline([{"id": "a"}, {"id": "b", "params": blob(MAX_PARAMS_BYTES + 1)}]))
    assert message.startswith("spec.tasks[1].params: 65537 bytes as JSON")
    assert "64 KiB per task" in message


def test_params_too_large_in_a_config_map_name_the_key_and_the_task() -> None:
    """The same limit holds for tasks read from a ConfigMap."""
    spec = from_maps([{"configMap": "suite"}])
    text = json.dumps([{"id": "a"}, {"id": "b", "params": blob(MAX_PARAMS_BYTES + 1)}])
    with pytest.raises(SpecError) as info:
        resolve_tasks(spec, {"suite": {"t.json": text}})
    assert str(info.value).startswith(
        'spec.tasksFrom[0]: ConfigMap "suite" key "t.json": [1].params: 65537 bytes as JSON'
    )


def test_params_in_the_eval_file_name_their_line() -> None:
    """Locally (`passhat run`) the refusal carries the file and the line of the params."""
    doc = {
        "apiVersion": "passhat.dev/v1alpha1",
        "kind": "ConsistencyEval",
        "metadata": {"name": "big"},
        "spec": inline([{"id": "a"}, {"id": "b", "params": blob(70 * KIB)}]),
    }
    text = json.dumps(doc, indent=1)
    with pytest.raises(SpecError) as info:
        parse_eval(text, "eval.yaml")
    line = next(n for n, row in enumerate(text.splitlines(), 1) if '"params"' in row)
    assert str(info.value).startswith(f"eval.yaml:{line}: spec.tasks[1].params: ")


def test_inline_tasks_are_at_most_4_mib_together() -> None:
    """Inline tasks of more than MAX_TASKS_BYTES together are refused at the first one over."""
    size = 60 * KIB
    count = MAX_TASKS_BYTES // size + 1
    message = refusal(inline([{"id": f"t{i}", "params": blob(size)} for i in range(count)]))
    assert message.startswith(f"spec.tasks[{count - 1}]: the tasks up to this one are ")
    assert "more than 4 MiB" in message
    parse_spec(inline([{"id": f"t{i}", "params": blob(size)} for i in range(count - 2)]))


def test_config_maps_are_at_most_4_mib_together_checked_before_parsing() -> None:
    """The tasksFrom values count together; the one that crosses the limit is refused
    before it is parsed (here it is not even a task list)."""
    spec = from_maps([{"configMap": "one"}, {"configMap": "two", "key": "t"}])
    first = json.dumps([{"id": f"a{i}", "params": blob(60 * KIB)} for i in range(40)])
    over = "not a task list " * (MAX_TASKS_BYTES // 16)
    with pytest.raises(SpecError) as info:
        resolve_tasks(spec, {"one": {"t": first}, "two": {"t": over}})
    message = str(info.value)
    assert message.startswith('spec.tasksFrom[1]: ConfigMap "two" key "t": the tasks read up')
    assert "more than 4 MiB" in message


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        (
            [{"configMap": "s", "key": "a"}, {"configMap": "s", "key": "a"}],
            'spec.tasksFrom[1]: key "a" of ConfigMap "s" is already read by spec.tasksFrom[0]',
        ),
        (
            [{"configMap": "s"}, {"configMap": "t"}, {"configMap": "s", "key": "a"}],
            'spec.tasksFrom[2]: key "a" of ConfigMap "s" is already read by spec.tasksFrom[0]',
        ),
        (
            [{"configMap": "s", "key": "a"}, {"configMap": "s"}],
            'spec.tasksFrom[1]: ConfigMap "s" is already read by spec.tasksFrom[0]',
        ),
    ],
)
def test_a_config_map_key_is_listed_once(sources: list[dict[str, Any]], message: str) -> None:
    """A tasksFrom entry reading what an earlier one reads is refused (its tasks would be
    read, parsed and counted twice)."""
    spec = {"tasksFrom": sources, "trials": 1, "trial": {"template": TEMPLATE}}
    assert refusal(spec) == message


def test_reading_stops_at_the_slot_limit() -> None:
    """The first task past MAX_SLOTS slots stops the reading: the tasks after it are never
    validated (the one right after the limit is invalid, and that is not what is said)."""
    trials = 10
    room = MAX_SLOTS // trials
    items = [{"id": f"t{i}"} for i in range(room)] + [{"id": 7}, {"id": "never"}]
    spec = from_maps([{"configMap": "s"}], trials=trials)
    with pytest.raises(SpecError) as info:
        resolve_tasks(spec, {"s": {"t": json.dumps(items)}})
    assert str(info.value) == (
        f"spec: more than {room} tasks x {trials} trials is more than {MAX_SLOTS} trial "
        'slots; split the suite into several evals (stopped reading at ConfigMap "s" key "t")'
    )


def test_slot_limit_counts_across_config_maps() -> None:
    """Tasks of earlier ConfigMaps leave less room for the next one."""
    trials = 100
    room = MAX_SLOTS // trials
    spec = from_maps([{"configMap": "a"}, {"configMap": "b"}], trials=trials)
    first = json.dumps([{"id": f"a{i}"} for i in range(room)])
    with pytest.raises(SpecError, match='stopped reading at ConfigMap "b" key "t"'):
        resolve_tasks(spec, {"a": {"t": first}, "b": {"t": '[{"id": "b0"}]'}})
    assert len(resolve_tasks(spec, {"a": {"t": first}, "b": {"t": "[]"}})) == room


def test_parallelism_is_at_most_10000() -> None:
    """parallelism above MAX_PARALLELISM is refused by the model and by the CRD's schema."""
    assert parse_spec(inline([{"id": "a"}], parallelism=MAX_PARALLELISM)).parallelism == 10_000
    message = refusal(inline([{"id": "a"}], parallelism=MAX_PARALLELISM + 1))
    assert message == "spec.parallelism: should be less than or equal to 10000 (got 10001)"
    schema = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    props = schema["properties"]["spec"]["properties"]
    assert props["parallelism"]["maximum"] == MAX_PARALLELISM
    assert props["tasksFrom"]["items"]["properties"]["key"]["maxLength"] == 253


def test_local_config_map_files_over_the_limit_are_not_read(tmp_path: Path) -> None:
    """Locally, ConfigMap files over MAX_TASKS_BYTES together are refused by their size,
    before they are read."""
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "a.json").write_text("[]")
    with (tmp_path / "suite" / "b.json").open("wb") as handle:
        handle.truncate(MAX_TASKS_BYTES)  # sparse: nothing is written
    with pytest.raises(InputError) as info:
        read_local_config_maps(from_maps([{"configMap": "suite"}]), tmp_path)
    assert str(info.value).startswith(f'{tmp_path / "suite" / "b.json"}: ConfigMap "suite"')
    assert "more than 4 MiB together" in str(info.value)


def test_operator_reads_each_config_map_once_and_refuses_big_params() -> None:
    """Two keys of one ConfigMap are one GET; params over the limit stop the eval with a
    ConfigError naming the task, and no pod is made."""
    from tests.unit.operator_fake import FakeApi

    clock = Clock()
    api = FakeApi(clock=clock)
    body = loop_spec(
        tasksFrom=[{"configMap": "s", "key": "a"}, {"configMap": "s", "key": "b"}], trials=1
    )
    body.pop("tasks")
    body.pop("gate")
    body["ks"] = [1]
    stored = api.add_eval("ns", "demo", body)
    api.config_maps["s"] = {
        "data": {"a": '[{"id": "x"}]', "b": json.dumps([{"id": "y", "params": blob(70 * KIB)}])}
    }
    reads: list[str] = []
    get = api.get_config_map

    def counted(namespace: str, name: str) -> dict[str, Any] | None:
        reads.append(name)
        return get(namespace, name)

    api.get_config_map = counted  # type: ignore[method-assign]
    loop = EvalLoop(
        api, EvalRef("ns", "demo", stored["metadata"]["uid"]), config=CONFIG, clock=clock
    )
    loop.run_pass()
    assert reads == ["s"]
    status = api.evals["demo"]["status"]
    assert status["message"].startswith('spec.tasksFrom[1]: ConfigMap "s" key "b": [0].params: ')
    assert api.pods == {}
    api.config_maps["s"]["data"]["b"] = '[{"id": "y"}]'
    assert loop.run_pass().state is PassState.CONTINUE
    assert len(api.pods) == 2


def test_deeply_nested_params_are_refused_not_a_crash() -> None:
    """Params too deep to encode as JSON at this process's recursion limit are refused
    naming them, not a RecursionError (the operator raises its limit: main.allow_api_depth)."""
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(sys.getrecursionlimit() * 5):
        node["x"] = {}
        node = node["x"]
    message = refusal(inline([{"id": "a", "params": deep}]))
    assert message == "spec.tasks[0].params: nested too deeply to pass as JSON"
