"""cgroup detection from /proc files: v1 memory wins on hybrid machines; nothing usable -> None."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from passhat.local import cgroup

MOUNTINFO_V1 = """\
30 25 0:26 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
33 30 0:29 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
34 30 0:30 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 30 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
PROC_V1 = "4:memory:/jobs/abc\n1:cpu:/\n0::/\n"


def test_v1_paths_from_proc_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The v1 memory and cpu directories are the mount point joined with our cgroup path."""
    (tmp_path / "mi").write_text(MOUNTINFO_V1)
    (tmp_path / "cg").write_text(PROC_V1)
    monkeypatch.setattr(os, "access", lambda path, mode: True)
    found = cgroup.detect(str(tmp_path / "cg"), str(tmp_path / "mi"))
    assert found == cgroup.Hierarchy(
        version=1, memory="/sys/fs/cgroup/memory/jobs/abc", cpu="/sys/fs/cgroup/cpu"
    )
    assert found.placement == "thread"


def test_no_cgroup_mounts_means_none(tmp_path: Path) -> None:
    """Without cgroup mounts there is nothing to use (the executor samples RSS instead)."""
    (tmp_path / "mi").write_text("22 1 0:5 / /proc rw - proc proc rw\n")
    (tmp_path / "cg").write_text("0::/\n")
    assert cgroup.detect(str(tmp_path / "cg"), str(tmp_path / "mi")) is None


def test_unreadable_proc_files_mean_none(tmp_path: Path) -> None:
    """Missing /proc files are not an error."""
    assert cgroup.detect(str(tmp_path / "none"), str(tmp_path / "none")) is None
