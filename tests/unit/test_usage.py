"""What a trial reports it spent: read from its result JSON, refused naming the field when
a value is bad, summed per task and per eval with infra-error attempts included, bounded."""

from __future__ import annotations

from typing import Any

import pytest

from passhat.trials.usage import (
    MAX_METRICS,
    MAX_USAGE_TASKS,
    Resources,
    Spend,
    SpendTotals,
    UsageSummary,
    record_spend,
    spend_of,
    summarize_usage,
)


def test_a_full_report_is_read() -> None:
    """usage, cost_usd and metrics are read; other keys are ignored."""
    spend, problem = spend_of(
        {
            "outcome": "pass",
            "usage": {"input_tokens": 1200, "output_tokens": 340.0},
            "cost_usd": 0.0123,
            "metrics": {"tool_calls": 7, "latency.p50": 1.5},
            "transcript": "...",
        }
    )
    assert problem is None
    assert spend == Spend(1200, 340, 0.0123, {"tool_calls": 7.0, "latency.p50": 1.5})


def test_no_report_is_no_spend() -> None:
    """A result without the keys (or no result) reports nothing, and nothing is wrong."""
    assert spend_of({"outcome": "pass"}) == (None, None)
    assert spend_of(None) == (None, None)


@pytest.mark.parametrize(
    ("result", "field"),
    [
        ({"cost_usd": -0.5}, "cost_usd: -0.5 is negative"),
        ({"cost_usd": "0.5"}, 'cost_usd: "0.5" is not a number'),
        ({"cost_usd": True}, "cost_usd: True is not a number"),
        ({"usage": {"input_tokens": -3}}, "usage.input_tokens: -3 is negative"),
        ({"usage": {"output_tokens": 1.5}}, "usage.output_tokens: 1.5 is not a whole number"),
        ({"usage": [1, 2]}, "usage: [1, 2] is not an object"),
        ({"metrics": {"calls": "many"}}, 'metrics.calls: "many" is not a number'),
        ({"metrics": {"bad name": 1}}, 'metrics: "bad name" is not a metric name'),
        ({"metrics": {f"m{i}": 1 for i in range(MAX_METRICS + 1)}}, "metrics: 17 names"),
    ],
)
def test_a_bad_value_is_refused_naming_its_field(result: dict[str, Any], field: str) -> None:
    """The problem names the field and the value; none of the report is summed."""
    spend, problem = spend_of({"outcome": "pass", **result})
    assert spend is None and problem is not None and problem.startswith(field)


def test_sums_per_task_and_eval_count_infra_errors_and_refused_reports() -> None:
    """Every attempt counts (an infra error's cost was spent); a refused report counts as
    invalid, never as money; peaks take the largest attempt, not the sum."""
    records: list[dict[str, Any]] = [
        {"task_id": "a", "outcome": "pass", "cost_usd": 0.5, "usage": {"input_tokens": 10}},
        {
            "task_id": "a",
            "outcome": "infra_error",
            "cost_usd": 0.25,
            "resources": {"peak_memory_bytes": 100, "cpu_seconds": 1.5},
        },
        {"task_id": "b", "outcome": "fail", "spend_error": "cost_usd: -1 is negative"},
        {
            "task_id": "b",
            "outcome": "pass",
            "result": {"outcome": "pass", "cost_usd": 1.0, "metrics": {"calls": 2}},
            "resources": {"peak_memory_bytes": 300, "cpu_seconds": 0.5},
        },
    ]
    usage = summarize_usage(records)
    total = usage.total
    assert total.cost_usd == pytest.approx(1.75)
    assert (total.reported, total.measured, total.invalid) == (3, 2, 1)
    assert total.input_tokens == 10 and total.metrics == {"calls": 2.0}
    assert total.peak_memory_bytes == 300 and total.cpu_seconds == pytest.approx(2.0)
    assert usage.by_task is not None
    assert usage.by_task["a"].cost_usd == pytest.approx(0.75)
    assert usage.by_task["b"].invalid == 1


def test_a_record_prefers_its_own_fields_to_its_result() -> None:
    """A local journal line carries the fields; a cluster record has them in `result`."""
    own = {"cost_usd": 0.1, "result": {"outcome": "pass", "cost_usd": 9.0}}
    assert record_spend(own)[0] == Spend(cost_usd=0.1)
    cluster = {"result": {"outcome": "pass", "cost_usd": 9.0}}
    assert record_spend(cluster)[0] == Spend(cost_usd=9.0)


def test_status_round_trip_and_the_per_task_bound() -> None:
    """as_status / from_status keep the sums; past MAX_USAGE_TASKS tasks only totals stay."""
    usage = UsageSummary()
    for index in range(MAX_USAGE_TASKS + 1):
        usage.add(f"t{index}", Spend(cost_usd=0.01), None, invalid=False)
    assert usage.by_task is None
    status = usage.as_status(n_tasks=MAX_USAGE_TASKS + 1)
    assert "byTask" not in status
    back = UsageSummary.from_status(status)
    assert back.total.cost_usd == pytest.approx(usage.total.cost_usd)
    assert back.total.reported == MAX_USAGE_TASKS + 1 and back.by_task is None

    small = UsageSummary()
    small.add("a", Spend(1, 2, 0.5, {"x": 1.0}), Resources(64, 0.25, "cgroup"), invalid=False)
    status = small.as_status(n_tasks=1)
    assert status["byTask"] == {
        "a": {
            "inputTokens": 1,
            "outputTokens": 2,
            "costUSD": 0.5,
            "cpuSeconds": 0.25,
            "peakMemoryBytes": 64,
        }
    }
    again = UsageSummary.from_status(status)
    assert again.by_task is not None and again.by_task["a"].cost_usd == 0.5
    assert again.total.metrics == {"x": 1.0}


def test_malformed_status_reads_as_zero() -> None:
    """A hand-edited status never raises (the operator reads it every pass)."""
    totals = SpendTotals.from_status({"costUSD": "lots", "inputTokens": -4, "metrics": [1]})
    assert totals == SpendTotals()
