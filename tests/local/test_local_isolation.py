"""Each attempt gets a fresh empty directory, a clean environment and its own session."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from passhat.local import cgroup
from passhat.local.orphans import Sweeper
from tests.local.local_helpers import (
    RunEval,
    eval_doc,
    rows,
    run_executor,
    start_passhat,
    write_eval,
)

# Trial 0 leaves a file behind; any trial that sees a file fails. The environment is
# dumped into the transcript. NB: `$$$$` is the shell's `$$` after Kubernetes' expansion.
SCRIPT = """
[ -z "$(ls -A)" ] || { echo "dirty: $(ls -A)"; exit 1; }
[ "$PWD" = "$HOME" ] && [ "$TMPDIR" = "$HOME" ] || exit 1
touch leftover "$TMPDIR/also-left"
env | sort
[ "$(ps -o sid= -p $$$$ | tr -d ' ')" = "$$$$" ] || { echo "not a session leader"; exit 1; }
"""


def test_fresh_directory_and_clean_environment(
    run_eval: RunEval, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No file or caller variable reaches a trial; PASSHAT_* and the container env do."""
    monkeypatch.setenv("SECRET_TOKEN", "leak")
    doc = eval_doc(
        SCRIPT,
        tasks=["t"],
        trials=3,
        parallelism=1,
        env=[{"name": "GREETING", "value": "hi"}, {"name": "BOTH", "value": "$(GREETING)!"}],
    )
    doc["spec"]["tasks"][0]["params"] = {"x": 1}
    proc, out = run_eval(doc)
    assert proc.returncode == 0, proc.stderr
    assert [r["outcome"] for r in rows(out)] == ["pass"] * 3
    text = (out / "transcripts" / "t" / "2-0.log").read_text()
    env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    assert "SECRET_TOKEN" not in env
    assert env["GREETING"] == "hi" and env["BOTH"] == "hi!"
    assert env["PASSHAT_EVAL"] == "t" and env["PASSHAT_TASK_ID"] == "t"
    assert json.loads(env["PASSHAT_TASK"]) == {"x": 1}
    assert (env["PASSHAT_TRIAL"], env["PASSHAT_ATTEMPT"]) == ("2", "0")
    assert "PATH" in env and "PASSHAT_RESULT" in env


def test_odd_trials_do_not_break_the_run(run_eval: RunEval) -> None:
    """A directory or a FIFO at $PASSHAT_RESULT, a deleted cwd, a read-only tree: cleaned up.

    (A FIFO with no writer left must not block the read of the result.)
    """
    script = """
    case "$PASSHAT_TRIAL" in
      0) mkdir "$PASSHAT_RESULT"; exit 0 ;;
      1) cd /; rm -rf "$HOME"; exit 1 ;;
      2) mkdir -p deep/er && touch deep/er/f && chmod -R a-w deep; exit 0 ;;
      3) mkfifo "$PASSHAT_RESULT"; exit 1 ;;
      *) [ -z "$(ls -A "$HOME")" ] && [ ! -e "$PASSHAT_RESULT" ] ;;
    esac
    """
    proc, out = run_eval(eval_doc(script, tasks=["t"], trials=6, parallelism=1))
    assert proc.returncode == 0, proc.stderr
    assert [r["outcome"] for r in rows(out)] == ["pass", "fail", "pass", "fail", "pass", "pass"]


# Each trial fails if the daemon of the trial before it, or that daemon's child, still
# runs (a zombie has ended), then starts its own: `setsid` takes it out of the attempt's
# session and process group, and the pid files (outside the trial's directory) say which
# processes those are.
DAEMON = """
for f in "$0" "$0.child"; do
  pid=$(cat "$f" 2>/dev/null)
  state=$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)
  if [ -n "$pid" ] && [ -n "$state" ] && [ "$state" != Z ]; then echo "$f: $pid runs"; exit 1; fi
done
old=$(cat "$0" 2>/dev/null)
setsid sh -c 'sleep 300 & echo $$! > "$0.child"; echo $$$$ > "$0"; exec sleep 300' "$0" \\
  < /dev/null > /dev/null 2>&1 &
while [ ! -s "$0" ] || [ "$(cat "$0")" = "$old" ]; do sleep 0.01; done
"""


