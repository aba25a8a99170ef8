"""A thread pool that serves evals in turn, so one eval's backlog never starves another.

The operator sends its pod writes (creates, finalizer releases, deletes, archives) on
thread pools shared by every eval it serves. A `ThreadPoolExecutor` is one FIFO queue:
an eval that queued thousands of writes (a 5,000-pod eval starting, or finishing at
once) made a small eval in another namespace wait behind all of them. `FairPool` keeps
one queue per key (an eval) and its workers take the next task from the keys in
round-robin order, so a task waits for at most one task of each other key with work;
and one key never runs on more than `per_key` workers at once, so a key whose requests
are slow (a throttled or timing-out API server) leaves workers for the others.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["FairPool"]

T = TypeVar("T")

_Task = tuple[Future[Any], Callable[[], Any]]


class FairPool:
    """`workers` threads running tasks round-robin over keys, at most `per_key` at once
    for one key. Threads start as work arrives and are daemons (a process exits without
    waiting for them: every write here is safe to repeat)."""

    def __init__(self, workers: int, *, per_key: int, name: str) -> None:
        if workers < 1 or per_key < 1:
            raise ValueError("a FairPool needs at least one worker and per_key >= 1")
        self._workers = workers
        self._per_key = per_key
        self._name = name
        self._cond = threading.Condition()
        self._queues: dict[str, deque[_Task]] = {}
        # Keys with queued tasks, in the order they are served next.
        self._ring: deque[str] = deque()
        self._running: dict[str, int] = {}
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False

    def submit(self, key: str, fn: Callable[[], T]) -> Future[T]:
        """Queue `fn` for `key`; its future. Raises RuntimeError once the pool is closed."""
        future: Future[T] = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("the pool is closed")
            queue = self._queues.get(key)
            if queue is None:
                queue = self._queues[key] = deque()
                self._ring.append(key)
            queue.append((future, fn))
            if self._idle:
                self._cond.notify()
            elif len(self._threads) < self._workers:
                thread = threading.Thread(
                    target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        return future

    def queued(self, key: str) -> int:
        """How many tasks of `key` wait (not yet running)."""
        with self._cond:
            return len(self._queues.get(key) or ())

    def join(self, timeout: float | None = None) -> bool:
        """Wait until nothing is queued or running; False on timeout."""
        with self._cond:
            return self._cond.wait_for(
                lambda: not self._ring and not any(self._running.values()), timeout
            )

    def close(self) -> None:
        """Cancel what is queued; tasks already running finish. Later submits raise."""
        with self._cond:
            self._closed = True
            for queue in self._queues.values():
                for future, _ in queue:
                    future.cancel()
            self._queues.clear()
            self._ring.clear()
            self._cond.notify_all()

    def _take(self) -> tuple[str, _Task] | None:
        """The next task in turn (call with the lock held), None when none may run."""
        for index, key in enumerate(self._ring):
            if self._running.get(key, 0) >= self._per_key:
                continue
            queue = self._queues[key]
            task = queue.popleft()
            self._running[key] = self._running.get(key, 0) + 1
            # NB: the next task comes from the key after this one (round robin)
            self._ring.rotate(-(index + 1))
            if not queue:
                del self._queues[key]
                self._ring.remove(key)
            return key, task
        return None

    def _work(self) -> None:
        while True:
            with self._cond:
                taken = self._take()
                while taken is None:
                    if self._closed:
                        return
                    self._idle += 1
                    self._cond.wait()
                    self._idle -= 1
                    taken = self._take()
            key, (future, fn) = taken
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        result = fn()
                    except BaseException as err:  # NB: handed to the future, as an executor does
                        future.set_exception(err)
                    else:
                        future.set_result(result)
            finally:
                with self._cond:
                    left = self._running[key] - 1
                    if left:
                        self._running[key] = left
                    else:
                        del self._running[key]
                    # NB: a task of this key may wait for its cap; join() may wait too
                    self._cond.notify_all()
