"""Every report format says what the attempts spent, per eval and per task, the same sums."""

from __future__ import annotations

import json

import pytest

from passhat.report import Report, build_report, render_report
from passhat.stats import TaskTally
from passhat.trials.usage import Resources, Spend, UsageSummary


def _report(usage: UsageSummary | None) -> Report:
    tallies = [TaskTally("cheap", 2, 0, 0), TaskTally("dear", 1, 1, 1)]
    return build_report(tallies, [1, 2], title="t", usage=usage)


def _usage() -> UsageSummary:
    usage = UsageSummary()
    usage.add("cheap", Spend(100, 10, 0.01), None, invalid=False)
    usage.add("dear", Spend(9000, 900, 1.5, {"tool_calls": 12}), None, invalid=False)
    usage.add("dear", None, Resources(2**20 * 64, 3.25, "cgroup"), invalid=False)
    usage.add("dear", None, None, invalid=True)
    return usage


@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
def test_the_spend_line_and_the_costliest_task_first(fmt: str) -> None:
    """$ total, tokens, CPU, peak, metrics and refused reports; per task, dear before cheap."""
    text = render_report(_report(_usage()), fmt)
    for part in ("$1.5100", "tokens 9,100 in / 910 out", "CPU 3.2 s", "64.0 MiB", "tool_calls 12"):
        assert part in text, part
    assert "1 attempts reported a spend that was refused" in text
    assert text.index("dear: $1.5000") < text.index("cheap: $0.0100")


def test_json_full_has_the_numbers() -> None:
    document = json.loads(render_report(_report(_usage()), "json-full"))
    assert document["usage"]["total"]["cost_usd"] == pytest.approx(1.51)
    assert document["usage"]["total"]["invalid_attempts"] == 1
    assert document["usage"]["by_task"]["dear"]["input_tokens"] == 9000


def test_no_spend_no_section() -> None:
    """Input that says nothing of spend shows nothing of it."""
    assert "spend" not in render_report(_report(None), "text")
    assert json.loads(render_report(_report(UsageSummary()), "json-full"))["usage"] is None
