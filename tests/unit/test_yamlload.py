"""passhat.api.yamlload: libyaml where it is safe, the same values and messages either way."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from passhat.api import SpecError, parse_eval, parse_spec, resolve_tasks, yamlload

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "eval.yaml"

needs_libyaml = pytest.mark.skipif(
    not yamlload.uses_libyaml(), reason="PyYAML without libyaml: only the pure loader exists"
)


def _nested(kind: str, depth: int) -> str:
    return {
        "flow-seq": "[" * depth + "]" * depth,
        "flow-map": "{a: " * depth + "1" + "}" * depth,
        "block-seq": "- " * depth + "x",
        "block-map": "".join(" " * i + "a:\n" for i in range(depth)) + " " * depth + "b",
    }[kind]


@pytest.fixture
def pure_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a machine whose PyYAML has no libyaml."""
    monkeypatch.setattr(yamlload, "C_LOADER", None)


def test_deep_nesting_is_an_error_not_a_crash(tmp_path: Path) -> None:
    """30,000 nested collections (libyaml alone would overflow the C stack and SIGSEGV).

    Run in a child interpreter, so that a regression fails this test instead of killing
    the test session.
    """
    code = textwrap.dedent(
        """
        from passhat.api import SpecError, parse_spec, resolve_tasks, yamlload
        template = {"spec": {"containers": [{"name": "a", "command": ["true"]}]}}
        spec = parse_spec({"tasksFrom": [{"configMap": "m", "key": "k"}], "trials": 1,
                           "trial": {"template": template}})
        for text in ("[" * 30000 + "]" * 30000, "- " * 30000 + "x", "{a: " * 30000 + "}" * 30000):
            try:
                yamlload.load(text)
            except yamlload.NestedTooDeeply:
                pass
            else:
                raise SystemExit("loaded")
            try:
                resolve_tasks(spec, {"m": {"k": text}})
            except SpecError as err:
                assert "nested too deeply" in str(err), err
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr[-2000:]


@needs_libyaml
@pytest.mark.parametrize("kind", ["flow-seq", "flow-map", "block-seq", "block-map"])
def test_depth_limit_is_exact(kind: str) -> None:
    """MAX_DEPTH nested collections load; one more is NestedTooDeeply."""
    limit = yamlload.MAX_DEPTH
    value: Any = yamlload.load(_nested(kind, limit))
    depth = 0
    while isinstance(value, list | dict):
        depth += 1
        if not value:
            break
        value = value[0] if isinstance(value, list) else value["a"]
    assert depth == limit
    with pytest.raises(yamlload.NestedTooDeeply):
        yamlload.load(_nested(kind, limit + 1))


@needs_libyaml
def test_libyaml_and_pure_loader_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Same values and the same line marks from libyaml and from the pure-Python loader."""
    texts = [
        EXAMPLE.read_text(),
        yaml.safe_dump([{"id": f"t{i}", "params": {"n": i, "tags": ["a"]}} for i in range(300)]),
        "when: 2024-01-01\nat: 2024-01-01T10:00:00Z\nn: 1.5\nb: yes\nnull: ~\n",
    ]
    fast = [(yamlload.load(t), _marks(yamlload.compose_all(t)[0])) for t in texts]
    monkeypatch.setattr(yamlload, "C_LOADER", None)
    pure = [(yamlload.load(t), _marks(yamlload.compose_all(t)[0])) for t in texts]
    assert fast == pure
    assert fast[2][0]["when"] == "2024-01-01"  # dates stay strings, as kubectl sends them


def _marks(node: yaml.Node) -> list[tuple[str, int, int]]:
    found = [(node.tag, node.start_mark.line, node.start_mark.column)]
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            found += _marks(item)
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            found += _marks(key) + _marks(value)
    return found


@pytest.mark.parametrize("text", ["ks: [1, 3 8\n", "a: b: c\n", "a:\n  - x\n - y\n", "'open"])
def test_invalid_yaml_message_does_not_depend_on_libyaml(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error a user sees is the pure-Python parser's, with or without libyaml."""
    with pytest.raises(SpecError) as fast:
        parse_eval(text, "e.yaml")
    monkeypatch.setattr(yamlload, "C_LOADER", None)
    with pytest.raises(SpecError) as pure:
        parse_eval(text, "e.yaml")
    assert str(fast.value) == str(pure.value)


def test_deep_eval_file_without_libyaml(pure_only: None) -> None:
    """Without libyaml, deep nesting stops at Python's recursion limit: the same message."""
    with pytest.raises(SpecError, match="nested too deeply"):
        parse_eval("a: " + "[" * 5000 + "]" * 5000, "e.yaml")


def _billion_laughs(indent: str) -> str:
    lines = [f"a0: &a0 [{', '.join(['x'] * 9)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    return "".join(f"{indent}{line}\n" for line in lines)


@pytest.mark.parametrize("where", ["top", "params", "template"])
def test_billion_laughs_is_refused_quickly(where: str) -> None:
    """10 levels of 9 aliases: 10^9 values once expanded (json.dumps, pydantic)."""
    text = EXAMPLE.read_text(encoding="utf-8")
    if where == "top":
        text += "x-laughs:\n" + _billion_laughs("  ")
    elif where == "params":
        text = text.replace("spec:\n", "spec:\n  x-params:\n" + _billion_laughs("    "), 1)
    else:
        text = text.replace("    template:\n", "    template:\n" + _billion_laughs("      "), 1)
    with pytest.raises(SpecError, match="aliases expand to more than 1000000 nodes") as info:
        parse_eval(text, "eval.yaml")
    assert info.value.line is not None


def test_billion_laughs_in_a_task_list() -> None:
    with pytest.raises(yamlload.NotJson, match="aliases expand"):
        yamlload.load(_billion_laughs(""))


def test_shared_aliases_below_the_limit_still_load() -> None:
    assert yamlload.load("a: &a [1, 2]\nb: *a\nc: {<<: {x: 1}}") == {
        "a": [1, 2],
        "b": [1, 2],
        "c": {"x": 1},
    }


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("!!set {a}", "a set (!!set) is not JSON data"),
        ("!!binary aGVsbG8=", "binary data (!!binary) is not JSON data"),
        ("!!timestamp 2024-01-01", "a timestamp"),
        (".nan", "not a JSON number"),
        ("-.Inf", "not a JSON number"),
        ("1.0e+400", "not a JSON number"),
        ("9" * 5000, "integer with more than 4300 digits"),
        ("&r [*r]", "refers to the collection it is in"),
    ],
)
def test_non_json_values_are_refused_with_line_and_path(value: str, message: str) -> None:
    with pytest.raises(yamlload.NotJson, match=re.escape(message)) as info:
        yamlload.load(f"a: 1\nb:\n  c: [1, {value}]\n")
    assert info.value.path[:3] == ("b", "c", 1)
    assert info.value.problem_mark is not None and info.value.problem_mark.line == 2


def test_plain_dates_stay_strings() -> None:
    """Documented: an unquoted date is the string kubectl would send."""
    assert yamlload.load("d: 2024-01-01") == {"d": "2024-01-01"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[{"id": "a", "params": {"x": NaN}}]', "invalid JSON: NaN is not a JSON number"),
        ('[{"id": "a", "params": {"x": -Infinity}}]', "invalid JSON: -Infinity is not"),
        ("- id: a\n  params: {x: !!set {b}}\n", "line 2: [0].params.x: invalid YAML/JSON: a set"),
        ('[{"id": "a", "params": {"x": ' + "7" * 5000 + "}}]", "more than 4300 digits"),
    ],
)
def test_task_lists_must_be_json_data(text: str, message: str) -> None:
    template = {"spec": {"containers": [{"name": "a", "command": ["true"]}]}}
    spec = parse_spec(
        {
            "tasksFrom": [{"configMap": "m", "key": "k"}],
            "trials": 1,
            "trial": {"template": template},
        }
    )
    with pytest.raises(SpecError, match=re.escape(message)):
        resolve_tasks(spec, {"m": {"k": text}})
