"""Where no cgroup is ours to create: catch what leaves an attempt's session as a subreaper.

A cgroup (`passhat.local.cgroup`) ends everything an attempt started. Without one, killing
the attempt's process group misses a process that left it (`setsid`, a daemon that
detaches), which would outlive its attempt and could reach the next trial. So, as a
fallback, passhat makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`): such a
process, once the attempt's processes above it have exited, becomes passhat's child
instead of init's, and shows in the main thread's `/proc/self/task/<pid>/children` (the
attempts' own main processes are children of the spawner threads, not listed there).
Which attempt it came from is in its environment (`PASSHAT_TASK_ID`, `PASSHAT_TRIAL`,
`PASSHAT_ATTEMPT`, read from `/proc/<pid>/environ`). `sweep` kills the orphans of every
attempt that is no longer running (one that leads a process group of its own, as a daemon
does after `setsid`, with its whole group) and reaps the dead ones; an orphan whose
environment names no attempt (it replaced it) is killed once no attempt runs. Being the
subreaper also means reaping what ends by itself: `reap` does, every REAP_INTERVAL.

Gaps the cgroup does not have: an orphan is caught at the end of an attempt (or of a
later one) only once its parents are gone, so a daemon that detaches late is killed at a
later sweep; and a process that ran a set-user-ID program cannot be killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Collection

from passhat.local import procfs

__all__ = ["CLOSE_WAIT", "REAP_INTERVAL", "AttemptKey", "Sweeper"]

AttemptKey = tuple[str, str, str]  # NB: (PASSHAT_TASK_ID, PASSHAT_TRIAL, PASSHAT_ATTEMPT)

# Seconds between two reaps of orphans that ended by themselves, while attempts run.
REAP_INTERVAL = 1.0
# Seconds the end of a run waits for the last orphans to be killed and reaped.
CLOSE_WAIT = 5.0
_PR_SET_CHILD_SUBREAPER = 36
_VARS = (b"PASSHAT_TASK_ID=", b"PASSHAT_TRIAL=", b"PASSHAT_ATTEMPT=")


class Sweeper:
    """Makes this process a child subreaper and kills the orphans of finished attempts."""

    def __init__(self) -> None:
        self._children = f"/proc/self/task/{os.getpid()}/children"
        if not os.path.exists(self._children):
            raise OSError(f"{self._children} does not exist (CONFIG_PROC_CHILDREN)")
        import ctypes  # NB: here, not at the top: runs with a cgroup pool (limits) skip it

        self._libc = ctypes.CDLL(None, use_errno=True)
        self._get_errno = ctypes.get_errno
        self._subreaper(True)
        # NB: children the main thread had before are none of ours (in-process use)
        self._before = set(self.orphans())
        self._keys: dict[int, AttemptKey | None] = {}
        # NB: orphans already sent SIGKILL: one that cannot die yet (uninterruptible
        # sleep, a frozen cgroup) is not waited for again at every attempt's end
        self._doomed: set[int] = set()

    def _subreaper(self, on: bool) -> None:
        if self._libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
            raise OSError(self._get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")

    def orphans(self) -> list[int]:
        """The main thread's children: what the attempts left (they are spawned elsewhere)."""
        try:
            return [int(pid) for pid in procfs.read(self._children).split()]
        except OSError:
            return []

    def sweep(self, running: Collection[AttemptKey], *, wait: float = 1.0) -> int:
        """Kill the orphans of attempts not in `running` (every orphan when it is empty),
        then what killing them orphaned in turn; reap the dead ones. Waits up to `wait`
        seconds for the killed to end; how many were killed."""
        deadline = time.monotonic() + wait
        total = 0
        while killed := self._kill(running):
            total += len(killed)
            # NB: once a killed orphan is reaped, its own children are ours: look again
            for pid in killed:
                while not self._reaped(pid):
                    if time.monotonic() >= deadline:
                        return total
                    time.sleep(0.001)
        return total

    def reap(self) -> None:
        """Reap the orphans that have ended (the executor calls this every REAP_INTERVAL:
        an orphan that exits by itself must not stay a zombie until some attempt ends)."""
        for pid in self.orphans():
            if pid not in self._before:
                self._reaped(pid)

    def close(self) -> None:
        """Kill every orphan left (the run is over), as its attempts' cgroups would be."""
        self.sweep((), wait=CLOSE_WAIT)
        with contextlib.suppress(OSError):
            self._subreaper(False)

    def _kill(self, running: Collection[AttemptKey]) -> list[int]:
        killed = []
        for pid in self.orphans():
            if pid in self._before or self._reaped(pid) or pid in self._doomed:
                continue
            if pid not in self._keys:
                # NB: read once: a pid is ours until we reap it, and what it execs later
                # (`env -i`) does not change whose it is
                self._keys[pid] = _attempt_of(pid)
            key = self._keys[pid]
            if running and (key is None or key in running):
                continue
            # NB: a daemon leads a process group of its own (setsid): all of it goes at
            # once, not one generation per pass. A group cannot span sessions, so all in
            # it descends from this orphan and ends with the attempt that started it, as a
            # container's processes do, whatever their environment says
            with contextlib.suppress(OSError):
                if os.getpgid(pid) == pid:
                    os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                self._doomed.add(pid)
        return killed

    def _reaped(self, pid: int) -> bool:
        """Reap `pid` if it has ended; whether it is gone."""
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done == pid:
            self._keys.pop(pid, None)
            self._doomed.discard(pid)
            return True
        return False


def _attempt_of(pid: int) -> AttemptKey | None:
    """The attempt whose environment the process still has, if it does."""
    try:
        environ = procfs.read(f"/proc/{pid}/environ")
    except OSError:
        return None
    found: dict[bytes, str] = {}
    for entry in environ.split(b"\0"):
        for var in _VARS:
            if entry.startswith(var):
                found[var] = entry[len(var) :].decode("utf-8", "surrogateescape")
    if len(found) < len(_VARS):
        return None
    task, trial, attempt = (found[var] for var in _VARS)
    return task, trial, attempt
