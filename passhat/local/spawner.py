"""A few long-lived threads that start attempts, so start-up latencies overlap.

Starting a process returns only once the child has exec'd, and on a busy machine the
child waits for a CPU first: one thread starting a thousand short trials spends most of
its time waiting. A small pool of spawner threads (not one thread per attempt) overlaps
those waits; the executor loop stays single-threaded and just submits requests. The
spawn itself is `subprocess.Popen` (see `passhat.local.sandbox.spawn`), which releases
the GIL while the child execs, so the threads really do overlap. A started attempt is
handed back by registering its pidfd in the loop's epoll from the spawner thread, so a
start costs the loop no wake-up. With cgroup v1 a spawner thread also steps into the
attempt's cgroup around the spawn (see `passhat.local.cgroup`).
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from passhat.local.cgroup import Pool, Slot
from passhat.local.sandbox import open_transcript, spawn

__all__ = ["SpawnError", "SpawnRequest", "Spawner"]


class SpawnError(Exception):
    """An attempt could not be started; `cause` is why (an OSError, or anything else)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause) or type(cause).__name__)
        self.cause = cause


@dataclass
class SpawnRequest:
    """One attempt to start; `process` or `error` is set when done."""

    executable: str
    argv: list[str]
    env: Mapping[str, str]
    cwd: str
    transcript: str
    cgroup: Slot | None
    tag: Any = None
    process: subprocess.Popen[bytes] | None = None
    error: BaseException | None = field(default=None)


class Spawner:
    """Starts attempts on `threads` threads.

    `on_started(request)` runs on the spawner thread right after a spawn (so the loop need
    not be woken for it); a failed spawn is kept for `failures()` and `on_failed()` is
    called to wake the loop. Whatever a spawn raises (not only OSError) is such a failure.
    """

    def __init__(
        self,
        *,
        threads: int,
        pool: Pool | None,
        on_started: Callable[[SpawnRequest], None],
        on_failed: Callable[[], None],
    ) -> None:
        self.pool = pool
        self._on_started = on_started
        self._on_failed = on_failed
        self._requests: queue.SimpleQueue[SpawnRequest | None] = queue.SimpleQueue()
        self._failed: queue.SimpleQueue[SpawnRequest] = queue.SimpleQueue()
        self._idle = threading.Condition()
        self._outstanding = 0
        # NB: one /dev/null for every attempt's stdin (saves an open and a close per spawn)
        self._devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        self._threads = [
            threading.Thread(target=self._work, name=f"passhat-spawn-{i}", daemon=True)
            for i in range(max(1, threads))
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, request: SpawnRequest) -> None:
        """Queue `request` for a spawner thread."""
        with self._idle:
            self._outstanding += 1
        self._requests.put(request)

    def failures(self) -> list[SpawnRequest]:
        """The requests that failed to start since the last call."""
        failed = []
        while True:
            try:
                failed.append(self._failed.get_nowait())
            except queue.Empty:
                return failed

    def wait_idle(self) -> None:
        """Wait until every submitted request has been started (or has failed)."""
        with self._idle:
            self._idle.wait_for(lambda: self._outstanding == 0)

    def close(self) -> None:
        """Stop the threads."""
        for _ in self._threads:
            self._requests.put(None)
        for thread in self._threads:
            thread.join()
        os.close(self._devnull)

    def _work(self) -> None:
        while (request := self._requests.get()) is not None:
            try:
                request.process = self._spawn(request)
                self._on_started(request)
            except BaseException as err:
                # NB: any failure is a failed spawn: a dead thread would leave the loop
                # waiting for an attempt that never starts
                request.error = err
                self._failed.put(request)
                self._on_failed()
            finally:
                with self._idle:
                    self._outstanding -= 1
                    self._idle.notify_all()

    def _spawn(self, request: SpawnRequest) -> subprocess.Popen[bytes]:
        transcript = open_transcript(request.transcript)
        try:
            slot, pool = request.cgroup, self.pool
            wrapper = None
            inside: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
            if slot is not None and pool is not None:
                wrapper = slot.procs_path if pool.placement == "wrapper" else None
                inside = pool.entered(slot)
            with inside:
                return spawn(
                    request.executable,
                    request.argv,
                    request.env,
                    cwd=request.cwd,
                    out=transcript,
                    stdin=self._devnull,
                    wrapper_procs=wrapper,
                )
        finally:
            os.close(transcript)
