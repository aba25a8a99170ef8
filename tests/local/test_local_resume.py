"""Killed runs resume exactly once: SIGKILL of the whole group, and Ctrl-C (exit 130)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.local.local_helpers import (
    TIMEOUT,
    by_slot,
    eval_doc,
    passhat,
    rows,
    start_passhat,
    write_eval,
)

# Deterministic outcomes (by task and trial) with a retried infra error, slow enough that
# the run is still going when it is killed.
SCRIPT = """
sleep 0.15
case "$PASSHAT_TASK_ID" in
  steady) exit 0 ;;
  flaky) exit $((PASSHAT_TRIAL % 3 == 0)) ;;
  broken) exit 1 ;;
  retried) [ "$PASSHAT_ATTEMPT" = 0 ] && [ $((PASSHAT_TRIAL % 2)) = 0 ] && exit 75; exit 0 ;;
esac
"""
TASKS = ["steady", "flaky", "broken", "retried"]


def _doc() -> dict[str, Any]:
    return eval_doc(SCRIPT, tasks=TASKS, trials=6, parallelism=3, ks=[1, 3, 6])


def _wait_for_lines(out: Path, count: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + TIMEOUT
    journal = out / "trials.jsonl"
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_text().count("\n") >= count:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    raise AssertionError("the run made no progress")


def _check_exactly_once(out: Path) -> None:
    records = rows(out)
    attempts = Counter((r["task_id"], r["trial"], r["attempt"]) for r in records)
    assert max(attempts.values()) == 1, "an attempt was recorded twice"
    slots = by_slot(records)
    assert len(slots) == len(TASKS) * 6
    for attempts_of_slot in slots.values():
        assert [r["attempt"] for r in attempts_of_slot] == list(range(len(attempts_of_slot)))
        assert [r["final"] for r in attempts_of_slot].count(True) == 1


def test_sigkill_of_the_process_group_then_resume(tmp_path: Path) -> None:
    """After SIGKILL of passhat's process group, --resume reports what an unbroken run does."""
    path = write_eval(tmp_path / "eval.yaml", _doc())
    reference = passhat("run", path, "--out", tmp_path / "ref", "--format", "json")
    assert reference.returncode == 0, reference.stderr

    out = tmp_path / "out"
    proc = start_passhat("run", path, "--out", out, "--format", "json")
    _wait_for_lines(out, 5, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=TIMEOUT)
    assert len(rows(out)) < len(rows(tmp_path / "ref")), "the run ended before the kill"

    resumed = passhat("run", path, "--out", out, "--resume", "--format", "json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == json.loads(reference.stdout)
    _check_exactly_once(out)
    scored = passhat("score", out / "trials.jsonl", "--format", "json")
    assert scored.returncode == 0, scored.stderr
    assert scored.stdout == reference.stdout


def test_ctrl_c_exits_130_and_resumes(tmp_path: Path) -> None:
    """SIGINT kills the running trials, exits 130, and --resume finishes the same run."""
    path = write_eval(tmp_path / "eval.yaml", _doc())
    out = tmp_path / "out"
    proc = start_passhat("run", path, "--out", out, "--format", "json")
    _wait_for_lines(out, 3, proc)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 130, stderr
    assert "--resume" in stderr and "Traceback" not in stderr
    done = len(rows(out))
    assert 3 <= done < len(TASKS) * 6 + 3

    resumed = passhat("run", path, "--out", out, "--resume", "--format", "json")
    assert resumed.returncode == 0, resumed.stderr
    _check_exactly_once(out)
    summary = {s["k"]: s for s in json.loads(resumed.stdout)}
    # steady 6/6, flaky 4/6, broken 0/6, retried 6/6 (3 retried infra errors)
    assert abs(summary[1]["mean_pass_rate"] - (1 + 4 / 6 + 0 + 1) / 4) < 1e-9
    assert summary[1]["flaky"] == ["flaky"]
    assert abs(summary[1]["infra_error_rate"] - 3 / 27) < 1e-9
