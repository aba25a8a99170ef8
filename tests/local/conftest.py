"""Fixtures for the local-executor tests (helpers live in local_helpers.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.local.local_helpers import RunEval, passhat, write_eval


@pytest.fixture
def run_eval(tmp_path: Path) -> RunEval:
    """Write an eval and `passhat run` it with `--out`; returns (process, out dir)."""

    def run(
        doc: dict[str, Any], *extra: str, name: str = "run"
    ) -> tuple[subprocess.CompletedProcess[str], Path]:
        path = write_eval(tmp_path / f"{name}.yaml", doc)
        out = tmp_path / f"{name}-out"
        return passhat("run", path, "--out", out, "--format", "json", *extra), out

    return run
