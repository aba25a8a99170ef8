"""Each task's trials at a glance (a strip of pass / fail / infra marks in trial order),
and the mean's bootstrap interval as one figure whatever the k row."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from passhat.cli import main
from passhat.report import build_report, render_report
from passhat.report.numbers import k_cells, pct
from passhat.stats import TaskTally, bootstrap, tally
from passhat.stats.bootstrap import Interval
from passhat.trials.ledger import SlotLedger
from passhat.trials.outcomes import Outcome, Verdict
from passhat.trials.strips import strips_of


def test_strips_follow_trial_order_and_collapse_retries() -> None:
    """A trial's last attempt is its mark; trial numbers order the marks; rows without a
    trial number are one mark each in row order."""
    rows = [
        ("a", 2, "pass"),
        ("a", 0, "infra_error"),
        ("a", 0, "fail"),
        ("a", 1, "infra_error"),
        ("b", None, "pass"),
        ("b", None, "infra_error"),
        ("b", None, "fail"),
    ]
    assert strips_of(rows) == {"a": "-!+", "b": "+!-"}


def test_ledger_strips_mark_each_slot() -> None:
    """A live eval's strip: final slots by outcome, the others not final yet."""
    ledger = SlotLedger(2, 3)
    ledger.record(0, 1, 0, Verdict(Outcome.PASS, "exit_code"), final=True)
    ledger.record(1, 0, 0, Verdict(Outcome.INFRA_ERROR, "oom_killed"), final=False)
    ledger.record(1, 0, 1, Verdict(Outcome.INFRA_ERROR, "oom_killed"), final=True)
    ledger.record(1, 2, 0, Verdict(Outcome.FAIL, "exit_code"), final=True)
    assert ledger.strips(["a", "b"]) == {"a": ".+.", "b": "!.-"}


def _flaky_report_rows() -> list[tuple[str, int, str]]:
    outcomes = {"flip": "+-+-", "late": "--++", "solid": "++++"}
    word = {"+": "pass", "-": "fail"}
    return [
        (task, trial, word[mark])
        for task, marks in outcomes.items()
        for trial, mark in enumerate(marks)
    ]


def test_html_report_draws_each_tasks_trials_in_order() -> None:
    """The HTML table has a trials column of coloured cells in trial order, per task."""
    rows = _flaky_report_rows()
    tallies = tally((task, outcome) for task, _, outcome in rows)
    html = render_report(build_report(tallies, [1, 2], strips=strips_of(rows)), "html")
    cells = {
        task: re.findall(r'<i class="(\w+)" title="trial \d+', strip)
        for task, strip in re.findall(
            r'<td class="task">([\w-]+)</td>.*?<td class="trials">(.*?)</td>', html
        )
    }
    assert cells == {
        "flip": ["pass", "fail", "pass", "fail"],
        "late": ["fail", "fail", "pass", "pass"],
        "solid": ["pass"] * 4,
    }
    assert 'aria-label="2 pass, 2 fail"' in html
    assert "Trials in trial order" in html


def test_text_report_shows_the_flaky_tasks_strips() -> None:
    """The terminal report's flaky lines end with the task's marks, and a legend."""
    rows = _flaky_report_rows()
    tallies = tally((task, outcome) for task, _, outcome in rows)
    text = render_report(build_report(tallies, [1, 2], strips=strips_of(rows)), "text")
    assert re.search(r"^flip\s.*\s\+-\+-$", text, re.MULTILINE), text
    assert re.search(r"^late\s.*\s--\+\+$", text, re.MULTILINE), text
    assert "trials in trial order: + pass, - fail, ! infra error, . not final" in text
    markdown = render_report(build_report(tallies, [1, 2], strips=strips_of(rows)), "markdown")
    assert "| `flip` | 2/4 | 50.0% | 0 | `+-+-` |" in markdown


