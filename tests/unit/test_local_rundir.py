"""Default run directories: a new one per run named by its UTC start; --resume finds the latest."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest

from passhat.api.errors import UsageError
from passhat.local.rundir import latest_run_dir, new_run_dir

START = datetime.datetime(2026, 12, 2, 16, 15, 0, tzinfo=datetime.UTC)


def test_new_run_dirs_are_distinct_within_one_second(tmp_path: Path) -> None:
    """Runs started in the same second get the UTC stamp, then -2, -3, ... (never shared)."""
    base = str(tmp_path / "passhat-runs" / "demo")
    made = [new_run_dir(base, START) for _ in range(3)]
    assert [os.path.basename(path) for path in made] == [
        "20261202T161500Z",
        "20261202T161500Z-2",
        "20261202T161500Z-3",
    ]
    assert all(os.path.isdir(path) for path in made)


def test_the_stamp_is_utc(tmp_path: Path) -> None:
    """A local time is written as its UTC moment."""
    plus_two = datetime.timezone(datetime.timedelta(hours=2))
    path = new_run_dir(str(tmp_path), START.astimezone(plus_two))
    assert os.path.basename(path) == "20261202T161500Z"


def test_latest_is_the_latest_start_and_suffix(tmp_path: Path) -> None:
    """The latest stamp wins; within one stamp the highest suffix (numerically) wins."""
    for name in ["20261202T161500Z", "20261202T161500Z-2", "20261202T161500Z-10", "notes"]:
        (tmp_path / name).mkdir()
    (tmp_path / "20261203T000000Z.txt").write_text("not a run")
    assert latest_run_dir(str(tmp_path), "demo") == str(tmp_path / "20261202T161500Z-10")
    (tmp_path / "20261202T161501Z").mkdir()
    assert latest_run_dir(str(tmp_path), "demo") == str(tmp_path / "20261202T161501Z")


def test_no_earlier_run_is_a_usage_error(tmp_path: Path) -> None:
    """--resume with nothing to resume names the eval and the directory searched."""
    with pytest.raises(UsageError, match=r"no earlier run of demo in .*missing"):
        latest_run_dir(str(tmp_path / "missing"), "demo")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no earlier run of demo"):
        latest_run_dir(str(tmp_path / "empty"), "demo")
