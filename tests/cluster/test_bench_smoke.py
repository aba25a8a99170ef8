"""The cluster benchmark works: `bench/throughput.py --smoke` runs both sides to completion.

Benchmarks are not timed tests; this only checks that the script still runs against the
current operator and cluster and prints the JSON line `docs/benchmarks.md` relies on.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
KEYS = {
    "trials",
    "parallelism",
    "operator_seconds",
    "job_seconds",
    "operator_api_writes_per_trial",
    "job_api_writes_per_trial",
    "operator_rss_mib",
    "operator_cpu_seconds",
    "throughput_ratio",
    "machine",
}

pytestmark = pytest.mark.cluster


@pytest.mark.slow
def test_throughput_smoke_completes_both_sides(cluster: Any) -> None:
    """A smoke run completes the eval and the Indexed Job and ends with the result JSON."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "throughput.py"), "--smoke"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-5000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not KEYS - result.keys(), f"missing keys: {sorted(KEYS - result.keys())}"
    assert (result["trials"], result["parallelism"]) == (20, 10)
    assert result["operator_seconds"] > 0 and result["job_seconds"] > 0
    assert result["operator_api_writes_per_trial"] > 0 and result["job_api_writes_per_trial"] > 0
    assert result["operator_rss_mib"] > 0
