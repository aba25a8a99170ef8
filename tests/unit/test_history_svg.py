"""The suite's trend chart is well-formed SVG: a line per k, the mean, the infra rate."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from passhat.history import SuiteRun, build_history, trend_svg
from passhat.stats import tally

SVG = "{http://www.w3.org/2000/svg}"


def _runs(count: int) -> list[SuiteRun]:
    rows = [("a", "pass"), ("a", "pass"), ("b", "pass"), ("b", "fail")]
    return [SuiteRun(f"r<{i}>&", "s", tally(rows), started=float(i)) for i in range(count)]


def test_trend_parses_as_xml_with_one_line_per_series() -> None:
    """Three runs at ks 1 and 2: a polyline per k plus the mean and the infra rate, and a
    dot per run and series whose tooltip names the run (escaped)."""
    svg = trend_svg(build_history(_runs(3), [1, 2], suite="s"))
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    assert len(root.findall(f"{SVG}polyline")) == 4
    dots = root.findall(f"{SVG}circle")
    assert len(dots) == 4 * 3
    titles = [dot.findtext(f"{SVG}title") or "" for dot in dots]
    assert any("run 1 (r<0>&): 50.0%" in t for t in titles)
    legend = [t.text for t in root.findall(f"{SVG}text")]
    assert {"pass^1", "pass^2", "mean pass rate", "infra-error rate"} <= set(legend)


def test_a_run_without_tasks_scored_at_k_breaks_that_line() -> None:
    """A run with one trial leaves a gap in pass^2's line instead of a point at 0%."""
    runs = _runs(4)
    short = SuiteRun("short", "s", tally([("a", "pass")]), started=1.5)
    history = build_history([*runs, short], [1, 2], suite="s")
    root = ET.fromstring(trend_svg(history))
    pass2 = [
        c for c in root.findall(f"{SVG}circle") if "pass^2" in (c.findtext(f"{SVG}title") or "")
    ]
    assert len(pass2) == 4  # the short run (third) has none
    assert len(root.findall(f"{SVG}polyline")) == 5  # pass^2 in two pieces


def test_a_single_run_and_no_runs_still_draw() -> None:
    """One run is a dot in the middle; the chart of nothing is still valid SVG."""
    ET.fromstring(trend_svg(build_history(_runs(1), [1], suite=None)))
    ET.fromstring(trend_svg(build_history([], [1], suite=None)))
