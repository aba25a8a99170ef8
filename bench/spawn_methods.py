"""How a Python process should start many short processes: the measurement behind spawner.py.

Starts `--children` runs of `true` (`--parallelism` at a time, each with its output in a
file of its own, as a trial's transcript) in several ways and prints the wall time of
each, best of `--repeat`:

- threads + os.posix_spawn, with and without setsid;
- threads + subprocess.Popen(start_new_session=True) (what passhat's spawner does);
- one thread running an epoll loop over pidfds, spawning with Popen itself;
- one epoll loop that hands spawns to `--parallelism` spawner threads (passhat's shape).

    python bench/spawn_methods.py --children 1000 --parallelism 4

The last output line is one JSON object: method -> seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

TRUE = shutil.which("true") or "/bin/true"
ENV = {"PATH": os.defpath}


class Bench:
    """One scratch directory; `run(method)` starts every child once with `method`."""

    def __init__(self, children: int, parallelism: int, scratch: str) -> None:
        self.children, self.parallelism, self.scratch = children, parallelism, scratch

    def _out(self, index: int) -> int:
        path = os.path.join(self.scratch, f"{index}.log")
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)

    def popen(self, index: int) -> subprocess.Popen[bytes]:
        out = self._out(index)
        try:
            return subprocess.Popen(
                [TRUE],
                env=ENV,
                cwd=self.scratch,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            os.close(out)

    def posix_spawn(self, index: int, *, setsid: bool) -> int:
        out = self._out(index)
        try:
            actions = [
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, out, 1),
                (os.POSIX_SPAWN_DUP2, out, 2),
            ]
            return os.posix_spawn(TRUE, [TRUE], ENV, file_actions=actions, setsid=setsid)
        finally:
            os.close(out)

    def threads(self, one: Callable[[int], object]) -> None:
        with ThreadPoolExecutor(self.parallelism) as pool:
            list(pool.map(one, range(self.children)))

    def thread_posix_spawn(self) -> None:
        self.threads(lambda i: os.waitpid(self.posix_spawn(i, setsid=False), 0))

    def thread_posix_spawn_setsid(self) -> None:
        self.threads(lambda i: os.waitpid(self.posix_spawn(i, setsid=True), 0))

    def thread_popen(self) -> None:
        self.threads(lambda i: self.popen(i).wait())

    def epoll_loop_popen(self) -> None:
        epoll, started, done = select.epoll(), 0, 0
        running: dict[int, subprocess.Popen[bytes]] = {}
        while done < self.children:
            while len(running) < self.parallelism and started < self.children:
                process = self.popen(started)
                pidfd = os.pidfd_open(process.pid)
                epoll.register(pidfd, select.EPOLLIN)
                running[pidfd] = process
                started += 1
            for pidfd, _ in epoll.poll():
                epoll.unregister(pidfd)
                os.close(pidfd)
                running.pop(pidfd).wait()
                done += 1
        epoll.close()

    def epoll_loop_spawner_threads(self) -> None:
        epoll, requests = select.epoll(), queue.SimpleQueue[int | None]()
        running: dict[int, subprocess.Popen[bytes]] = {}
        lock = threading.Lock()

        def spawner() -> None:
            while (index := requests.get()) is not None:
                process = self.popen(index)
                pidfd = os.pidfd_open(process.pid)
                with lock:
                    running[pidfd] = process
                epoll.register(pidfd, select.EPOLLIN)

        workers = [threading.Thread(target=spawner) for _ in range(self.parallelism)]
        for worker in workers:
            worker.start()
        try:
            self._drain(epoll, requests, running, lock)
        finally:
            for _ in workers:
                requests.put(None)
            for worker in workers:
                worker.join()
            epoll.close()

    def _drain(
        self,
        epoll: select.epoll,
        requests: queue.SimpleQueue[int | None],
        running: dict[int, subprocess.Popen[bytes]],
        lock: threading.Lock,
    ) -> None:
        submitted = done = live = 0
        while done < self.children:
            while live < self.parallelism and submitted < self.children:
                requests.put(submitted)
                submitted, live = submitted + 1, live + 1
            for pidfd, _ in epoll.poll():
                with lock:
                    process = running.pop(pidfd)
                # NB: closed only after the pop: a spawner may get the same fd number next
                epoll.unregister(pidfd)
                os.close(pidfd)
                process.wait()
                done, live = done + 1, live - 1


METHODS = (
    "thread_posix_spawn",
    "thread_posix_spawn_setsid",
    "thread_popen",
    "epoll_loop_popen",
    "epoll_loop_spawner_threads",
)


def main(argv: list[str] | None = None) -> int:
    """Time every method; print one line each and, last, the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="passhat-spawn-") as scratch:
        bench = Bench(args.children, args.parallelism, scratch)
        for _ in range(args.repeat):
            for method in METHODS:
                start = time.perf_counter()
                getattr(bench, method)()
                elapsed = time.perf_counter() - start
                best[method] = min(best.get(method, elapsed), elapsed)
                print(f"{method}: {elapsed:.3f}s", file=sys.stderr)
    print(json.dumps({method: round(seconds, 3) for method, seconds in best.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
