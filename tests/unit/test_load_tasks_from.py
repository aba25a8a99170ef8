"""tasksFrom: tasks read from ConfigMap keys (cluster) or files next to the eval (local)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from passhat.api import InputError, SpecError, parse_spec, resolve_tasks
from passhat.api.load import MAX_SLOTS, read_local_config_maps

TEMPLATE = {"spec": {"containers": [{"name": "agent", "command": ["true"]}]}}


def spec_from(sources: list[dict[str, Any]], trials: int = 2) -> Any:
    return parse_spec({"tasksFrom": sources, "trials": trials, "trial": {"template": TEMPLATE}})


def test_inline_tasks_resolve_to_themselves() -> None:
    """With inline tasks, resolve_tasks returns them."""
    spec = parse_spec({"tasks": [{"id": "a"}], "trials": 1, "trial": {"template": TEMPLATE}})
    assert [t.id for t in resolve_tasks(spec, {})] == ["a"]


def test_yaml_and_json_keys_in_order() -> None:
    """A named key, then all keys of a ConfigMap in sorted order, YAML or JSON."""
    maps = {
        "one": {"k": "- id: a\n  params: {x: 1}\n- id: b\n"},
        "many": {"2.json": json.dumps([{"id": "d"}]), "1.yaml": "[{id: c}]"},
    }
    spec = spec_from([{"configMap": "one", "key": "k"}, {"configMap": "many"}])
    tasks = resolve_tasks(spec, maps)
    assert [t.id for t in tasks] == ["a", "b", "c", "d"]
    assert tasks[0].params == {"x": 1}


@pytest.mark.parametrize(
    ("maps", "message"),
    [
        ({}, 'spec.tasksFrom[0].configMap: ConfigMap "suite" not found'),
        (
            {"suite": {"other": "[]"}},
            'spec.tasksFrom[0].key: key "tasks" not found in ConfigMap "suite"',
        ),
        (
            {"suite": {"tasks": "{id: a}"}},
            'spec.tasksFrom[0]: ConfigMap "suite" key "tasks": expected a list of tasks',
        ),
        (
            {"suite": {"tasks": "[a, "}},
            'spec.tasksFrom[0]: ConfigMap "suite" key "tasks": invalid YAML/JSON: ',
        ),
        (
            {"suite": {"tasks": "[{id: a, extra: 1}]"}},
            'spec.tasksFrom[0]: ConfigMap "suite" key "tasks": [0].extra: unknown field',
        ),
        (
            {"suite": {"tasks": "[{id: a}, {id: a}]"}},
            'spec.tasksFrom: duplicate task id "a" (task #1)',
        ),
        ({"suite": {"tasks": "[]"}}, "spec.tasksFrom: no tasks"),
    ],
)
def test_bad_sources(maps: dict[str, dict[str, str]], message: str) -> None:
    """Missing maps or keys, bad lists and duplicate ids are SpecErrors saying where."""
    with pytest.raises(SpecError) as info:
        resolve_tasks(spec_from([{"configMap": "suite", "key": "tasks"}]), maps)
    assert str(info.value).startswith(message)


def test_too_many_slots() -> None:
    """More than MAX_SLOTS trial slots is refused before anything runs."""
    tasks = json.dumps([{"id": str(i)} for i in range(MAX_SLOTS // 10 + 1)])
    with pytest.raises(SpecError, match="trial slots"):
        resolve_tasks(spec_from([{"configMap": "s"}], trials=10), {"s": {"t": tasks}})


def test_local_directory_and_manifest(tmp_path: Path) -> None:
    """Locally a ConfigMap is a directory of keys or a ConfigMap manifest next to the eval."""
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "a.yaml").write_text("[{id: a}]")
    (tmp_path / "dir" / ".hidden").write_text("junk")
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"t": "[{id: b}]"}}
    (tmp_path / "cm.yaml").write_text(yaml.safe_dump(manifest))
    spec = spec_from([{"configMap": "dir"}, {"configMap": "cm", "key": "t"}])
    maps = read_local_config_maps(spec, tmp_path)
    assert maps == {"dir": {"a.yaml": "[{id: a}]"}, "cm": {"t": "[{id: b}]"}}
    assert [t.id for t in resolve_tasks(spec, maps)] == ["a", "b"]


def test_local_missing_config_map(tmp_path: Path) -> None:
    """A ConfigMap with neither a directory nor a manifest is an InputError."""
    with pytest.raises(InputError, match='ConfigMap "gone" not found'):
        read_local_config_maps(spec_from([{"configMap": "gone"}]), tmp_path)