def test_text_report_shows_the_consistent_tasks_strips_too() -> None:
    """Every task gets its strip in the terminal: the consistent ones under their own heading
    (an infra error stays visible on a task that passed every graded trial), at most
    CONSISTENT_MAX of them, then a count."""
    from passhat.report.text import CONSISTENT_MAX

    rows = _flaky_report_rows() + [("patchy", t, o) for t, o in enumerate(["pass", "infra_error"])]
    tallies = tally((task, outcome) for task, _, outcome in rows)
    text = render_report(build_report(tallies, [1], strips=strips_of(rows)), "text")
    consistent = text[text.index("Consistent tasks (2)") :]
    assert re.search(r"^solid\s.*\s\+\+\+\+$", consistent, re.MULTILINE), text
    assert re.search(r"^patchy\s+1/1\s.*\s1\s+\+!$", consistent, re.MULTILINE), text

    many = [(f"t{i:02}", 0, "pass") for i in range(CONSISTENT_MAX + 5)]
    text = render_report(
        build_report(tally((t, o) for t, _, o in many), [1], strips=strips_of(many)), "text"
    )
    assert f"Consistent tasks ({CONSISTENT_MAX + 5})" in text
    assert re.search(rf"^t{CONSISTENT_MAX - 1:02}\s", text, re.MULTILINE)
    assert not re.search(rf"^t{CONSISTENT_MAX:02}\s", text, re.MULTILINE)
    assert "… 5 more (the HTML and JSON reports list all)" in text
    assert "trials in trial order: + pass" in text  # the legend, with no flaky task


def test_score_html_carries_the_strips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`passhat score FILE --format html` reads the trial numbers and draws the strips."""
    trials = tmp_path / "trials.jsonl"
    trials.write_text(
        "".join(
            json.dumps({"task_id": task, "trial": trial, "outcome": outcome}) + "\n"
            for task, trial, outcome in reversed(_flaky_report_rows())
        )
    )
    assert main(["score", str(trials), "--format", "html", "--no-intervals"]) == 0
    html = capsys.readouterr().out
    flip = re.search(r'<td class="task">flip</td>.*?<td class="trials">(.*?)</td>', html)
    assert flip is not None
    assert re.findall(r'<i class="(\w+)"', flip.group(1)) == ["pass", "fail", "pass", "fail"]


def test_long_strips_are_cut_with_a_count() -> None:
    """A task with more trials than the strip shows says how many more."""
    rows = [("many", trial, "pass" if trial % 3 else "fail") for trial in range(100)]
    tallies = tally((task, outcome) for task, _, outcome in rows)
    report = build_report(tallies, [1], strips=strips_of(rows))
    html = render_report(report, "html")
    assert html.count('title="trial ') == 64 and "</span> +36</td>" in html
    assert "… +36" in render_report(report, "text")


def test_the_mean_interval_is_one_figure_for_every_k_scoring_the_same_tasks() -> None:
    """The same tasks at k=1 and k=3 have the same mean, so the same interval (the smallest
    k's), in every format, even when the intervals handed in differ by k (as bootstrap's
    draws did before #21 drew once for every k)."""
    tallies = [
        TaskTally(f"t{i}", passed=i % 4, failed=3 - i % 4, infra_errors=0) for i in range(10)
    ]
    drawn = bootstrap(tallies, [1, 2, 3], resamples=500, seed=0, level=0.95)
    intervals = [
        dataclasses.replace(
            i, mean_pass_rate=Interval(i.mean_pass_rate.low - 0.01 * i.k, i.mean_pass_rate.high)
        )
        for i in drawn
    ]
    report = build_report(tallies, [1, 2, 3], intervals=intervals)
    means = {
        k_cells(s, report.intervals_at(s.k), mean_interval=report.mean_interval_at(s.k))[2]
        for s in report.summaries
    }
    assert len(means) == 1
    (mean,) = means
    assert mean.startswith(pct(report.summaries[0].mean_pass_rate) + " [")
    for fmt in ("text", "markdown", "html"):
        rendered = render_report(report, fmt)
        assert rendered.count(mean) >= 3, fmt
        for other in intervals[1:]:
            low = f"[{100 * other.mean_pass_rate.low:.1f}–"
            assert low not in rendered, (fmt, low)
    assert report.mean_interval_at(2) == intervals[0].mean_pass_rate


def test_a_k_scoring_fewer_tasks_keeps_its_own_mean_interval() -> None:
    """A k that leaves tasks out has another mean, so its own interval."""
    tallies = [
        TaskTally("short", passed=1, failed=0, infra_errors=0),
        *(TaskTally(f"t{i}", passed=i % 3, failed=2 - i % 3, infra_errors=0) for i in range(6)),
    ]
    intervals = bootstrap(tallies, [1, 2], resamples=200, seed=0, level=0.95)
    report = build_report(tallies, [1, 2], intervals=intervals)
    assert report.mean_interval_at(1) == intervals[0].mean_pass_rate
    assert report.mean_interval_at(2) == intervals[1].mean_pass_rate
