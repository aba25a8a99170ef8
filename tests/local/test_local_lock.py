"""One `passhat run` per run directory: a second one is refused (exit 2) while the first
holds the lock, the lock dies with its process (SIGKILL included), and a journal line
that is there twice is counted once."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from tests.local.local_helpers import (
    TIMEOUT,
    by_slot,
    eval_doc,
    passhat,
    rows,
    start_passhat,
    write_eval,
)


def _wait_for_lock(out: Path) -> int:
    """The pid the lock file names, once a run holds it."""
    deadline = time.monotonic() + TIMEOUT
    lock = out / ".passhat.lock"
    while time.monotonic() < deadline:
        text = lock.read_text().strip() if lock.exists() else ""
        if text.isdigit():
            return int(text)
        time.sleep(0.05)
    raise AssertionError("the first run never took the lock")


def test_second_run_on_the_same_out_is_refused(tmp_path: Path) -> None:
    """While a run holds --out, a --resume of it exits 2 naming the holder; after the
    holder is SIGKILLed, --resume runs every slot exactly once."""
    marker = tmp_path / "slow"
    marker.touch()
    doc = eval_doc(f'[ -e "{marker}" ] && sleep 60; exit 0', tasks=["a", "b", "c"], trials=2)
    path = write_eval(tmp_path / "v.yaml", doc)
    out = tmp_path / "out"
    first = start_passhat("run", path, "--out", out, "--quiet")
    try:
        pid = _wait_for_lock(out)
        second = passhat("run", path, "--out", out, "--resume", "--quiet")
        assert second.returncode == 2, second.stderr
        assert "another passhat run is using this run directory" in second.stderr
        assert f"(pid {pid})" in second.stderr
        assert "Traceback" not in second.stderr
        assert rows(out) == []
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate()
    marker.unlink()
    resumed = passhat("run", path, "--out", out, "--resume", "--quiet", "--format", "json")
    assert resumed.returncode == 0, resumed.stderr
    slots = by_slot(rows(out))
    assert sorted(slots) == [(t, n) for t in "abc" for n in range(2)]
    assert all(len(records) == 1 for records in slots.values())


def test_duplicated_journal_line_is_counted_once(tmp_path: Path) -> None:
    """The report of a --resume counts the attempts the ledger took, not raw lines."""
    doc = eval_doc("exit $((PASSHAT_TRIAL % 2))", tasks=["a"], trials=2, ks=[1])
    path = write_eval(tmp_path / "v.yaml", doc)
    out = tmp_path / "out"
    assert passhat("run", path, "--out", out, "--quiet").returncode == 0
    journal = out / "trials.jsonl"
    passed = next(line for line in journal.read_text().splitlines() if '"pass"' in line)
    with journal.open("a") as handle:
        handle.write(passed + "\n")
    again = passhat("run", path, "--out", out, "--resume", "--quiet", "--format", "json")
    assert again.returncode == 0, again.stderr
    (summary,) = json.loads(again.stdout)
    assert summary["mean_pass_rate"] == 0.5
