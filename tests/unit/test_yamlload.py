"""passhat.api.yamlload: libyaml where it is safe, the same values and messages either way."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from passhat.api import SpecError, parse_eval, yamlload

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
