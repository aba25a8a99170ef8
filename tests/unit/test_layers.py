"""The layer rule of docs/design.md, checked on the source: imports point down only."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "passhat"

_BASE = {"stats", "api", "trials", "report", "metrics", "records", "grading"}
# top-level part of passhat -> the parts it may import (itself and the root always allowed)
ALLOWED: dict[str, set[str]] = {
    "stats": set(),
    "api": {"stats"},
    "trials": {"stats", "api"},
    "report": {"stats", "api", "trials"},
    "metrics": {"stats", "api", "trials"},
    "records": {"stats", "api", "trials"},
    "grading": {"stats", "api", "trials", "records"},
    "history": {"stats", "api", "trials", "records", "report"},
    "local": _BASE,
    "operator": _BASE | {"history"},
    "harness": _BASE,
    "runner": _BASE | {"harness"},
    "cli": _BASE | {"harness", "local", "operator", "runner", "history"},
    "__main__": {"cli"},
    "kubectl_plugin": {"cli", "operator", "api"},
}


def _part(module: str) -> str:
    """`passhat.trials.readers.csv` -> `trials`; `passhat` -> `` (the root)."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else ""


def _module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every passhat module imported by the file at `path` (relative imports resolved)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
    return [
        (line, name) for line, name in found if name == "passhat" or name.startswith("passhat.")
    ]


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_every_part_has_a_layer() -> None:
    """Each top-level module or package of passhat is placed in the layer table."""
    parts = {_part(_module_name(path)) for path in SOURCES} - {""}
    assert parts <= set(ALLOWED), f"add {sorted(parts - set(ALLOWED))} to ALLOWED"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_imports_point_down_only(path: Path) -> None:
    """A module imports only its own part, the layers below it and the root package."""
    part = _part(_module_name(path))
    bad = []
    for line, name in _imports(path):
        target = _part(name)
        if part == "":
            if target:
                bad.append(f"line {line}: the root package imports {name}")
        elif target not in ("", part) and target not in ALLOWED[part]:
            bad.append(f"line {line}: {part} may not import {name}")
    assert not bad, f"{path}: " + "; ".join(bad)


def test_scoring_core_imports_no_heavy_libraries() -> None:
    """Importing the scoring core, reports and readers loads no numpy, rich or matplotlib."""
    code = (
        "import sys, passhat.stats, passhat.report, passhat.trials.readers\n"
        "print(sorted(m for m in ('numpy', 'rich', 'matplotlib') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"