def _daemon_doc(pid_file: Path) -> dict[str, Any]:
    doc = eval_doc(DAEMON, tasks=["t"], trials=3, parallelism=1)
    doc["spec"]["trial"]["template"]["spec"]["containers"][0]["args"] = [str(pid_file)]
    return doc


def _daemons(pid_file: Path) -> list[int]:
    """The pids the last trial wrote: its daemon and the daemon's child."""
    files = (pid_file, pid_file.with_name(pid_file.name + ".child"))
    return [int(path.read_text()) for path in files if path.exists()]


def _transcripts(directory: Path) -> list[tuple[str, str]]:
    return [(path.name, path.read_text()) for path in sorted(directory.iterdir())]


@pytest.mark.parametrize(
    "limits",
    [
        pytest.param(None, id="subreaper"),
        pytest.param(
            {"limits": {"memory": "1Gi"}},
            id="cgroup",
            marks=pytest.mark.skipif(cgroup.detect() is None, reason="no writable cgroup"),
        ),
    ],
)
def test_a_process_that_left_the_session_ends_with_its_attempt(
    run_eval: RunEval, tmp_path: Path, limits: dict[str, Any] | None
) -> None:
    """A daemon (`setsid`) and its child never reach the next trial nor outlive the run,
    as in a container: without limits passhat is their subreaper and kills them when
    their attempt ends; with limits the attempt's cgroup ends all it started."""
    pid_file = tmp_path / "daemon.pid"
    doc = _daemon_doc(pid_file)
    if limits is not None:
        doc["spec"]["trial"]["template"]["spec"]["containers"][0]["resources"] = limits
    try:
        proc, out = run_eval(doc)
        assert proc.returncode == 0, proc.stderr
        outcomes = [r["outcome"] for r in rows(out)]
        assert outcomes == ["pass"] * 3, _transcripts(out / "transcripts" / "t")
        assert not any(_running(pid) for pid in _daemons(pid_file))
    finally:
        _kill_left(pid_file)


def _kill_left(pid_file: Path) -> None:
    for pid in _daemons(pid_file):
        if _running(pid):
            os.kill(pid, 9)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_memory_limit_without_cgroups_still_ends_what_left_the_session(
    tmp_path: Path,
) -> None:
    """Limits on a machine without writable cgroups (RSS sampling): the subreaper still
    kills a finished attempt's daemon and its child before the next trial."""
    pid_file = tmp_path / "daemon.pid"
    doc = _daemon_doc(pid_file)
    container = doc["spec"]["trial"]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"memory": "1Gi"}}
    try:
        records = run_executor(tmp_path, doc, pool=False)
        outcomes = [r["outcome"] for r in records]
        assert outcomes == ["pass"] * 3, _transcripts(tmp_path / "transcripts" / "t")
        assert not any(_running(pid) for pid in _daemons(pid_file))
    finally:
        _kill_left(pid_file)


# Every trial starts a daemon the classic way (a new session, then a fork whose parent
# exits: the daemon is an orphan, passhat's child, while its attempt still runs), then
# checks for a while that it still runs while other attempts end around it. Its pid goes
# to $0.<task>-<trial>.
OWN_DAEMON = """
pidfile="$0.$PASSHAT_TASK_ID-$PASSHAT_TRIAL"
setsid sh -c 'sleep 300 & echo $$! > "$0"' "$pidfile" < /dev/null > /dev/null 2>&1
while [ ! -s "$pidfile" ]; do sleep 0.01; done
case "$PASSHAT_TASK_ID" in a) checks=4 ;; b) checks=12 ;; *) checks=20 ;; esac
while [ "$checks" -gt 0 ]; do
  kill -0 "$(cat "$pidfile")" || { echo "my daemon was killed"; exit 1; }
  sleep 0.05
  checks=$((checks - 1))
done
"""


