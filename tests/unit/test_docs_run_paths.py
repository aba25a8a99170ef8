"""The docs' commands name only run directories that `passhat run` makes.

A new user copying `passhat power --pilot ./passhat-runs/pilot/last` got "no such
directory": `passhat run` writes `./passhat-runs/<name>/<UTC start>` or `--out DIR` and
no `last` link (docs/local.md, "The run directory and resuming").
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from passhat.local.rundir import latest_run_dir, new_run_dir

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *(ROOT / "examples").rglob("*.md"),
]
# A run path under passhat-runs/<name>/ that is not a <UTC start> directory or a placeholder.
_MADE_UP = re.compile(r"passhat-runs/[\w.-]+/(?!<|\d{8}T\d{6}Z)([\w.-]+)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_name_no_run_directory_passhat_does_not_make(doc: Path) -> None:
    bad = [
        f"{doc.name}:{number}: {line.strip()}"
        for number, line in enumerate(doc.read_text().splitlines(), 1)
        if _MADE_UP.search(line)
    ]
    assert not bad, "\n".join(bad)


def test_run_directories_are_named_by_start_only(tmp_path: Path) -> None:
    """What the docs promise instead: one `<UTC start>` directory per run, the latest found
    by `--resume`, and nothing else beside them."""
    first = new_run_dir(str(tmp_path))
    second = new_run_dir(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        Path(p).name for p in (first, second)
    )
    assert latest_run_dir(str(tmp_path), "demo") == second
