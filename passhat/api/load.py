"""Read a ConsistencyEval from a YAML file and say exactly where it is wrong.

A user edits `eval.yaml` by hand; a bad spec must come back as one line naming the file,
the line and the field (`eval.yaml:12: spec.ks[1]: k=9 is larger than trials=8`), never a
pydantic dump or a traceback. Field paths come from the models (`spec_problems`), lines
from the YAML node tree. Also here: resolving `tasksFrom` against ConfigMap data, from the
API server (the operator passes it in) or from files next to the eval (locally).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path as FilePath
from typing import Any

import yaml
from pydantic import ValidationError

from passhat.api import yamlload
from passhat.api.errors import InputError, SpecError
from passhat.api.spec import (
    MAX_TASKS_BYTES,
    ConsistencyEval,
    EvalSpec,
    Path,
    Task,
    format_path,
    spec_problems,
    task_id_problems,
)

__all__ = [
    "MAX_SLOTS",
    "config_map_names",
    "load_eval",
    "parse_eval",
    "parse_spec",
    "read_eval_text",
    "read_local_config_maps",
    "resolve_tasks",
]


# Trial slots (tasks x trials) one eval may have; keeps status.ledger small.
MAX_SLOTS = 200_000


def load_eval(path: str | FilePath) -> ConsistencyEval:
    """The eval in the YAML file at `path`.

    Raises InputError when the file cannot be read, SpecError (with file, line and field)
    when it is not a valid ConsistencyEval.
    """
    return parse_eval(read_eval_text(path), str(path))


def read_eval_text(path: str | FilePath) -> str:
    """The text of the eval file at `path` (read once: it may be a pipe); InputError when
    it cannot be read."""
    source = str(path)
    try:
        text = FilePath(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("no such file", path=source) from None
    except IsADirectoryError:
        raise InputError("is a directory, expected an eval YAML file", path=source) from None
    except UnicodeDecodeError:
        raise InputError("is not UTF-8 text", path=source) from None
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", path=source) from None
    return text


def parse_eval(text: str, source: str = "<eval>") -> ConsistencyEval:
    """The eval in YAML `text`; `source` names it in error messages."""
    root = _compose(text, source)
    try:
        data = yamlload.construct(root)
    except yaml.YAMLError as err:
        raise SpecError(
            f"invalid YAML: {_yaml_problem(err)}", path=source, line=_mark_line(err)
        ) from None
    if not isinstance(data, dict):
        raise SpecError(
            "expected a ConsistencyEval object (apiVersion, kind, metadata, spec)",
            path=source,
            line=root.start_mark.line + 1,
        )
    try:
        return ConsistencyEval.model_validate(data, by_name=False)
    except ValidationError as err:
        problem_path, reason = spec_problems(err)[0]
        raise SpecError(
            reason,
            field=format_path(problem_path) or None,
            path=source,
            line=_line_of(root, problem_path),
        ) from None


def parse_spec(data: Any) -> EvalSpec:
    """The `spec` of a ConsistencyEval read from the API server (no file, no lines).

    Raises SpecError whose field is the full path, e.g. `spec.ks[1]`.
    """
    try:
        return EvalSpec.model_validate(data, by_name=False)
    except ValidationError as err:
        problem_path, reason = spec_problems(err, ("spec",))[0]
        raise SpecError(reason, field=format_path(problem_path)) from None


def config_map_names(spec: EvalSpec) -> list[str]:
    """The ConfigMaps `spec.tasksFrom` reads, each once, in the order first named."""
    return list(dict.fromkeys(source.config_map for source in spec.tasks_from or []))


def resolve_tasks(
    spec: EvalSpec, config_maps: Mapping[str, Mapping[str, str]], *, source: str | None = None
) -> list[Task]:
    """The eval's tasks: `spec.tasks`, or the tasks read from `spec.tasksFrom`.

    `config_maps` maps a ConfigMap name to its `data`. Each key used holds a YAML or JSON
    list of tasks. Raises SpecError for a missing ConfigMap or key, an unparsable value,
    an invalid task, a task id seen twice, values of more than MAX_TASKS_BYTES together
    (checked before each is parsed), or more than MAX_SLOTS trial slots (reading stops at
    the first task past the limit).
    """
    tasks: list[Task] = []
    if spec.tasks is not None:
        tasks = list(spec.tasks)
    max_tasks = MAX_SLOTS // spec.trials
    read = 0
    for index, ref in enumerate(spec.tasks_from or []):
        at = f"spec.tasksFrom[{index}]"
        data = config_maps.get(ref.config_map)
        if data is None:
            raise SpecError(
                f'ConfigMap "{ref.config_map}" not found', field=f"{at}.configMap", path=source
            )
        keys = [ref.key] if ref.key is not None else sorted(data)
        for key in keys:
            if key not in data:
                raise SpecError(
                    f'key "{key}" not found in ConfigMap "{ref.config_map}"',
                    field=f"{at}.key",
                    path=source,
                )
            where = f'ConfigMap "{ref.config_map}" key "{key}"'
            read += len(data[key].encode())
            if read > MAX_TASKS_BYTES:
                raise SpecError(
                    f"{where}: the tasks read up to here are {read} bytes, more than "
                    f"{MAX_TASKS_BYTES // 2**20} MiB; split the suite into several evals",
                    field=at,
                    path=source,
                )
            try:
                tasks.extend(_tasks_in(data[key], where=where, limit=max_tasks - len(tasks)))
            except _TooManyTasks:
                raise _too_many_slots(spec, max_tasks, where, source) from None
            except SpecError as err:
                # NB: name the eval and the tasksFrom entry the bad task list came from
                raise SpecError(err.reason, field=at, path=source) from None
    for (task_index, _), reason in task_id_problems(tasks):
        field = "spec.tasks" if spec.tasks is not None else "spec.tasksFrom"
        raise SpecError(f"{reason} (task #{task_index})", field=field, path=source)
    if not tasks:
        raise SpecError("no tasks", field="spec.tasksFrom", path=source)
    if len(tasks) > max_tasks:
        raise _too_many_slots(spec, max_tasks, None, source, count=len(tasks))
    return tasks


def _too_many_slots(
    spec: EvalSpec, max_tasks: int, where: str | None, source: str | None, *, count: int = 0
) -> SpecError:
    tasks = f"{count} tasks" if count else f"more than {max_tasks} tasks"
    stopped = f" (stopped reading at {where})" if where else ""
    return SpecError(
        f"{tasks} x {spec.trials} trials is more than {MAX_SLOTS} trial slots; "
        f"split the suite into several evals{stopped}",
        field="spec",
        path=source,
    )


class _TooManyTasks(Exception):
    """A task list holds more tasks than the slot limit leaves room for."""


def _tasks_in(text: str, *, where: str, limit: int) -> list[Task]:
    try:
        # NB: JSON first: large suites are usually JSON, and PyYAML is slow on them.
        items = json.loads(text, parse_constant=_refuse_constant)
    except _NonFiniteJson as err:
        raise SpecError(f"{where}: invalid JSON: {err} is not a JSON number") from None
    except ValueError:
        items = None  # NB: also an integer of more than 4300 digits: YAML reports it
    except RecursionError:
        raise SpecError(f"{where}: invalid JSON: nested too deeply") from None
    try:
        if items is None:
            items = yamlload.load(text)
    except yamlload.NotJson as err:
        at = format_path(("", *err.path))
        raise SpecError(
            f"{where}: line {_mark_line(err)}: {at + ': ' if at else ''}"
            f"invalid YAML/JSON: {err.problem}"
        ) from None
    except yaml.YAMLError as err:
        raise SpecError(f"{where}: invalid YAML/JSON: {_yaml_problem(err)}") from None
    if not isinstance(items, list):
        raise SpecError(f"{where}: expected a list of tasks")
    tasks = []
    for index, item in enumerate(items):
        if index >= limit:
            raise _TooManyTasks
        try:
            tasks.append(Task.model_validate(item, by_name=False))
        except ValidationError as err:
            problem_path, reason = spec_problems(err, (index,))[0]
            raise SpecError(f"{where}: {format_path(('', *problem_path))}: {reason}") from None
    return tasks


class _NonFiniteJson(Exception):
    """NaN, Infinity or -Infinity in JSON text (Python's json accepts them)."""


def _refuse_constant(name: str) -> Any:
    raise _NonFiniteJson(name)


def read_local_config_maps(spec: EvalSpec, base_dir: str | FilePath) -> dict[str, dict[str, str]]:
    """The ConfigMaps `spec.tasksFrom` names, read from files next to the eval (local runs).

    `<base_dir>/<name>/` is a directory whose files are the keys (as
    `kubectl create configmap NAME --from-file=DIR`), or `<base_dir>/<name>.yaml` is a
    ConfigMap manifest. Raises InputError when neither exists, one cannot be read, or the
    files are more than MAX_TASKS_BYTES together (checked before they are read).
    """
    base = FilePath(base_dir)
    maps: dict[str, dict[str, str]] = {}
    total = 0
    for name in config_map_names(spec):
        directory, manifest = base / name, base / f"{name}.yaml"
        try:
            if directory.is_dir():
                files = [
                    entry
                    for entry in sorted(directory.iterdir())
                    if entry.is_file() and not entry.name.startswith(".")
                ]
            elif manifest.is_file():
                files = [manifest]
            else:
                raise InputError(
                    f'ConfigMap "{name}" not found: expected a directory {directory} '
                    f"or a manifest {manifest}",
                    path=str(base),
                )
            for entry in files:
                total += entry.stat().st_size
                if total > MAX_TASKS_BYTES:
                    raise InputError(
                        f'ConfigMap "{name}": the tasksFrom files are more than '
                        f"{MAX_TASKS_BYTES // 2**20} MiB together; split the suite into "
                        "several evals",
                        path=str(entry),
                    )
            if directory.is_dir():
                maps[name] = {entry.name: entry.read_text(encoding="utf-8") for entry in files}
            else:
                maps[name] = _config_map_data(manifest)
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f'cannot read ConfigMap "{name}": {err}', path=str(base)) from None
    return maps


