"""`passhat trial` in a pod reads what its container used from its own cgroup (v2 and
v1 layouts, with and without a cgroup namespace), and carries the agent's reported spend
into the result JSON it writes."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from passhat.runner.resources import container_resources
from passhat.runner.trial import run_trial


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_in_a_namespace(tmp_path: Path) -> None:
    """`0::/`: the mount is the container's cgroup; memory.peak and cpu.stat usage_usec."""
    _write(tmp_path / "cgroup.controllers", "cpu memory\n")
    _write(tmp_path / "memory.peak", "73400320\n")
    _write(tmp_path / "cpu.stat", "usage_usec 2500000\nuser_usec 2000000\n")
    _write(tmp_path / "proc", "0::/\n")
    used = container_resources(str(tmp_path), proc_cgroup=str(tmp_path / "proc"))
    assert used is not None
    assert (used.peak_memory_bytes, used.cpu_seconds, used.source) == (73400320, 2.5, "cgroup")


def test_cgroup_v2_without_a_namespace_reads_the_mount(tmp_path: Path) -> None:
    """A host path that does not exist below the mount: the mount itself is the container's."""
    _write(tmp_path / "cgroup.controllers", "memory\n")
    _write(tmp_path / "memory.peak", "1024\n")
    _write(tmp_path / "proc", "0::/kubepods/burstable/pod1/abc\n")
    used = container_resources(str(tmp_path), proc_cgroup=str(tmp_path / "proc"))
    assert used is not None and used.peak_memory_bytes == 1024 and used.cpu_seconds is None


def test_cgroup_v1(tmp_path: Path) -> None:
    """v1: memory.max_usage_in_bytes and cpuacct.usage (nanoseconds)."""
    _write(tmp_path / "memory" / "memory.max_usage_in_bytes", "5000\n")
    _write(tmp_path / "cpuacct" / "cpuacct.usage", "1500000000\n")
    _write(tmp_path / "proc", "4:memory:/kubepods/x\n2:cpuacct:/kubepods/x\n0::/\n")
    used = container_resources(str(tmp_path), proc_cgroup=str(tmp_path / "proc"))
    assert used is not None and (used.peak_memory_bytes, used.cpu_seconds) == (5000, 1.5)


def test_no_cgroup_falls_back_to_the_children_cpu(tmp_path: Path) -> None:
    """Nothing readable: CPU seconds of waited-for children, no peak."""
    used = container_resources(str(tmp_path / "none"), proc_cgroup=str(tmp_path / "missing"))
    assert used is not None and used.source == "rusage" and used.peak_memory_bytes is None


def test_the_agents_spend_reaches_the_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent writes usage and cost to its own $PASSHAT_RESULT: the wrapper's result
    carries them as written (passhat checks them when it records the attempt); outside a
    pod no resources are added (passhat run measures the attempt itself)."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    agent = (
        "import json, os; json.dump({'outcome': 'fail', 'usage': {'input_tokens': 5}, "
        "'cost_usd': -2, 'metrics': {'calls': 3}}, open(os.environ['PASSHAT_RESULT'], 'w'))"
    )
    result = tmp_path / "result.json"
    code = run_trial(
        [sys.executable, "-c", agent],
        transcript=str(tmp_path / "t.log"),
        result_path=str(result),
        echo=io.BytesIO(),
    )
    data = json.loads(result.read_text())
    assert code == 0 and data["outcome"] == "pass"  # NB: graded by the exit code, not the agent
    assert data["usage"] == {"input_tokens": 5} and data["cost_usd"] == -2
    assert data["metrics"] == {"calls": 3} and "resources" not in data


def test_an_oversized_spend_is_refused_not_dropped(tmp_path: Path) -> None:
    """More than 2 KiB of spend would crowd the 4 KiB result: it is replaced by a value
    passhat refuses when it records the attempt, naming the size."""
    from passhat.runner.trial import agent_spend
    from passhat.trials.usage import spend_of

    path = tmp_path / "own.json"
    path.write_text(json.dumps({"metrics": {f"m{i}": i for i in range(400)}}))
    spend = agent_spend(str(path))
    assert spend_of(spend)[1] is not None and "more than 2048" in str(spend["metrics"])
