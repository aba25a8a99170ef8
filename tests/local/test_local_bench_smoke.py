"""The local benchmarks run end to end and end with their JSON line (no timing asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from passhat.local import cgroup
from tests.local.local_helpers import TIMEOUT

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _last_json(script: str, *args: str) -> dict[str, object]:
    """Run bench/`script` with `args`; it must succeed, and its last line is the result."""
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_bench_smoke() -> None:
    """20 trials, one repeat: the last line is JSON with the documented keys."""
    result = _last_json(
        "local_overhead.py", "--trials", "20", "--parallelism", "2", "--repeat", "1"
    )
    assert {"trials", "parallelism", "passhat_seconds", "bare_seconds", "ratio"} <= set(result)
    assert result["trials"] == 20 and result["parallelism"] == 2
    assert "floor_seconds" not in result


def test_bench_floor_smoke() -> None:
    """`--floor` also times passhat's spec loading followed by the bare loop."""
    result = _last_json(
        "local_overhead.py", "--trials", "20", "--parallelism", "2", "--repeat", "1", "--floor"
    )
    assert result["memory_limit"] is None
    for key in ("floor_seconds", "floor_ratio", "floor_fixed_seconds"):
        value = result[key]
        assert isinstance(value, float) and value > 0, key


def test_spawn_methods_smoke() -> None:
    """bench/spawn_methods.py: 20 children, one repeat; every method timed in the JSON line."""
    result = _last_json("spawn_methods.py", "--children", "20", "--repeat", "1")
    assert set(result) == {
        "thread_posix_spawn",
        "thread_posix_spawn_setsid",
        "thread_popen",
        "epoll_loop_popen",
        "epoll_loop_spawner_threads",
    }


def test_local_cpu_smoke() -> None:
    """bench/local_cpu.py: 20 trials, one repeat; passhat's threads and both sides' CPU."""
    result = _last_json("local_cpu.py", "--trials", "20", "--parallelism", "2", "--repeat", "1")
    assert result["trials"] == 20
    for key in ("passhat_loop_s", "passhat_spawner_s", "passhat_cpu_s", "bare_cpu_s"):
        value = result[key]
        assert isinstance(value, float) and value >= 0, key
    per_trial = result["per_trial_ms"]
    assert isinstance(per_trial, dict) and {"passhat_loop", "bare_wall"} <= set(per_trial)


def test_startup_smoke() -> None:
    """bench/startup.py: one repeat; every command and import stage timed in the JSON line."""
    installed = _last_json("startup.py", "--repeat", "1", "--imports")["installed"]
    assert isinstance(installed, dict)
    assert set(installed) == {
        "python -c pass",
        "passhat trial -- true",
        "passhat score",
        "passhat run (1 trial)",
        "import pydantic",
        "import yaml",
        "import passhat.api.spec (the models built)",
        "import passhat.api.load",
        "import passhat.local.driver",
        "import passhat.cli",
    }


def test_spec_parse_smoke() -> None:
    """bench/spec_parse.py: one repeat, one size; every eval timed in the JSON line."""
    result = _last_json("spec_parse.py", "--repeat", "1", "--tasks", "3")
    assert set(result) == {"examples/eval.yaml", "3 tasks"}


def test_archive_cpu_smoke() -> None:
    """bench/archive_cpu.py: a few hundred archives into a store that keeps nothing."""
    result = _last_json("archive_cpu.py", "--attempts", "300", "--repeat", "1", "--profile")
    assert result["attempts"] == 300 and result["transcript_kib"] == 100
    assert isinstance(result["cpu_us_per_attempt"], float) and result["cpu_us_per_attempt"] > 0


def test_bench_memory_limit_smoke() -> None:
    """`--memory-limit` puts the limit on passhat's trials (and says so in the JSON line)."""
    result = _last_json(
        "local_overhead.py",
        "--trials",
        "20",
        "--parallelism",
        "2",
        "--repeat",
        "1",
        "--memory-limit",
        "1Gi",
    )
    assert result["memory_limit"] == "1Gi" and result["trials"] == 20


