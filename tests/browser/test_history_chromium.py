"""`passhat history --format html` in a real browser: the trend Chromium draws steps down.

Three local run directories of suite nightly, the third with task b failing every trial;
the history page's inline SVG is rendered by Debian's headless Chromium and the
screenshot's pixels read: the pass^3 line (its colour) sits lower on the page at the
right end (run 3) than at the left end (run 1), and the mean's and the infra rate's
lines are drawn too.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from PIL import Image

from passhat.cli import main
from passhat.history.svg import INFRA_COLOR, K_COLORS, LEFT, RIGHT, WIDTH
from tests.browser.browser_helpers import FLAGS, chromium, hex_rgb, mask

GOOD = [("a", "pass")] * 3 + [("b", "pass")] * 3 + [("c", "pass"), ("c", "fail"), ("c", "pass")]
BAD = [("a", "pass")] * 3 + [("b", "fail")] * 3 + [("c", "pass"), ("c", "fail"), ("c", "pass")]


def _run(path: Path, rows: list[tuple[str, str]], started: str) -> None:
    path.mkdir(parents=True)
    (path / "trials.jsonl").write_text(
        "".join(
            json.dumps({"task_id": t, "trial": i % 3, "attempt": 0, "outcome": o}) + "\n"
            for i, (t, o) in enumerate(rows)
        )
    )
    info = {"eval": "e", "suite": "nightly", "startedAt": started, "completedAt": started}
    (path / "run.json").write_text(json.dumps(info))


@pytest.fixture(scope="module")
def shot(tmp_path_factory: pytest.TempPathFactory) -> npt.NDArray[np.int16]:
    """Chromium's screenshot of `passhat history runs/ --format html`, as an RGB array."""
    folder = tmp_path_factory.mktemp("history")
    for index, rows in enumerate((GOOD, GOOD, BAD), start=1):
        _run(folder / "runs" / f"r{index}", rows, f"2026-12-05T0{index}:00:00Z")
    page = folder / "history.html"
    args = ["history", str(folder / "runs"), "--format", "html", "--out", str(page)]
    assert main([*args, "--k", "1", "--k", "3"]) == 0
    png = folder / "history.png"
    done = subprocess.run(
        [
            chromium(),
            *FLAGS,
            f"--user-data-dir={folder / 'profile'}",
            "--window-size=1280,1600",
            f"--screenshot={png}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0 and png.exists(), done.stderr[-3000:]
    with Image.open(png) as image:
        return np.asarray(image.convert("RGB"), dtype=np.int16)


def test_the_pass_hat_3_line_steps_down_at_the_regressed_run(shot: npt.NDArray[np.int16]) -> None:
    """pass^3 is 2/3 in runs 1 and 2 and 1/3 in run 3: its pixels at the plot's right end
    are lower on the page than at its left end (the legend's sample is left out)."""
    line = mask(shot, hex_rgb(K_COLORS[1]), 24)
    columns = np.flatnonzero(line.any(axis=0))
    assert columns.size, "no pixel of pass^3's colour"
    left = int(columns.min())  # the line's first point: run 1
    right = left + (WIDTH - LEFT - RIGHT)  # its last point: run 3 (then the legend)
    rows_left = np.flatnonzero(line[:, left : left + 20].any(axis=1))
    rows_right = np.flatnonzero(line[:, right - 20 : right + 1].any(axis=1))
    assert rows_left.size and rows_right.size
    # NB: 1/3 of the plot's 260 px height is ~87 px lower
    assert rows_right.mean() - rows_left.mean() > 60
    assert int(mask(shot, hex_rgb(K_COLORS[0]), 24).sum()) > 300
    assert int(mask(shot, hex_rgb(INFRA_COLOR), 24).sum()) > 100
