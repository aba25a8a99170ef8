"""Memory ceilings and CPU limits for local trial attempts, through Linux cgroups.

`limits.memory` must be a hard ceiling and every OOM kill inside a trial must count, even
one of a grandchild whose parent then exits 0. Only the kernel sees all of that, through a
memory cgroup around the attempt. Creating and removing a cgroup per attempt is slow, so
passhat keeps a small pool, one cgroup per running slot, created below the process's own
cgroup when the run starts (limits set once), reused by every attempt (OOM kills counted
as the delta of the cgroup's `oom_kill` counter) and removed at the end. Cgroups left by a
run that was SIGKILLed are found by name (`passhat-<pid>-<n>`, pid dead), their leftover
processes killed, and removed by the next run.

How an attempt gets into its cgroup without a race (its children must be inside from the
first instruction): with cgroup v1 a single thread can change cgroups, and a process
inherits the cgroup of the thread that spawns it, so the spawning thread steps into the
slot's cgroup around the spawn ("thread" placement: two small writes, no extra exec).
cgroup v2 moves whole processes only, so there a tiny `sh` wrapper writes its own pid to
`cgroup.procs` and then execs the trial ("wrapper" placement).

`detect()` returns None when this machine has no usable memory controller for us; the
executor then samples process-tree RSS instead (`passhat.local.rss`).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from passhat.local import procfs

__all__ = ["Hierarchy", "Pool", "Slot", "detect"]

Placement = Literal["thread", "wrapper"]

_NAME = re.compile(r"^passhat-(\d+)-\d+$")
_CFS_PERIOD_US = 100_000


@dataclass(frozen=True)
class Hierarchy:
    """Where this process's own cgroups are, for the controllers passhat uses."""

    version: int
    memory: str
    cpu: str | None

    @property
    def placement(self) -> Placement:
        """How a new attempt is put into its cgroup on this hierarchy."""
        return "thread" if self.version == 1 else "wrapper"


def _own_cgroups(text: str) -> dict[str, str]:
    """Controller (or "" for the v2 unified line) -> path, from /proc/self/cgroup."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found


def _mounts(text: str) -> list[tuple[str, str, str, set[str]]]:
    """(root, mount point, fstype, super options) of cgroup mounts, from mountinfo."""
    mounts = []
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or not tail[0].startswith("cgroup"):
            continue
        root, point = fields[3], fields[4].replace("\\040", " ")
        mounts.append((root, point, tail[0], set(tail[2].split(","))))
    return mounts


def _dir(point: str, root: str, path: str) -> str | None:
    if root != "/" and not (path == root or path.startswith(root + "/")):
        return None
    relative = path[len(root) :] if root != "/" else path
    return os.path.normpath(os.path.join(point, relative.lstrip("/")))


def detect(
    proc_cgroup: str = "/proc/self/cgroup", mountinfo: str = "/proc/self/mountinfo"
) -> Hierarchy | None:
    """This process's memory (and cpu) cgroup directories, or None when unusable.

    A v1 memory controller wins over v2 (hybrid machines mount v2 without controllers);
    v2 is used when its memory controller is enabled for our cgroup's children.
    """
    try:
        with open(proc_cgroup) as handle:
            own = _own_cgroups(handle.read())
        with open(mountinfo) as handle:
            mounts = _mounts(handle.read())
    except OSError:
        return None
    v1: dict[str, str] = {}
    for root, point, fstype, options in mounts:
        for controller in ("memory", "cpu"):
            if fstype == "cgroup" and controller in options and controller in own:
                where = _dir(point, root, own[controller])
                if where is not None and os.access(where, os.W_OK):
                    v1.setdefault(controller, where)
    if "memory" in v1:
        return Hierarchy(version=1, memory=v1["memory"], cpu=v1.get("cpu"))
    for root, point, fstype, _ in mounts:
        if fstype != "cgroup2" or "" not in own:
            continue
        where = _dir(point, root, own[""])
        if where is None or not _v2_delegates(where):
            continue
        cpu = where if _v2_delegates(where, "cpu") else None
        return Hierarchy(version=2, memory=where, cpu=cpu)
    return None


def _v2_delegates(where: str, controller: str = "memory") -> bool:
    """Whether children of `where` get `controller` (enabling it when allowed)."""
    try:
        with open(os.path.join(where, "cgroup.subtree_control")) as handle:
            if controller in handle.read().split():
                return True
        with open(os.path.join(where, "cgroup.subtree_control"), "w") as handle:
            handle.write(f"+{controller}")
    except OSError:
        # NB: a v2 cgroup holding processes cannot delegate (no internal processes)
        return False
    return True


def _int_field(data: bytes, key: bytes) -> int:
    """The value of the `key value` line in a cgroup file's `data` (0 when absent)."""
    for line in data.splitlines():
        name, _, value = line.partition(b" ")
        if name == key:
            return int(value)
    return 0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pids(directory: str) -> list[int]:
    # NB: opened anew for every read: in v1 an open cgroup.procs keeps serving the pid list
    # it first read for up to a second
    try:
        return [int(pid) for pid in procfs.read(os.path.join(directory, "cgroup.procs")).split()]
    except (OSError, ValueError):
        return []


