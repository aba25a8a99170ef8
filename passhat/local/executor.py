"""The local executor: runs every pending trial slot of a plan as sandboxed subprocesses.

One loop, one thread, no per-attempt threads and no polling: each running attempt is a
pidfd in an epoll, and the loop sleeps until an attempt ends, a timeout or retry backoff
falls due, or a stop is requested. Attempts are started by a few spawner threads
(`passhat.local.spawner`) so that their start-up waits overlap. When an attempt ends, the
whole of it is settled in one place (`_finish`): its process group and cgroup are
emptied (without a cgroup, what left its session: `passhat.local.orphans`), it is
classified (`passhat.trials.classify_exit`), its result JSON (when it wrote a valid one)
kept in `results/`, folded into the `SlotLedger` (exactly once) and appended to the
journal with what it spent (the result JSON's `usage`, `cost_usd`, `metrics`) and used
(`resources`: CPU seconds from wait4's rusage, peak memory from its cgroup when it has one,
else the rusage's largest RSS), and a retry is scheduled when the retry plan allows one.
`spec.budget` is checked before every start (`passhat.trials.budget`): past it, no
attempt starts, and a reached maxCostUSD stops the run as a deadline does.
The loop does not run on the main thread: with cgroup v1 a spawning thread steps into the
attempt's cgroup (see `passhat.local.cgroup`), which the main thread must never do, and
the main thread is left to turn signals into `stop()`.

Stopping (Ctrl-C, SIGTERM) kills the running attempts and records nothing for them:
they run again on `--resume`, under the same attempt numbers.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import select
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from passhat.api.spec import Budget
from passhat.local import rss
from passhat.local.capacity import Capacity
from passhat.local.cgroup import Pool, Slot
from passhat.local.journal import Journal
from passhat.local.orphans import REAP_INTERVAL, AttemptKey, Sweeper
from passhat.local.plan import Plan
from passhat.local.sandbox import Scratch, expand
from passhat.local.spawner import Spawner, SpawnError, SpawnRequest
from passhat.records.layout import NAME_MAX, RESULTS, transcript_name
from passhat.trials.budget import BudgetCheck, check_budget
from passhat.trials.classify import classify_exit, normalize_exit_code
from passhat.trials.ledger import SlotLedger
from passhat.trials.outcomes import Outcome, Verdict
from passhat.trials.result import MAX_RESULT_BYTES, parse_result, result_problem
from passhat.trials.usage import Resources, spend_of

__all__ = [
    "KILL_GRACE",
    "MAX_SLEEP",
    "NAME_MAX",
    "SPAWN_THREADS",
    "Attempt",
    "Executor",
    "Progress",
    "transcript_name",
]

# Seconds between SIGTERM and SIGKILL of a timed-out attempt's process group.
KILL_GRACE = 2.0
# Threads that start attempts (their start-up waits overlap; see passhat.local.spawner).
SPAWN_THREADS = 4
# The longest sleep of the loop, in seconds: it wakes and sleeps again (epoll's limit is
# about 24.8 days, and a deadline may lie years ahead).
MAX_SLEEP = 3600.0


@dataclass
class Progress:
    """Counts the progress display and the metrics read while the loop runs."""

    slots: int
    done: int = 0
    running: int = 0
    retries: int = 0
    passed: int = 0
    failed: int = 0
    infra_errors: int = 0


@dataclass(eq=False)
class Attempt:
    """One attempt of a trial slot, from its spawn request to its end."""

    task: int
    trial: int
    attempt: int
    worker: int
    started: float
    deadline: float
    cgroup: Slot | None = None
    pid: int = -1
    process: subprocess.Popen[bytes] | None = None
    pidfd: int = -1
    kill_at: float | None = None
    timed_out: bool = False
    over_memory: bool = False
    rusage: Any = None


class Executor:
    """Runs a plan's pending slots; records each finished attempt in ledger and journal."""

    def __init__(
        self,
        plan: Plan,
        *,
        ledger: SlotLedger,
        journal: Journal,
        transcripts: str,
        capacity: Capacity,
        results: str | None = None,
        pool: Pool | None,
        on_record: Callable[[dict[str, Any]], None] | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        fresh_transcripts: bool = True,
        spawn_threads: int = SPAWN_THREADS,
        budget: Budget | None = None,
        spent_usd: float = 0.0,
    ) -> None:
        self.plan = plan
        self.ledger = ledger
        self.journal = journal
        self.transcripts = transcripts
        # NB: beside transcripts/ unless told: the run directory's results/
        self.results = results or os.path.join(os.path.dirname(transcripts), RESULTS)
        self.capacity = capacity
        self.pool = pool
        self.on_record = on_record
        self.on_progress = on_progress
        self.fresh_transcripts = fresh_transcripts
        self.spawn_threads = max(1, min(spawn_threads, plan.parallelism))
        self.progress = Progress(slots=plan.slots, done=ledger.done, retries=ledger.retries)
        self.budget = budget
        # The dollars the recorded attempts reported (a resumed run's included).
        self.spent_usd = spent_usd
        # Set when spec.budget stopped the run (run() then returns False).
        self.exhausted: BudgetCheck | None = None
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._epoll = select.epoll()
        self._epoll.register(self._wake_r, select.EPOLLIN)
        self._fds: dict[int, Attempt] = {}
        self._active: set[Attempt] = set()
        self._by_pid: dict[int, Attempt] = {}
        self._free_workers: list[int] = []
        self._workers = 0
        self._scratch: Scratch | None = None
        self._spawner: Spawner | None = None
        self._transcript_dirs: dict[int, str] = {}
        self._result_dirs: dict[int, str] = {}
        self._watch_rss = pool is None and plan.limits.memory is not None
        self._next_rss = 0.0
        self._orphans: Sweeper | None = None
        self._next_reap = 0.0

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def stop(self) -> None:
        """Ask the loop to kill the running attempts and return (safe from a signal handler)."""
        self._stop.set()
        self._wake()

    def run(self) -> bool:
        """Run until every slot is final (True) or a stop was requested (False)."""
        self._scratch = Scratch()
        _close_inherited_fds()
        if self.pool is None:
            # NB: no cgroup ends what leaves an attempt's session: catch it as a subreaper
            with contextlib.suppress(OSError, AttributeError):
                self._orphans = Sweeper()
        self._spawner = Spawner(
            threads=self.spawn_threads,
            pool=self.pool,
            on_started=self._on_started,
            on_failed=self._wake,
        )
        try:
            return self._loop()
        finally:
            self._kill_all()
            self._spawner.close()
            if self._orphans is not None:
                self._orphans.close()
            self._scratch.close()
            self._epoll.close()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _loop(self) -> bool:
        plan = self.plan
        assert self._spawner is not None
        # NB: trial-major order, so a partial run already covers every task
        fresh = deque(
            (task, trial)
            for trial in range(plan.trials)
            for task in range(len(plan.task_ids))
            if not self.ledger.is_final(task, trial)
        )
        retries: list[tuple[float, int, int]] = []
        self._report_progress()
        while fresh or retries or self._active:
            if self._stop.is_set():
                return False
            budget = self._check_budget()
            if budget.exhausted is not None:
                # NB: the running attempts are killed and not recorded (run's finally)
                self.exhausted = budget
                return False
            now = time.monotonic()
            may_start = budget.may_start
            while (
                len(self._active) < plan.parallelism
                and (fresh or (retries and retries[0][0] <= now))
                and self.capacity.fits(plan.requests)
                and (may_start is None or may_start > 0)
            ):
                if may_start is not None:
                    may_start -= 1
                if retries and retries[0][0] <= now:
                    _, task, trial = heapq.heappop(retries)
                else:
                    task, trial = fresh.popleft()
                self._start(task, trial)
            for fd, _ in self._epoll.poll(self._next_wakeup(retries)):
                if fd == self._wake_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._wake_r, 4096)
                    for request in self._spawner.failures():
                        self._forget(request.tag)
                        raise SpawnError(request.error or OSError("the trial did not start"))
                    continue
                attempt = self._fds.pop(fd)
                retry_at = self._finish(attempt)
                if retry_at is not None:
                    heapq.heappush(retries, (retry_at, attempt.task, attempt.trial))
            self._enforce_deadlines()
            self._reap_orphans()
            self._report_progress()
        return True

    def _check_budget(self) -> BudgetCheck:
        return check_budget(
            self.budget,
            attempts=self.ledger.attempts_recorded,
            live=len(self._active),
            cost_usd=self.spent_usd,
            pending=self.ledger.pending,
        )

    def _next_wakeup(self, retries: list[tuple[float, int, int]]) -> float | None:
        due = [a.kill_at if a.kill_at is not None else a.deadline for a in self._active]
        if retries and len(self._active) < self.plan.parallelism:
            due.append(retries[0][0])
        if self._watch_rss and self._active:
            due.append(self._next_rss)
        if self._orphans is not None and self._active:
            due.append(self._next_reap)
        if self.on_progress is not None and self._active:
            due.append(time.monotonic() + 1.0)
        if not due:
            return None
        return min(MAX_SLEEP, max(0.0, min(due) - time.monotonic()))

    def _start(self, task: int, trial: int) -> None:
        plan, scratch, spawner = self.plan, self._scratch, self._spawner
        assert scratch is not None and spawner is not None
        attempt_no = self.ledger.next_attempt(task, trial)
        worker = self._free_workers.pop() if self._free_workers else self._new_worker()
        workdir = scratch.workdir(worker)
        env = dict(plan.env)
        env.update(
            HOME=workdir,
            TMPDIR=workdir,
            PWD=workdir,
            PASSHAT_EVAL=plan.eval_name,
            PASSHAT_TASK_ID=plan.task_ids[task],
            PASSHAT_TASK=plan.task_params[task],
            PASSHAT_TRIAL=str(trial),
            PASSHAT_ATTEMPT=str(attempt_no),
            PASSHAT_RESULT=scratch.result_path(worker),
        )
        argv = plan.argv
        if plan.expand_args:
            argv = [argv[0], *(expand(arg, env) for arg in argv[1:])]
        now = time.monotonic()
        attempt = Attempt(
            task=task,
            trial=trial,
            attempt=attempt_no,
            worker=worker,
            started=now,
            deadline=now + plan.timeout_seconds,
            cgroup=self.pool.acquire() if self.pool is not None else None,
        )
        self._active.add(attempt)
        self.capacity.take(plan.requests)
        self.progress.running = len(self._active)
        spawner.submit(
            SpawnRequest(
                executable=plan.executable,
                argv=argv,
                env=env,
                cwd=workdir,
                transcript=self._transcript_path(task, trial, attempt_no),
                cgroup=attempt.cgroup,
                tag=attempt,
            )
        )

    def _on_started(self, request: SpawnRequest) -> None:
        """Hand a started attempt to the loop (runs on a spawner thread)."""
        attempt: Attempt = request.tag
        assert request.process is not None
        attempt.process = request.process
        attempt.pid = request.process.pid
        try:
            attempt.pidfd = os.pidfd_open(attempt.pid)
        except BaseException:
            # NB: the loop never learns of this process: end it here (a failed spawn)
            with contextlib.suppress(OSError):
                os.killpg(attempt.pid, signal.SIGKILL)
            request.process.wait()
            raise
        self._by_pid[attempt.pid] = attempt
        self._fds[attempt.pidfd] = attempt
        # NB: registered last: the loop may handle the attempt's end right away. One-shot:
        # once it has fired, closing the pidfd is all the clean-up the registration needs,
        # even while a sibling's vfork child still holds a copy of the fd (see _reap)
        self._epoll.register(attempt.pidfd, select.EPOLLIN | select.EPOLLONESHOT)

    def _forget(self, attempt: Attempt, *, result_left: bool = True) -> None:
        """Drop an attempt that ended (or never started) from the running set."""
        self._active.discard(attempt)
        self._by_pid.pop(attempt.pid, None)
        if attempt.cgroup is not None and self.pool is not None:
            self.pool.release(attempt.cgroup)
        assert self._scratch is not None
        self._scratch.reset(attempt.worker, result_left=result_left)
        self._free_workers.append(attempt.worker)
        self.capacity.give(self.plan.requests)
        self.progress.running = len(self._active)

    def _running_keys(self, *, but: Attempt) -> set[AttemptKey]:
        """The other attempts that run (or are being started), as their environments name
        them."""
        names = self.plan.task_ids
        return {(names[a.task], str(a.trial), str(a.attempt)) for a in self._active if a is not but}

    def _new_worker(self) -> int:
        self._workers += 1
        return self._workers - 1

    def _transcript_path(self, task: int, trial: int, attempt: int) -> str:
        directory = self._transcript_dirs.get(task)
        if directory is None:
            name = transcript_name(self.plan.task_ids[task])
            directory = self._transcript_dirs[task] = os.path.join(self.transcripts, name)
        path = os.path.join(directory, f"{trial}-{attempt}.log")
        if not self.fresh_transcripts:
            # NB: an orphan of a killed run may still hold the old file open; a result of
            # a killed run's attempt must not stand for this one's
            for stale in (path, self._result_file(task, trial, attempt)):
                with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                    os.unlink(stale)
        return path

    def _result_file(self, task: int, trial: int, attempt: int) -> str:
        directory = self._result_dirs.get(task)
        if directory is None:
            name = transcript_name(self.plan.task_ids[task])
            directory = self._result_dirs[task] = os.path.join(self.results, name)
        return os.path.join(directory, f"{trial}-{attempt}.json")

    def _keep_result(self, attempt: Attempt, data: bytes) -> None:
        """Write the attempt's result JSON to `results/<task>/<trial>-<attempt>.json`."""
        path = self._result_file(attempt.task, attempt.trial, attempt.attempt)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    def _reap(self, attempt: Attempt) -> int | None:
        # NB: kill the rest of the group before reaping, while the pgid cannot be reused
        with contextlib.suppress(OSError):
            os.killpg(attempt.pid, signal.SIGKILL)
        # NB: no unregister: a fired one-shot registration reports nothing more, and
        # closing the last copy of the pidfd removes it (an attempt killed before its end
        # was reported is only reaped once no spawn is in flight: see _kill_all)
        if attempt.pidfd >= 0:
            self._fds.pop(attempt.pidfd, None)
            # NB: at most once: the number may already belong to another file
            pidfd, attempt.pidfd = attempt.pidfd, -1
            os.close(pidfd)
        if attempt.process is None:
            return None
        code, attempt.rusage = _wait(attempt.process)
        return normalize_exit_code(code)

    def _finish(self, attempt: Attempt) -> float | None:
        """Settle an attempt that ended; the monotonic time to retry its slot, if any."""
        plan = self.plan
        exit_code = self._reap(attempt)
        duration = time.monotonic() - attempt.started
        oom = attempt.over_memory
        if attempt.cgroup is not None:
            oom = oom or attempt.cgroup.oom_kills() > attempt.cgroup.oom_baseline
        if self._orphans is not None:
            # NB: before its directory is reset: nothing of it may write there afterwards
            self._orphans.sweep(self._running_keys(but=attempt))
        # NB: before _forget releases its cgroup to the next attempt
        resources = _resources(attempt)
        result_left, data, result = _read_result(self._result_path(attempt.worker))
        self._forget(attempt, result_left=result_left)
        verdict = classify_exit(
            exit_code=exit_code,
            grading=plan.grading,
            result=result,
            oom_killed=oom,
            timed_out=attempt.timed_out,
            timeout_is=plan.timeout_is,
        )
        final = plan.retry.is_final(verdict, attempt.attempt)
        if not self.ledger.record(
            attempt.task, attempt.trial, attempt.attempt, verdict, final=final
        ):
            return None
        if result is not None:
            # NB: before its journal line: a recorded attempt's result is on disk
            self._keep_result(attempt, data)
        record = {
            "task_id": plan.task_ids[attempt.task],
            "trial": attempt.trial,
            "attempt": attempt.attempt,
            "outcome": str(verdict.outcome),
            "reason": verdict.reason,
            "exit_code": exit_code,
            "duration_s": round(duration, 3),
            "final": final,
        }
        if verdict.message:
            record["message"] = verdict.message
        spend, problem = spend_of(result)
        if spend is not None:
            record.update(spend.as_record())
            self.spent_usd += spend.cost_usd
        if problem is not None:
            record["spend_error"] = problem
        if result is None and (ignored := result_problem(data)) is not None:
            record["result_error"] = ignored
        if resources is not None:
            record["resources"] = resources.as_record()
        self.journal.append(record)
        self._count(verdict, final)
        if self.on_record is not None:
            self.on_record(record)
        if final:
            return None
        return time.monotonic() + plan.retry.delay(attempt.attempt)

    def _result_path(self, worker: int) -> str:
        assert self._scratch is not None
        return self._scratch.result_path(worker)

    def _count(self, verdict: Verdict, final: bool) -> None:
        progress = self.progress
        if verdict.outcome is Outcome.PASS:
            progress.passed += 1
        elif verdict.outcome is Outcome.FAIL:
            progress.failed += 1
        else:
            progress.infra_errors += 1
        if final:
            progress.done += 1
        else:
            progress.retries += 1

    def _enforce_deadlines(self) -> None:
        now = time.monotonic()
        for attempt in list(self._by_pid.values()):
            if attempt.kill_at is not None:
                if now >= attempt.kill_at:
                    self._kill(attempt, signal.SIGKILL)
                    attempt.kill_at = now + KILL_GRACE
            elif now >= attempt.deadline:
                attempt.timed_out = True
                self._kill(attempt, signal.SIGTERM)
                attempt.kill_at = now + KILL_GRACE
        if self._watch_rss and self._by_pid and now >= self._next_rss:
            self._next_rss = now + rss.INTERVAL
            limit = self.plan.limits.memory
            assert limit is not None
            running = dict(self._by_pid)
            usage = rss.session_rss(set(running))
            for pid, used in usage.items():
                attempt = running[pid]
                if used > limit and not attempt.over_memory:
                    attempt.over_memory = True
                    self._kill(attempt, signal.SIGKILL)

    def _reap_orphans(self) -> None:
        """Every REAP_INTERVAL, reap the orphans that ended by themselves: as their
        subreaper passhat must, or a trial that backgrounds short commands piles up
        zombies until its attempt ends."""
        now = time.monotonic()
        if self._orphans is not None and now >= self._next_reap:
            self._next_reap = now + REAP_INTERVAL
            self._orphans.reap()

    def _kill(self, attempt: Attempt, sig: signal.Signals) -> None:
        with contextlib.suppress(OSError):
            os.killpg(attempt.pid, sig)
        if sig == signal.SIGKILL and attempt.cgroup is not None:
            for pid in attempt.cgroup.pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def _kill_all(self) -> None:
        assert self._spawner is not None
        self._spawner.wait_idle()
        for request in self._spawner.failures():
            self._forget(request.tag)
        for attempt in list(self._by_pid.values()):
            self._kill(attempt, signal.SIGKILL)
            self._reap(attempt)
            self._forget(attempt)

    def _report_progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.progress)