@pytest.mark.skipif(cgroup.detect() is None, reason="no writable memory cgroup")
def test_cgroup_move_smoke() -> None:
    """bench/cgroup_move.py: two moves per pause; every pause timed in the JSON line."""
    result = _last_json("cgroup_move.py", "--repeat", "2")
    assert {"0", "0.01", "0.05"} <= set(result)


def test_operator_memory_smoke() -> None:
    """bench/operator_memory.py: 40 pods of 4 KiB params, all created, peak RSS reported."""
    result = _last_json("operator_memory.py", "--params-kib", "4", "--parallelism", "40")
    runs = result["runs"]
    assert isinstance(runs, list) and len(runs) == 1
    assert runs[0]["created"] == 40
    assert runs[0]["peak_rss_mib"] >= runs[0]["rss_before_mib"] > 0


def test_records_read_bench_smoke() -> None:
    """`records_read.py --smoke`: one read of 500 archived records, measured."""
    result = _last_json("records_read.py", "--smoke")
    assert result["records"] == 500
    for key in ("cpu_seconds", "body_mib", "peak_rss_added_mib", "cpu_us_per_record"):
        assert isinstance(result[key], int | float), key


def test_pass_cost_smoke() -> None:
    """`pass_cost.py --smoke --profile 5`: a few passes over a small eval, each measured, and
    the profile printed (the operator's functions only)."""
    proc = subprocess.run(
        [sys.executable, str(BENCH / "pass_cost.py"), "--smoke", "--profile", "5"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout.strip().splitlines()[-1])["runs"]
    assert run["passes"] == 3 and run["tasks"] == 50 and run["pods_in_flight"] > 0
    assert run["recorded_per_pass"] > 0 and run["own_cpu_ms_median"] > 0
    profiled = [line for line in proc.stderr.splitlines() if "passhat/" in line]
    assert profiled and not any("tests/" in line for line in profiled)


def _audit(at: float, verb: str, name: str | None, *, resource: str = "pods", sub: str = "") -> str:
    stamp = f"2026-12-07T10:00:{at:09.6f}Z"
    ref: dict[str, str] = {"resource": resource, "namespace": "ns"}
    if name:
        ref["name"] = name
    if sub:
        ref["subresource"] = sub
    event = {"verb": verb, "objectRef": ref, "stageTimestamp": stamp}
    event["responseStatus"] = {"code": 201 if verb == "create" else 200}
    return json.dumps(event)


def test_audit_timeline_stages(tmp_path: Path) -> None:
    """bench/audit_timeline.py: a pod's stages from its create (or, for a Job's pods named
    by generateName, its binding) to kwok's last status patch."""
    lines = [_audit(0.0, "create", "bench", resource="consistencyevals")]
    for i, created in enumerate((0.1, 0.2)):
        name = f"p{i}"
        lines += [
            _audit(created, "create", name),
            _audit(created + 0.05, "create", name, sub="binding"),
            _audit(created + 0.15, "patch", name, sub="status"),
            _audit(created + 5.15, "patch", name, sub="status"),
        ]
    lines.append(_audit(0.2, "create", None))  # a Job's create by generateName: no name
    lines += [
        _audit(0.25, "create", "j0", sub="binding"),
        _audit(0.35, "patch", "j0", sub="status"),
        _audit(5.35, "patch", "j0", sub="status"),
    ]
    log = tmp_path / "audit.log"
    log.write_text("\n".join(lines) + "\n")
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH / "audit_timeline.py"),
            "ns",
            "--audit-log",
            str(log),
            "--parallelism",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # NB: j0's binding is its create, so only p0 and p1 have a create-to-binding stage
    assert out.startswith("3 pods, 3 ended; last ended 5.35 s after the create"), out
    assert "create to binding: median 0.050 s, p90 0.050 s" in out
    assert "binding to Running: median 0.100 s" in out
    assert "Running to end: median 5.000 s" in out
    assert "mean 5.133 s; 2 waves x the mean life: 10.27 s" in out
