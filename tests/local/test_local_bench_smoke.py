"""The local benchmarks run end to end and end with their JSON line (no timing asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from local_helpers import TIMEOUT

BENCH = Path(__file__).resolve().parents[2] / "bench" / "local_overhead.py"


def test_bench_smoke() -> None:
    """20 trials, one repeat: the last line is JSON with the documented keys."""
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--trials", "20", "--parallelism", "2", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {"trials", "parallelism", "passhat_seconds", "bare_seconds", "ratio"} <= set(result)
    assert result["trials"] == 20 and result["parallelism"] == 2


def test_spawn_methods_smoke() -> None:
    """bench/spawn_methods.py: 20 children, one repeat; every method timed in the JSON line."""
    script = BENCH.with_name("spawn_methods.py")
    proc = subprocess.run(
        [sys.executable, str(script), "--children", "20", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(result) == {
        "thread_posix_spawn",
        "thread_posix_spawn_setsid",
        "thread_popen",
        "epoll_loop_popen",
        "epoll_loop_spawner_threads",
    }
