"""The HTML report in a real browser: Debian's headless Chromium renders its figures.

The report is one self-contained page (inline CSS and SVG); these tests open it in
Chromium (`apt-get install chromium`, which hack/test.sh does) and read the screenshot's
pixels: each task's trial strip shows its cells in trial order and colour, the pass^k /
pass@k curve and the headline figures are drawn. A machine without Chromium FAILS here
(never skips): a skipped browser test would pass CI with the page unseen.
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
from passhat.report.svg import AT_COLOR, HAT_COLOR
from tests.browser.browser_helpers import FLAGS, chromium, hex_rgb, mask

# The strip colours of passhat/report/html.py: pass, fail, infra error.
STRIP = {"pass": (0x16, 0xA3, 0x4A), "fail": (0xDC, 0x26, 0x26), "infra": (0xF5, 0x9E, 0x0B)}
# Per task (trial order): what the trials file below says.
TASKS = {
    "flip": ["pass", "fail", "pass", "fail", "pass", "fail"],
    "late": ["fail", "fail", "fail", "pass", "pass", "pass"],
    "shaky": ["pass", "infra", "pass", "pass", "fail", "pass"],
    "solid": ["pass"] * 6,
}


def _strip_sequences(image: npt.NDArray[np.int16]) -> set[tuple[str, ...]]:
    """Each horizontal line's runs of strip colours, left to right (a cell is a run;
    the 1 px gap between cells splits runs of the same colour)."""
    names = list(STRIP)
    labels = np.zeros(image.shape[:2], dtype=np.int8)
    for index, name in enumerate(names, start=1):
        labels[mask(image, STRIP[name], 8)] = index
    found: set[tuple[str, ...]] = set()
    for row in labels:
        starts = np.flatnonzero((row != 0) & (np.concatenate(([0], row[:-1])) != row))
        if len(starts) >= 6:
            found.add(tuple(names[row[x] - 1] for x in starts))
    return found


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`passhat score trials.jsonl --format html --out report.html` of the tasks above."""
    folder = tmp_path_factory.mktemp("browser")
    trials = folder / "trials.jsonl"
    word = {"pass": "pass", "fail": "fail", "infra": "infra_error"}
    trials.write_text(
        "".join(
            json.dumps({"task_id": task, "trial": trial, "outcome": word[outcome]}) + "\n"
            for task, outcomes in TASKS.items()
            for trial, outcome in enumerate(outcomes)
        )
    )
    out = folder / "report.html"
    code = main(["score", str(trials), "--format", "html", "--out", str(out), "--k", "1"])
    assert code == 0
    return out


@pytest.fixture(scope="module")
def shot(page: Path, tmp_path_factory: pytest.TempPathFactory) -> npt.NDArray[np.int16]:
    """Chromium's screenshot of the page, as an RGB array."""
    folder = tmp_path_factory.mktemp("chromium")
    png = folder / "report.png"
    done = subprocess.run(
        [
            chromium(),
            *FLAGS,
            f"--user-data-dir={folder / 'profile'}",
            "--window-size=1280,2400",
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


def test_chromium_draws_each_tasks_trial_strip_in_order(shot: npt.NDArray[np.int16]) -> None:
    """Every task's strip appears in the screenshot as its cells' colours in trial order."""
    sequences = _strip_sequences(shot)
    for task, outcomes in TASKS.items():
        assert tuple(outcomes) in sequences, (task, sorted(sequences))


def test_chromium_renders_the_curve_and_headline(page: Path, shot: npt.NDArray[np.int16]) -> None:
    """The pass@k and pass^k polylines and points are drawn (their colours cover a visible
    area), and the headline's big figures are dark text."""
    blue = mask(shot, hex_rgb(AT_COLOR), 24)
    assert int(blue.sum()) > 400
    # NB: the headline's gap figure shares pass^k's colour: count in the plot's rows only
    # (from its first blue pixel, the legend's or the curve's, over the SVG's 300 px)
    top = int(np.flatnonzero(blue.any(axis=1)).min())
    curve = shot[max(top - 20, 0) : top + 300]
    assert int(mask(curve, hex_rgb(HAT_COLOR), 24).sum()) > 400
    assert int((shot.max(axis=2) < 60).sum()) > 4000
    # NB: the page is one file: nothing fetched (the render needs no network)
    assert "http://" not in page.read_text().replace('xmlns="http://www.w3.org/2000/svg"', "")
