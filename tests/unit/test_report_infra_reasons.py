"""Infra errors by reason: every report format shows them when the input carries reasons."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from passhat.report import build_report, render_report
from passhat.stats import TaskTally
from tests.unit.records_fake import run

TALLIES = [TaskTally("a", 2, 1, 2), TaskTally("b", 3, 0, 1)]
REASONS = {"oom_killed": 2, "evicted": 1}


@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
def test_human_formats_show_the_counts(fmt: str) -> None:
    """text, markdown and HTML print `infra errors by reason: oom_killed 2, evicted 1`."""
    report = build_report(TALLIES, [1, 3], infra_by_reason=REASONS)
    assert "infra errors by reason: oom_killed 2, evicted 1" in render_report(report, fmt)


def test_json_full_has_the_counts_and_json_stays_eight_keys() -> None:
    """json-full gains `infra_errors_by_reason`; the per-k `json` array keeps its 8 keys."""
    report = build_report(TALLIES, [1, 3], infra_by_reason=REASONS)
    assert json.loads(render_report(report, "json-full"))["infra_errors_by_reason"] == REASONS
    assert all(len(row) == 8 for row in json.loads(render_report(report, "json")))


def test_no_reasons_no_line() -> None:
    """Without reasons the human reports say nothing about them; json-full has `{}`."""
    report = build_report(TALLIES, [1])
    assert "by reason" not in render_report(report, "text")
    assert json.loads(render_report(report, "json-full"))["infra_errors_by_reason"] == {}


def test_score_counts_reasons_of_jsonl_rows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """score of rows with reasons counts infra rows per reason; one without is `unknown`."""
    path = tmp_path / "t.jsonl"
    rows = [
        {"task_id": "a", "outcome": "infra_error", "reason": "timeout"},
        {"task_id": "a", "outcome": "infra_error"},
        {"task_id": "a", "outcome": "pass", "reason": "exit_code"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = run(capsys, "score", str(path), "--no-intervals", "--format", "markdown")
    assert code == 0, err
    assert "infra errors by reason: timeout 1, unknown 1" in out


def test_score_of_a_csv_reason_column(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A CSV `reason` column is read too."""
    path = tmp_path / "t.csv"
    path.write_text("task_id,outcome,reason\na,pass,\na,infra_error,evicted\n")
    code, out, err = run(capsys, "score", str(path), "--no-intervals")
    assert code == 0, err
    assert "infra errors by reason: evicted 1" in out


def test_score_without_reasons_prints_no_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Rows that never give a reason (Inspect, tau-bench, plain exports) print no such line."""
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"task_id": "a", "outcome": "infra_error"}\n{"task_id": "a", "outcome": "pass"}\n'
    )
    code, out, err = run(capsys, "score", str(path), "--no-intervals")
    assert code == 0, err
    assert "by reason" not in out