def _wait(process: subprocess.Popen[bytes]) -> tuple[int, Any]:
    """The process's return code (Popen's form) and its rusage (None if not reaped here)."""
    try:
        _, status, usage = os.wait4(process.pid, 0)
    except ChildProcessError:
        return process.wait(), None
    # NB: Popen must know: it never waits for a process it knows has ended
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage


def _resources(attempt: Attempt) -> Resources | None:
    """What the attempt used: CPU seconds of it and the descendants it waited for (wait4's
    rusage), and the peak memory of everything in its cgroup, when it has one.

    NB: without a cgroup there is no peak: rusage's ru_maxrss keeps the high-water mark of
    the process that forked the attempt across exec (passhat's own resident set), which
    would read as the attempt's."""
    usage = attempt.rusage
    peak = attempt.cgroup.peak_memory() if attempt.cgroup is not None else None
    if attempt.cgroup is not None:
        attempt.cgroup.close_peak()
    if usage is None and peak is None:
        return None
    cpu = float(usage.ru_utime + usage.ru_stime) if usage is not None else None
    source = "rusage" + (", cgroup" if peak is not None else "")
    return Resources(peak_memory_bytes=peak, cpu_seconds=cpu, source=source)


def _read_result(path: str) -> tuple[bool, bytes, dict[str, Any] | None]:
    """Whether something is at `path`, what was read, and the result JSON it holds, if valid."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return False, b"", None
    except OSError:
        return True, b"", None
    try:
        data = os.read(fd, MAX_RESULT_BYTES * 16)
    except OSError:
        return True, b"", None
    finally:
        os.close(fd)
    return True, data, parse_result(data)


def _close_inherited_fds() -> None:
    """Make fds this process inherited (3 and up) close on exec: trials must not get them."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return
    for fd in fds:
        if fd > 2:
            with contextlib.suppress(OSError):
                if os.get_inheritable(fd):
                    os.set_inheritable(fd, False)
