"""Parse YAML at libyaml's speed, without letting a deeply nested document crash the process.

PyYAML's C loader (libyaml) reads large task lists several times faster than the
pure-Python one (bench/spec_parse.py), but its composer recurses in C with no depth
check: about 25,000 nested collections (`[[[[...`, or `- - - ...` on one line: 30 KiB of
text) overflow an 8 MiB stack and kill the process with SIGSEGV, no exception and no
message; and its scanner slows down sharply as the depth grows. A ConfigMap value like
that would take the operator down, and keep it down.

So the C composer only ever sees text that nests at most MAX_DEPTH collections deep.
Every YAML collection starts with one of `[`, `{`, `-`, `?`, `:` (flow start, block
sequence entry, explicit key, value indicator), so text with at most MAX_DEPTH of those
characters needs no check; other text is first run through libyaml's event parser (which
keeps its own stack, no recursion), counting the depth and stopping past MAX_DEPTH. Deeper
text raises NestedTooDeeply, a yaml.YAMLError whose problem is "nested too deeply"; so does
text past the pure-Python loader's limit (its RecursionError, at a few hundred levels), so
callers handle it like any other invalid YAML. No eval or task list comes near the limit.

Invalid YAML is always reported with the pure-Python parser's message, so messages do not
depend on whether libyaml is installed. Both loaders leave dates as strings (`kubectl
apply` sends JSON, never YAML timestamps).

Every document is also checked to be JSON data (an eval is a Kubernetes object, task
params reach the trial as JSON) before it is constructed, in one walk of the node graph
that visits each node once (NotJson, a yaml.MarkedYAMLError with the line and `path`):
aliases may not expand to more than MAX_ALIAS_NODES extra nodes (a "billion laughs"
document of a few hundred bytes would otherwise expand to billions of values in
json.dumps and pydantic) nor refer to the collection they are in; no `!!set`, `!!binary`,
`!!timestamp`, `!!omap`, `!!pairs`; no .nan / .inf; no integer of more than
MAX_INT_DIGITS digits (Python refuses to convert those).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any, TypeVar

import yaml

__all__ = [
    "MAX_ALIAS_NODES",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "NestedTooDeeply",
    "NotJson",
    "check_json_nodes",
    "compose_all",
    "construct",
    "load",
    "uses_libyaml",
]

T = TypeVar("T")

MAX_DEPTH = 200
_NESTING_MARKS = "[{-?:"
_STARTS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_ENDS = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


MAX_ALIAS_NODES = 1_000_000
MAX_INT_DIGITS = 4300  # NB: Python's int/str conversion limit (sys.get_int_max_str_digits)
_YAML = "tag:yaml.org,2002:"
_NOT_JSON_TAGS = {
    f"{_YAML}set": "a set (!!set)",
    f"{_YAML}binary": "binary data (!!binary)",
    f"{_YAML}timestamp": "a timestamp (!!timestamp; write the date as a string)",
    f"{_YAML}omap": "an ordered map (!!omap)",
    f"{_YAML}pairs": "a list of pairs (!!pairs)",
}


class NotJson(yaml.MarkedYAMLError):
    """A node the JSON data model has no value for, or aliases that expand too far.

    `problem_mark` is the node's position, `path` the keys and indexes leading to it.
    """

    def __init__(self, problem: str, node: yaml.Node, path: tuple[str | int, ...]) -> None:
        super().__init__(problem=problem, problem_mark=node.start_mark)
        self.path = path

    def __str__(self) -> str:
        return str(self.problem)


class NestedTooDeeply(yaml.YAMLError):
    """YAML nested deeper than MAX_DEPTH (or than the pure-Python loader can recurse)."""

    problem = "nested too deeply"

    def __str__(self) -> str:
        return self.problem


def _json_loader(base: type[Any]) -> type[Any]:
    """`base` without the timestamp resolver: dates stay strings, as `kubectl apply` sends them.

    NB: a `date: 2024-01-01` in task params must reach the trial as JSON, and the API
    server never sees YAML timestamps either (kubectl converts YAML to JSON first).
    """
    resolvers = {
        first: [(tag, regexp) for tag, regexp in entries if tag != "tag:yaml.org,2002:timestamp"]
        for first, entries in base.yaml_implicit_resolvers.items()
    }
    return type(f"Json{base.__name__}", (base,), {"yaml_implicit_resolvers": resolvers})


PURE_LOADER: type[Any] = _json_loader(yaml.SafeLoader)
C_LOADER: type[Any] | None = (
    _json_loader(yaml.CSafeLoader) if hasattr(yaml, "CSafeLoader") else None
)


def uses_libyaml() -> bool:
    """Whether PyYAML was built with libyaml here (else everything parses in Python)."""
    return C_LOADER is not None


def load(text: str) -> Any:
    """The Python value of the one YAML document in `text` (None when empty).

    Raises yaml.YAMLError for invalid YAML, NestedTooDeeply (one) for YAML nested deeper
    than MAX_DEPTH or than the pure-Python loader's limit.
    """
    nodes = compose_all(text)
    if not nodes:
        return None
    if len(nodes) > 1:
        # NB: the same error yaml.load gives for several documents
        return _parse(text, lambda loader: yaml.load(text, Loader=loader))
    return construct(nodes[0])


def compose_all(text: str) -> list[yaml.Node]:
    """The node tree (with line marks) of every YAML document in `text`; errors as `load`,
    and NotJson (see check_json_nodes)."""
    nodes = _parse(text, lambda loader: list(yaml.compose_all(text, Loader=loader)))
    for node in nodes:
        check_json_nodes(node)
    return nodes


def check_json_nodes(root: yaml.Node) -> None:
    """Raise NotJson unless the node graph at `root` is JSON data of a bounded size.

    Linear in the number of distinct nodes: each node is visited once, its expanded
    size memoized, whatever the number of aliases referring to it.
    """
    sizes: dict[int, int] = {}
    extra = 0

    def walk(node: yaml.Node, path: tuple[str | int, ...], parent: yaml.Node) -> int:
        nonlocal extra
        known = sizes.get(id(node))
        if known is not None:  # NB: an alias (the node of its anchor); name where it is used
            if known < 0:
                raise NotJson("an alias refers to the collection it is in", parent, path)
            extra += known
            if extra > MAX_ALIAS_NODES:
                raise NotJson(f"aliases expand to more than {MAX_ALIAS_NODES} nodes", parent, path)
            return known
        reason = _NOT_JSON_TAGS.get(node.tag)
        if reason is not None:
            raise NotJson(f"{reason} is not JSON data", node, path)
        size = 1
        if isinstance(node, yaml.ScalarNode):
            _check_scalar(node, path)
        elif isinstance(node, yaml.SequenceNode):
            sizes[id(node)] = -1
            for index, item in enumerate(node.value):
                size += walk(item, (*path, index), node)
        elif isinstance(node, yaml.MappingNode):
            sizes[id(node)] = -1
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                size += walk(key, path, node) + walk(value, (*path, name), node)
        sizes[id(node)] = size
        return size

    try:
        walk(root, (), root)
    except RecursionError:
        raise NestedTooDeeply from None


def _check_scalar(node: yaml.ScalarNode, path: tuple[str | int, ...]) -> None:
    if node.tag == f"{_YAML}int":
        if sum(ch.isdigit() for ch in node.value) > MAX_INT_DIGITS:
            raise NotJson(f"integer with more than {MAX_INT_DIGITS} digits", node, path)
    elif node.tag == f"{_YAML}float":
        text = node.value.replace("_", "").lower()
        if text.lstrip("+-") in (".inf", ".nan") or (":" not in text and not _finite(text)):
            raise NotJson(f"{node.value} is not a JSON number (must be finite)", node, path)


def _finite(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return True  # NB: other forms (sexagesimal) are the constructor's to parse


def construct(node: yaml.Node) -> Any:
    """The Python value of a node tree from `compose_all` (no second parse of the text)."""
    loader = PURE_LOADER("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _parse(text: str, parse: Callable[[type[Any]], T]) -> T:
    if C_LOADER is not None:
        if _nests_too_deep(text, C_LOADER):
            raise NestedTooDeeply
        # NB: on invalid YAML, report the pure-Python parser's error (same wording everywhere)
        with contextlib.suppress(yaml.YAMLError):
            return parse(C_LOADER)
    try:
        return parse(PURE_LOADER)
    except RecursionError:
        raise NestedTooDeeply from None


def _nests_too_deep(text: str, loader: type[Any]) -> bool:
    if sum(map(text.count, _NESTING_MARKS)) <= MAX_DEPTH:
        return False
    depth = 0
    with contextlib.suppress(yaml.YAMLError):  # NB: invalid YAML is reported by the parse
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, _STARTS):
                depth += 1
                if depth > MAX_DEPTH:
                    return True
            elif isinstance(event, _ENDS):
                depth -= 1
    return False
