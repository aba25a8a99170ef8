"""Reports: every format says the same numbers, flaky first, and stands on its own."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

from passhat.api.errors import UsageError
from passhat.report import FORMATS, build_report, render, save_plot
from passhat.report.model import curve_ks
from passhat.stats import TaskTally, bootstrap, summarize_many
from passhat.trials.readers import read_tallies

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BIMODAL = read_tallies([EXAMPLES / "same-mean-bimodal.jsonl"])

MIXED = [
    TaskTally("steady", 4, 0, 0),
    TaskTally("one-in-four", 1, 3, 1),
    TaskTally("half <b>&", 2, 2, 0),
    TaskTally("short", 1, 0, 3),
]


def test_json_is_exactly_the_summaries() -> None:
    """`json` is the eight-key array of summarize_many, nothing more."""
    ks = [1, 3, 8]
    assert json.loads(render(BIMODAL, ks, "json")) == [
        s.as_json() for s in summarize_many(BIMODAL, ks)
    ]


def test_json_full_adds_intervals_tasks_and_curve() -> None:
    """`json-full` keeps the array under by_k and adds intervals, tasks (flaky first), curve."""
    intervals = bootstrap(MIXED, [1, 2], resamples=200)
    document = json.loads(render(MIXED, [1, 2], "json-full", title="t", intervals=intervals))
    assert document["by_k"] == [s.as_json() for s in summarize_many(MIXED, [1, 2])]
    assert [t["task_id"] for t in document["tasks"]] == [
        "half <b>&",
        "one-in-four",
        "steady",
        "short",
    ]
    assert document["intervals"][1]["k"] == 2
    assert [p["k"] for p in document["curve"]] == [1, 2, 3, 4]
    assert document["infra_error_rate"] == pytest.approx(4 / 17)


def test_text_headline_flaky_first_and_no_ansi() -> None:
    """Text: the mean vs pass^k gap, infra-error rate, flaky first, no trailing spaces."""
    text = render(MIXED, [1, 2], "text", title="mixed")
    assert "pass^2" in text
    assert "infra errors 23.5% of 17 attempts" in text
    assert text.index("half <b>&") < text.index("one-in-four")
    assert "Need more trials for k=2 (1): short" in text
    assert "\x1b[" not in text
    assert all(line == line.rstrip() for line in text.splitlines())
    assert "\x1b[" in render(MIXED, [1], "text", color=True)


def test_text_shows_interval_cells() -> None:
    """With intervals each average reads `value [low–high]`."""
    intervals = bootstrap(BIMODAL, [3], resamples=200)
    assert "53.6% [" in render(BIMODAL, [3], "text", intervals=intervals)


def test_markdown_tables_escape_and_fold() -> None:
    """Markdown escapes pipes in task ids and folds long flaky lists into <details>."""
    text = render([TaskTally("a|b", 1, 1, 0)], [1], "markdown")
    assert "`a\\|b`" in text
    assert "| 1 | 1 | 50.0% | 50.0% | 50.0% | 1 | 0 |" in text
    many = [TaskTally(f"t{i}", 1, 1, 0) for i in range(25)]
    assert "<details><summary>Flaky tasks (25)" in render(many, [1], "markdown")


def test_html_is_self_contained_with_curve_and_escaping() -> None:
    """HTML: one page, an inline SVG curve, nothing fetched, task ids escaped, flaky first."""
    page = render(MIXED, [1, 2], "html", title="mixed & more")
    assert page.startswith("<!DOCTYPE html>")
    assert "<svg" in page
    assert "<polyline" in page
    assert "<script" not in page
    assert "<link" not in page
    assert "src=" not in page
    assert "half &lt;b&gt;&amp;" in page
    assert "half <b>" not in page
    assert "mixed &amp; more" in page
    assert page.index("Flaky tasks (2)") < page.index("Other tasks (2)")
    assert "lost to inconsistency" in page
    svg = page[page.index("<svg") : page.index("</svg>") + len("</svg>")]
    assert ElementTree.fromstring(svg).tag == "{http://www.w3.org/2000/svg}svg"


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_renders_an_empty_run(fmt: str) -> None:
    """No tallies at all still renders (zero averages), in every format."""
    assert render([], [1], fmt)


def test_unknown_format_is_a_usage_error() -> None:
    """A format that does not exist is a UsageError listing the choices."""
    with pytest.raises(UsageError, match="json-full"):
        render(MIXED, [1], "yaml")


def test_curve_ks_every_k_then_spread() -> None:
    """The curve has every k up to 64, then about 64 spread ks from 1 to n."""
    assert curve_ks(0) == []
    assert curve_ks(8) == list(range(1, 9))
    spread = curve_ks(10_000)
    assert spread[0] == 1
    assert spread[-1] == 10_000
    assert 40 <= len(spread) <= 64


def test_plot_writes_a_png(tmp_path: Path) -> None:
    """--plot draws the curve to a PNG file."""
    target = tmp_path / "curve.png"
    save_plot(build_report(BIMODAL, [1, 3, 8], title="bimodal"), target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_to_an_unwritable_path_is_a_usage_error(tmp_path: Path) -> None:
    """A plot path in a missing directory is one UsageError line."""
    with pytest.raises(UsageError, match="cannot write"):
        save_plot(build_report(BIMODAL, [1]), tmp_path / "missing" / "curve.png")


def test_headline_skips_ks_nothing_was_scored_at() -> None:
    """The headline uses the largest k with a scored task, not a k every task is short of."""
    text = render(BIMODAL, [3, 20], "text")
    assert "pass^3 53.6% vs mean pass rate 75.0%" in text
    assert "Need more trials for k=20 (20)" in text


@pytest.mark.parametrize(
    ("fmt", "headline", "by_k"),
    [
        ("text", "lost to inconsistency", "need more trials"),
        ("markdown", "lost to inconsistency", "| k | tasks |"),
        ("html", "lost to inconsistency", "<th>k</th>"),
    ],
)
def test_flaky_tasks_come_right_after_the_headline(fmt: str, headline: str, by_k: str) -> None:
    """Human formats put the flaky list between the headline and the per-k table."""
    text = render(BIMODAL, [1, 3, 8], fmt)
    assert text.index(headline) < text.index("Flaky tasks (10)") < text.index(by_k)
    assert text.index("coinflip-9") < text.index(by_k)


def test_headline_says_how_many_tasks_it_covers_and_why() -> None:
    """When infra errors leave a task below k graded trials, every format says the headline
    pass^k covers fewer tasks than the run has, and why; none says so when all are in."""
    tallies = [TaskTally("a", 3, 0, 0), TaskTally("b", 1, 1, 1), TaskTally("c", 0, 1, 0)]
    note = (
        "pass^3 covers 1 of 3 tasks: 2 tasks have fewer than 3 graded trials, "
        "1 of them because of infra errors"
    )
    for fmt in ("text", "markdown", "html"):
        assert note in render(tallies, [1, 3], fmt), fmt
    assert json.loads(render(tallies, [3], "json-full"))["coverage"].startswith(note)
    whole = [TaskTally("a", 3, 0, 0), TaskTally("b", 1, 2, 1)]
    assert "covers" not in render(whole, [3], "text")
    assert json.loads(render(whole, [3], "json-full"))["coverage"] is None