def _config_map_data(path: FilePath) -> dict[str, str]:
    try:
        manifest = yamlload.load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise InputError(
            f"invalid YAML: {_yaml_problem(err)}", path=str(path), line=_mark_line(err)
        ) from None
    data = manifest.get("data") if isinstance(manifest, dict) else None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise InputError("expected a ConfigMap manifest with string data", path=str(path))
    return {str(key): value for key, value in data.items()}


def _compose(text: str, source: str) -> yaml.Node:
    try:
        nodes = yamlload.compose_all(text)
    except yamlload.NotJson as err:
        raise SpecError(
            f"invalid YAML: {err.problem}",
            field=format_path(err.path) or None,
            path=source,
            line=_mark_line(err),
        ) from None
    except yaml.YAMLError as err:
        raise SpecError(
            f"invalid YAML: {_yaml_problem(err)}", path=source, line=_mark_line(err)
        ) from None
    if not nodes:
        raise SpecError("empty file, expected a ConsistencyEval", path=source)
    if len(nodes) > 1:
        raise SpecError(
            "expected one YAML document, found several",
            path=source,
            line=nodes[1].start_mark.line + 1,
        )
    _check_duplicate_keys(nodes[0], source, (), set())
    return nodes[0]


def _check_duplicate_keys(node: yaml.Node, source: str, at: Path, seen_nodes: set[int]) -> None:
    # NB: each node once: aliases make the tree a graph, exponentially larger as a tree
    if id(node) in seen_nodes:
        return
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            if name is not None and name in seen:
                raise SpecError(
                    f'duplicate key "{name}"',
                    field=format_path(at) or None,
                    path=source,
                    line=key.start_mark.line + 1,
                )
            seen.add(name)
            _check_duplicate_keys(value, source, (*at, str(name)), seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _check_duplicate_keys(item, source, (*at, index), seen_nodes)


def _line_of(node: yaml.Node, path: Sequence[str | int]) -> int:
    """The 1-based line of the deepest node of `path` that exists in the YAML tree."""
    line: int = node.start_mark.line + 1
    for part in path:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == part:
                    line, node = key.start_mark.line + 1, value
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if not 0 <= part < len(node.value):
                return line
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def _mark_line(err: yaml.YAMLError) -> int | None:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    return mark.line + 1 if mark is not None else None


def _yaml_problem(err: Exception) -> str:
    problem = getattr(err, "problem", None)
    return str(problem) if problem else str(err).splitlines()[0]