def test_a_running_attempts_daemon_is_left_alone(run_eval: RunEval, tmp_path: Path) -> None:
    """The sweep at the end of one attempt kills only finished attempts' orphans (their
    environment says whose they are), not the daemon of an attempt still running (the
    tasks check for 0.2, 0.6 and 1 s, so attempts end while others run)."""
    base = tmp_path / "daemon"
    doc = eval_doc(OWN_DAEMON, tasks=["a", "b", "c"], trials=2, parallelism=3)
    doc["spec"]["trial"]["template"]["spec"]["containers"][0]["args"] = [str(base)]
    pid_files = [tmp_path / f"daemon.{task}-{trial}" for task in "abc" for trial in (0, 1)]
    try:
        proc, out = run_eval(doc)
        assert proc.returncode == 0, proc.stderr
        assert [r["outcome"] for r in rows(out)] == ["pass"] * 6
        assert not any(_running(int(path.read_text())) for path in pid_files)
    finally:
        for path in pid_files:
            if path.exists() and _running(pid := int(path.read_text())):
                os.kill(pid, 9)


def test_an_orphan_without_its_environment_is_killed_at_the_end(
    run_eval: RunEval, tmp_path: Path
) -> None:
    """A daemon that dropped the PASSHAT_* variables (`env -i`) names no attempt: it is
    killed once no attempt runs, at the latest when the run ends."""
    pid_file = tmp_path / "daemon.pid"
    script = """
    setsid env -i sh -c 'echo $$$$ > "$0"; exec sleep 300' "$0" < /dev/null > /dev/null 2>&1 &
    while [ ! -s "$0" ]; do sleep 0.01; done
    """
    doc = eval_doc(script, tasks=["t"], trials=1, parallelism=1)
    doc["spec"]["trial"]["template"]["spec"]["containers"][0]["args"] = [str(pid_file)]
    try:
        proc, out = run_eval(doc)
        assert proc.returncode == 0, proc.stderr
        assert [r["outcome"] for r in rows(out)] == ["pass"]
        assert not _running(int(pid_file.read_text()))
    finally:
        if pid_file.exists() and _running(pid := int(pid_file.read_text())):
            os.kill(pid, 9)


# Each level of the chain records its pid, starts the next level in the background and
# becomes `sleep`: $1 levels below it, all in the process group of the first.
CHAIN = """
echo $$ > "$2/$1"
if [ "$1" -gt 0 ]; then sh "$0" $(($1 - 1)) "$2" & fi
exec sleep 300
"""
# Trial 1 fails if any level of trial 0's chain still runs; each trial starts a chain of
# 301 processes in a session of its own (its top is an orphan as soon as `( … &)` exits).
CHAINS = """
dir="$0.$PASSHAT_TRIAL"
prev="$0.$((PASSHAT_TRIAL - 1))"
for f in "$prev"/*; do
  [ -f "$f" ] || continue
  state=$(cut -d' ' -f3 "/proc/$(cat "$f")/stat" 2>/dev/null)
  if [ -n "$state" ] && [ "$state" != Z ]; then echo "$f runs"; exit 1; fi
done
mkdir -p "$dir"
(setsid sh "$0" 300 "$dir" < /dev/null > /dev/null 2>&1 &)
while [ "$(ls "$dir" | wc -l)" -lt 301 ]; do sleep 0.05; done
"""


def test_a_deep_chain_that_left_the_session_ends_with_its_attempt(
    run_eval: RunEval, tmp_path: Path
) -> None:
    """Killing an orphan that leads its own process group kills the group: a chain of 301
    processes is gone before the next trial starts, not one generation per pass."""
    chain = tmp_path / "chain.sh"
    chain.write_text(CHAIN)
    doc = eval_doc(CHAINS.replace('sh "$0" 300', f'sh "{chain}" 300'), tasks=["t"], trials=2)
    doc["spec"]["parallelism"] = 1
    doc["spec"]["trial"]["template"]["spec"]["containers"][0]["args"] = [str(tmp_path / "c")]
    try:
        proc, out = run_eval(doc)
        assert proc.returncode == 0, proc.stderr
        outcomes = [r["outcome"] for r in rows(out)]
        assert outcomes == ["pass"] * 2, _transcripts(out / "transcripts" / "t")
        assert not any(_running(pid) for pid in _pids_in(tmp_path, "c.*"))
    finally:
        for pid in _pids_in(tmp_path, "c.*"):
            if _running(pid):
                os.kill(pid, 9)


