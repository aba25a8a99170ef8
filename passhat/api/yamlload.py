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
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

import yaml

__all__ = ["MAX_DEPTH", "NestedTooDeeply", "compose_all", "construct", "load", "uses_libyaml"]

T = TypeVar("T")

MAX_DEPTH = 200
_NESTING_MARKS = "[{-?:"
_STARTS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_ENDS = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


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
    return _parse(text, lambda loader: yaml.load(text, Loader=loader))


def compose_all(text: str) -> list[yaml.Node]:
    """The node tree (with line marks) of every YAML document in `text`; errors as `load`."""
    return _parse(text, lambda loader: list(yaml.compose_all(text, Loader=loader)))


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