def empty_out(directory: str, *, timeout: float = 5.0) -> bool:
    """SIGKILL every process in the cgroup at `directory`; True once it is empty."""
    deadline = time.monotonic() + timeout
    while True:
        pids = _pids(directory)
        if not pids:
            return True
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)


@dataclass
class Slot:
    """One reusable cgroup (per controller) that hosts one running attempt at a time."""

    index: int
    memory: str
    cpu: str | None
    oom_baseline: int = 0
    _fds: list[int] = field(default_factory=list)
    # NB: the file with the oom_kill counter, kept open: a pread at 0 reads it afresh
    _oom_fd: int = -1
    # The memory peak file opened (and reset) for the current attempt, and whether the
    # slot ran an attempt before (a peak that cannot be reset then says nothing).
    _peak_fd: int = -1
    _used: bool = False

    @property
    def procs_path(self) -> str:
        """The memory cgroup's `cgroup.procs` (what the v2 wrapper writes its pid to)."""
        return os.path.join(self.memory, "cgroup.procs")

    def oom_kills(self) -> int:
        """The kernel's count of OOM kills in this cgroup since it was created."""
        if self._oom_fd < 0:
            name = "memory.events"
            if not os.path.exists(os.path.join(self.memory, name)):
                name = "memory.oom_control"  # NB: cgroup v1
            self._oom_fd = os.open(os.path.join(self.memory, name), os.O_RDONLY | os.O_CLOEXEC)
        return _int_field(os.pread(self._oom_fd, 4096, 0), b"oom_kill")

    def pids(self) -> list[int]:
        """The processes still in this cgroup."""
        return _pids(self.memory)

    def start_peak(self) -> None:
        """Reset the memory peak for the attempt about to start in this slot.

        cgroup v1 resets `memory.max_usage_in_bytes` on a write; v2 resets `memory.peak`
        for the file descriptor written to (Linux 6.12 and later), kept open until
        `peak_memory` reads it. A slot whose peak cannot be reset reports none once reused.
        """
        self.close_peak()
        v1 = os.path.join(self.memory, "memory.max_usage_in_bytes")
        try:
            if os.path.exists(v1):
                _write(v1, "0")
                self._peak_fd = os.open(v1, os.O_RDONLY | os.O_CLOEXEC)
            else:
                fd = os.open(os.path.join(self.memory, "memory.peak"), os.O_RDWR | os.O_CLOEXEC)
                self._peak_fd = fd
                try:
                    os.write(fd, b"reset")
                except OSError:
                    if self._used:
                        self.close_peak()
        except OSError:
            self.close_peak()
        self._used = True

    def peak_memory(self) -> int | None:
        """Bytes at the memory peak of the attempt in this slot (None: not known)."""
        if self._peak_fd < 0:
            return None
        try:
            return int(os.pread(self._peak_fd, 64, 0).split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def close_peak(self) -> None:
        if self._peak_fd >= 0:
            os.close(self._peak_fd)
            self._peak_fd = -1


class Pool:
    """The cgroups of one run: created lazily up to the parallelism, reused, removed at close."""

    def __init__(
        self,
        hierarchy: Hierarchy,
        *,
        memory_limit: int | None,
        cpu_limit: float | None,
        placement: Placement | None = None,
    ) -> None:
        self.hierarchy = hierarchy
        self.memory_limit = memory_limit
        self.cpu_limit = cpu_limit if hierarchy.cpu is not None else None
        self.placement: Placement = placement or hierarchy.placement
        self._free: list[Slot] = []
        self._all: list[Slot] = []
        self._next = 0
        self._home_fds: list[int] = []
        remove_stale(hierarchy)

    def acquire(self) -> Slot:
        """A free slot (a new cgroup when none is free); raises OSError when not creatable."""
        if self._free:
            slot = self._free.pop()
            slot.start_peak()
            return slot
        index = self._next
        self._next += 1
        name = f"passhat-{os.getpid()}-{index}"
        memory = os.path.join(self.hierarchy.memory, name)
        os.mkdir(memory)
        slot = Slot(index=index, memory=memory, cpu=None)
        self._all.append(slot)
        if self.memory_limit is not None:
            limit_file = "memory.max" if self.hierarchy.version == 2 else "memory.limit_in_bytes"
            _write(os.path.join(memory, limit_file), str(self.memory_limit))
            if self.hierarchy.version == 2:
                with contextlib.suppress(OSError):
                    _write(os.path.join(memory, "memory.swap.max"), "0")
        if self.cpu_limit is not None and self.hierarchy.cpu is not None:
            quota = max(1000, int(self.cpu_limit * _CFS_PERIOD_US))
            if self.hierarchy.version == 2:
                _write(os.path.join(memory, "cpu.max"), f"{quota} {_CFS_PERIOD_US}")
            else:
                slot.cpu = os.path.join(self.hierarchy.cpu, name)
                os.mkdir(slot.cpu)
                _write(os.path.join(slot.cpu, "cpu.cfs_period_us"), str(_CFS_PERIOD_US))
                _write(os.path.join(slot.cpu, "cpu.cfs_quota_us"), str(quota))
        slot.oom_baseline = slot.oom_kills()
        slot.start_peak()
        if self.placement == "thread":
            slot._fds = [
                os.open(os.path.join(d, "tasks"), os.O_WRONLY | os.O_CLOEXEC)
                for d in (slot.memory, slot.cpu)
                if d is not None
            ]
            if not self._home_fds:
                homes = [self.hierarchy.memory]
                if self.hierarchy.cpu is not None:
                    homes.append(self.hierarchy.cpu)
                self._home_fds = [
                    os.open(os.path.join(d, "tasks"), os.O_WRONLY | os.O_CLOEXEC) for d in homes
                ]
        return slot

    @contextlib.contextmanager
    def entered(self, slot: Slot) -> Iterator[None]:
        """Run the body (a spawn) with the calling thread inside `slot` ("thread" placement).

        Must not be called from the main thread: in v1 the memory charged to a process
        follows its main thread, which must stay home.
        """
        if self.placement != "thread":
            yield
            return
        tid = str(threading.get_native_id()).encode()
        for fd in slot._fds:
            os.write(fd, tid)
        try:
            yield
        finally:
            for fd in self._home_fds:
                os.write(fd, tid)

    def release(self, slot: Slot, *, timeout: float = 5.0) -> None:
        """Kill what is left of the attempt in `slot` and make it reusable.

        A slot whose processes cannot be killed in time is retired, not reused.
        """
        if not empty_out(slot.memory, timeout=timeout):
            return
        if slot.cpu is not None:
            empty_out(slot.cpu, timeout=timeout)
        slot.oom_baseline = slot.oom_kills()
        self._free.append(slot)

    def close(self) -> None:
        """Kill every process left in the pool's cgroups and remove them."""
        for fd in self._home_fds:
            os.close(fd)
        self._home_fds = []
        for slot in self._all:
            for fd in slot._fds:
                os.close(fd)
            slot._fds = []
            if slot._oom_fd >= 0:
                os.close(slot._oom_fd)
                slot._oom_fd = -1
            slot.close_peak()
            for directory in (slot.memory, slot.cpu):
                if directory is not None:
                    empty_out(directory)
                    _rmdir(directory)
        self._all, self._free = [], []


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _rmdir(directory: str) -> None:
    deadline = time.monotonic() + 2.0
    while True:
        try:
            os.rmdir(directory)
            return
        except FileNotFoundError:
            return
        except OSError:
            # NB: EBUSY for a moment after the last process left
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)


def remove_stale(hierarchy: Hierarchy) -> int:
    """Remove pool cgroups of passhat runs that died (killing what still runs in them)."""
    removed = 0
    parents = [hierarchy.memory] + ([hierarchy.cpu] if hierarchy.cpu else [])
    for parent in parents:
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            match = _NAME.match(name)
            if match is None or _pid_alive(int(match.group(1))):
                continue
            directory = os.path.join(parent, name)
            empty_out(directory)
            _rmdir(directory)
            removed += 1
    return removed
