"""The helm the chart tests run, and running it.

It is the helm hack/cluster builds: `.cluster/bin/helm` once `hack/cluster/up.sh` ran, else
the build cache's (the path versions.sh names), else one on PATH. No helm at all fails the
test: it is never skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "passhat"
# The Kubernetes version `helm template` renders for: the test cluster's (hack/cluster).
KUBE_VERSION = "1.34.0"


@cache
def helm_binary() -> str:
    """The helm of the test cluster's tools; fails (never skips) when there is none."""
    versions = REPO / "hack" / "cluster" / "versions.sh"
    cached = subprocess.run(
        ["bash", "-c", 'source "$1" && echo "$HELM_BIN"', "-", str(versions)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    for path in (REPO / ".cluster" / "bin" / "helm", Path(cached) / "helm"):
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    found = shutil.which("helm")
    if found is None:
        pytest.fail("no helm: run hack/cluster/build.sh helm (or hack/cluster/up.sh)")
    return found


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run helm; fail the test with its stderr when `check` and it fails."""
    proc = subprocess.run(
        [helm_binary(), *args], capture_output=True, text=True, timeout=120, check=False
    )
    if check and proc.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} failed:\n{proc.stderr}")
    return proc
