"""Reading the kernel's small files (`/proc`, cgroupfs) whole, with os-level calls.

The executor reads a few of them for every attempt (a cgroup's `cgroup.procs`, the main
thread's `children`), where the `open()` of Python's io stack costs more than the read.
"""

from __future__ import annotations

import os

__all__ = ["read"]


def read(path: str) -> bytes:
    """The whole content of the file at `path`, read now; OSError as os.open raises it."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = b""
        while chunk := os.read(fd, 65536):
            data += chunk
        return data
    finally:
        os.close(fd)