def test_one_sweep_kills_the_whole_group_an_orphan_leads(tmp_path: Path) -> None:
    """A single pass, with no time to look again, ends all 51 levels of a chain: the
    orphan at its top leads their process group, and the group is killed with it."""
    chain = tmp_path / "chain.sh"
    chain.write_text(CHAIN)
    levels = tmp_path / "levels"
    levels.mkdir()
    sweeper = Sweeper()
    try:
        top = subprocess.Popen(
            ["sh", "-c", f"(setsid sh {chain} 50 {levels} < /dev/null > /dev/null 2>&1 &)"]
        )
        top.wait(30)  # NB: the chain's top is now an orphan, this process's child
        deadline = time.monotonic() + 30
        while len(list(levels.iterdir())) < 51:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert sweeper.sweep((), wait=0.0) >= 1
        deadline = time.monotonic() + 5
        while any(_running(pid) for pid in _pids_in(tmp_path, "levels")):
            assert time.monotonic() < deadline, "a level outlived the sweep"
            time.sleep(0.05)
    finally:
        sweeper.close()
        for pid in _pids_in(tmp_path, "levels"):
            if _running(pid):
                os.kill(pid, 9)


def _pids_in(directory: Path, pattern: str) -> list[int]:
    return [int(f.read_text()) for d in directory.glob(pattern) for f in d.iterdir()]


def test_orphans_that_end_by_themselves_are_reaped_while_the_attempt_runs(
    tmp_path: Path,
) -> None:
    """passhat is their subreaper, so it must reap them: 200 background commands whose
    shells exit leave no zombies behind while their attempt goes on."""
    made = tmp_path / "made"
    script = f"""
    i=0
    while [ "$i" -lt 200 ]; do (true &); i=$((i + 1)); done
    touch {made}
    sleep 4
    """
    path = write_eval(tmp_path / "eval.yaml", eval_doc(script, tasks=["t"], trials=1))
    proc = start_passhat("run", path, "--out", tmp_path / "out", "--quiet")
    try:
        deadline = time.monotonic() + 60
        while not made.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
            time.sleep(0.05)
        time.sleep(2.0)  # NB: orphans are reaped every second (REAP_INTERVAL)
        assert proc.poll() is None
        assert _zombies_of(proc.pid) < 10
    finally:
        proc.wait(60)
    assert proc.returncode == 0


def _zombies_of(parent: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            count += state == "Z" and int(ppid) == parent
    return count


FREEZER = Path("/sys/fs/cgroup/freezer")


@pytest.mark.skipif(not os.access(FREEZER, os.W_OK), reason="no writable v1 freezer")
def test_an_orphan_that_cannot_die_is_waited_for_once(run_eval: RunEval, tmp_path: Path) -> None:
    """An orphan that cannot die yet (here frozen, as in a hung NFS read) is sent SIGKILL
    and waited for once (1 s), not again at every later attempt's end nor for 5 s at the
    end of the run."""
    frozen = FREEZER / f"passhat-test-{os.getpid()}"
    frozen.mkdir()
    pid_file = tmp_path / "frozen.pid"
    script = f"""
    if [ "$PASSHAT_TRIAL" = 0 ]; then
      setsid sh -c 'echo $$$$ > {frozen}/cgroup.procs; echo $$$$ > {pid_file}; exec sleep 300' \\
        < /dev/null > /dev/null 2>&1 &
      while [ ! -s {pid_file} ]; do sleep 0.01; done
      echo FROZEN > {frozen}/freezer.state
    fi
    """
    doc = eval_doc(script, tasks=["t"], trials=6, parallelism=1)
    try:
        start = time.monotonic()
        proc, out = run_eval(doc)
        elapsed = time.monotonic() - start
        assert proc.returncode == 0, proc.stderr
        assert [r["outcome"] for r in rows(out)] == ["pass"] * 6
        # NB: waited for at every end and at the run's end it would be 5 x 1 s + 5 s
        assert elapsed < 6.0
    finally:
        (frozen / "freezer.state").write_text("THAWED")
        if pid_file.exists() and _running(pid := int(pid_file.read_text())):
            os.kill(pid, 9)
        deadline = time.monotonic() + 10
        while True:
            try:
                frozen.rmdir()
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
