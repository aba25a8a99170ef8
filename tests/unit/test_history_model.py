"""A suite's history: runs in start order, each scored, and the tasks changed between runs."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from passhat.history import SuiteRun, build_history, order_runs, render_history
from passhat.stats import TaskTally, tally


def tallies(rows: Sequence[tuple[str, str]]) -> list[TaskTally]:
    """Per-task tallies of (task, outcome) rows."""
    return tally(rows)


GOOD = [("a", "pass")] * 3 + [("b", "pass")] * 3 + [("c", "pass"), ("c", "fail"), ("c", "pass")]
# b fails every trial: the regression; c unchanged (flaky in both)
BAD = [("a", "pass")] * 3 + [("b", "fail")] * 3 + [("c", "pass"), ("c", "fail"), ("c", "pass")]


def run(title: str, rows: Sequence[tuple[str, str]], started: float | None) -> SuiteRun:
    """A complete run of suite nightly."""
    return SuiteRun(title, "nightly", tallies(rows), started=started, state="complete")


def test_runs_are_ordered_by_start_unknown_last_ties_by_title() -> None:
    """Oldest start first, a run with no known start last, equal starts by title."""
    runs = [run("z", GOOD, None), run("b", GOOD, 20.0), run("a", GOOD, 20.0), run("c", GOOD, 5)]
    assert [r.title for r in order_runs(runs)] == ["c", "a", "b", "z"]


def test_three_runs_name_the_regressed_task_between_runs_two_and_three() -> None:
    """No change from run 1 to 2; from 2 to 3 task b regressed (3/3 -> 0/3), named alone."""
    history = build_history(
        [run("r3", BAD, 300.0), run("r1", GOOD, 100.0), run("r2", GOOD, 200.0)],
        [1, 3],
        suite="nightly",
    )
    assert [p.run.title for p in history.points] == ["r1", "r2", "r3"]
    first, second = history.steps
    assert (first.before, first.after, list(first.changes), first.unchanged) == ("r1", "r2", [], 3)
    (change,) = second.changes
    assert (second.before, second.after) == ("r2", "r3")
    assert (change.task_id, change.kind, change.passed_a, change.passed_b) == (
        "b",
        "regressed",
        3,
        0,
    )
    assert second.unchanged == 2
    pass_hat_3 = [next(s for s in p.summaries if s.k == 3).pass_hat_k for p in history.points]
    assert pass_hat_3 == [2 / 3, 2 / 3, 1 / 3]
    assert [len(p.first.flaky) for p in history.points] == [1, 1, 1]


def test_json_lists_runs_and_steps() -> None:
    """--format json: the suite, the ks, each run's numbers and each step's changes."""
    history = build_history(
        [run("r1", GOOD, 100.0), run("r2", BAD, 200.0)], [1, 3], suite="nightly"
    )
    document = json.loads(render_history(history, "json"))
    assert document["suite"] == "nightly" and document["ks"] == [1, 3]
    assert [r["run"] for r in document["runs"]] == ["r1", "r2"]
    assert document["runs"][0]["started"] == "1970-01-01T00:01:40Z"
    assert document["runs"][1]["mean_pass_rate"] == pytest.approx(5 / 9)
    assert [k["k"] for k in document["runs"][0]["by_k"]] == [1, 3]
    (step,) = document["steps"]
    assert (step["from"], step["to"]) == ("r1", "r2")
    assert [(c["task_id"], c["change"]) for c in step["changes"]] == [("b", "regressed")]


def test_text_and_markdown_show_a_dash_where_no_task_is_scored() -> None:
    """A run with fewer trials than k shows "-" at that k, not a misleading 0%."""
    short = SuiteRun("short", "nightly", tallies([("a", "pass")]), started=50.0)
    history = build_history([short, run("r1", GOOD, 100.0)], [1, 3], suite="nightly")
    text = render_history(history, "text")
    row = next(line for line in text.splitlines() if line.startswith("1 "))
    assert row.split()[-4:] == ["100.0%", "-", "0", "0.0%"]
    assert "run 1 → run 2 (short → r1)" in text
    markdown = render_history(history, "markdown")
    assert "| 1 | short |" in markdown and "| - |" in markdown


def test_html_embeds_the_trend_and_names_the_regression() -> None:
    """The HTML page holds the SVG trend, the runs table and the regressed task."""
    history = build_history(
        [run("r1", GOOD, 100.0), run("r2", GOOD, 200.0), run("r3", BAD, 300.0)],
        [1, 3],
        suite="nightly",
    )
    page = render_history(history, "html")
    assert page.count("<svg") == 1 and "</svg>" in page
    assert "run 2 → run 3 (r2 → r3): 1 regressed" in page
    assert '<td class="regressed">regressed</td>' in page


def test_tasks_added_or_dropped_between_runs_are_named() -> None:
    """A task only in the later run (or the earlier) is no change, but is listed as such."""
    before = run("r1", [("a", "pass"), ("old", "pass")], 100.0)
    after = run("r2", [("a", "pass"), ("new", "fail")], 200.0)
    (step,) = build_history([before, after], [1], suite="nightly").steps
    assert (list(step.changes), step.unchanged) == ([], 1)
    assert (list(step.added), list(step.removed)) == (["new"], ["old"])
    text = render_history(build_history([before, after], [1], suite="nightly"), "text")
    assert "1 task only in the later run: new" in text
    assert "1 task only in the earlier run: old" in text
