"""limits.memory is a hard ceiling: OOM kills count even when the trial's main process exits 0."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from passhat.local import cgroup
from tests.local.local_helpers import RunEval, by_slot, eval_doc, rows, run_executor

PY = sys.executable
# The child allocates 400 MiB (touching every page) under a 64 MiB ceiling; its parent
# shell ignores the failure and exits 0. "small" stays well below the ceiling.
SCRIPT = f"""
case "$PASSHAT_TASK_ID" in
  child-oom) {PY} -c 'bytearray(400 * 2**20)'; exit 0 ;;
  small) {PY} -c 'bytearray(8 * 2**20)' ;;
esac
"""
LIMITS = {"limits": {"memory": "64Mi"}}

needs_cgroup = pytest.mark.skipif(cgroup.detect() is None, reason="no writable memory cgroup")


@needs_cgroup
def test_child_oom_with_parent_exit_0_is_infra_error(run_eval: RunEval) -> None:
    """A grandchild OOM-killed by the cgroup makes the attempt infra_error/oom_killed."""
    doc = eval_doc(SCRIPT, tasks=["child-oom", "small"], trials=2, resources=LIMITS)
    doc["spec"]["retry"] = {"infraErrors": 1, "backoffSeconds": 0.05}
    proc, out = run_eval(doc)
    assert proc.returncode == 0, proc.stderr
    slots = by_slot(rows(out))
    for trial in range(2):
        attempts = slots[("child-oom", trial)]
        assert [(r["outcome"], r["reason"], r["exit_code"]) for r in attempts] == [
            ("infra_error", "oom_killed", 0)
        ] * 2
        assert slots[("small", trial)] == [
            {**slots[("small", trial)][0], "outcome": "pass", "reason": "exit_code"}
        ]
    assert _dead_runs_cgroups() == []


def _dead_runs_cgroups() -> list[str]:
    """Pool cgroups left behind by passhat runs that are gone."""
    hierarchy = cgroup.detect()
    assert hierarchy is not None
    left = []
    for name in os.listdir(hierarchy.memory):
        match = re.match(r"passhat-(\d+)-\d+$", name)
        if match and not os.path.exists(f"/proc/{match.group(1)}"):
            left.append(name)
    return left


def _run_in_process(
    tmp_path: Path, script: str, memory: str, *, pool: bool, placement: Any = None
) -> list[dict[str, Any]]:
    """Run a one-slot eval through the Executor directly (pool=False: RSS sampling)."""
    doc = eval_doc(script, tasks=["t"], trials=1, resources={"limits": {"memory": memory}})
    doc["spec"]["retry"] = {"infraErrors": 0}
    return run_executor(tmp_path, doc, pool=pool, placement=placement)


def test_rss_fallback_kills_a_tree_over_the_limit(tmp_path: Path) -> None:
    """Without cgroups, a process tree holding more than the limit is killed as oom_killed."""
    script = f"{PY} -c 'import time; b = bytearray(300 * 2**20); time.sleep(60)'; exit 0"
    (record,) = _run_in_process(tmp_path, script, "64Mi", pool=False)
    assert (record["outcome"], record["reason"]) == ("infra_error", "oom_killed")
    assert record["duration_s"] < 60


def test_rss_fallback_leaves_small_trials_alone(tmp_path: Path) -> None:
    """Without cgroups, a trial well under its limit passes."""
    script = f"{PY} -c 'import time; b = bytearray(2**20); time.sleep(0.3)'"
    (record,) = _run_in_process(tmp_path, script, "512Mi", pool=False)
    assert (record["outcome"], record["reason"]) == ("pass", "exit_code")


@needs_cgroup
def test_wrapper_placement_counts_child_oom(tmp_path: Path) -> None:
    """The cgroup v2 way in (a sh wrapper joins the cgroup, then execs) also sees the OOM."""
    script = f"{PY} -c 'bytearray(400 * 2**20)'; exit 0"
    (record,) = _run_in_process(tmp_path, script, "64Mi", pool=True, placement="wrapper")
    assert (record["outcome"], record["reason"], record["exit_code"]) == (
        "infra_error",
        "oom_killed",
        0,
    )
