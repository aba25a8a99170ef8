"""Files passhat writes whole (report.html, run.json, bundles, history --plot) get the mode
a plain `open()` gives (0666 less the umask), like trials.jsonl beside them, not 0600."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from passhat.records.bundle import write_file


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_mode_follows_the_umask(tmp_path: Path, mask: int) -> None:
    previous = os.umask(mask)
    try:
        write_file(str(tmp_path / "report.html"), b"<html></html>\n")
        with open(tmp_path / "plain", "wb"):
            pass
    finally:
        os.umask(previous)
    mode = stat.S_IMODE((tmp_path / "report.html").stat().st_mode)
    assert mode == 0o666 & ~mask == stat.S_IMODE((tmp_path / "plain").stat().st_mode)
    assert (tmp_path / "report.html").read_bytes() == b"<html></html>\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []
