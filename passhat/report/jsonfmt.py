"""The JSON reports: `json` is exactly the eight-key array; `json-full` adds the rest."""

from __future__ import annotations

import json

from passhat.report.model import Report

__all__ = ["render_json", "render_json_full"]


def render_json(report: Report) -> str:
    """A JSON array, one object per k, with exactly the eight keys of `KSummary.as_json()`."""
    return json.dumps([s.as_json() for s in report.summaries], indent=2) + "\n"


def render_json_full(report: Report) -> str:
    """An object: `by_k` (the eight-key array), `coverage` (why the headline pass^k covers
        fewer tasks than the run has, or null), `infra_errors_by_reason` (`{}` when the input
        had no reasons), `intervals`, `tasks` (flaky first), `curve`, `usage` (what the attempts
    spent and used, per eval and per task; null when nothing was reported or measured)."""
    document = {
        "title": report.title,
        "coverage": report.coverage,
        "by_k": [s.as_json() for s in report.summaries],
        "infra_error_rate": report.infra_error_rate,
        "infra_errors_by_reason": report.infra_by_reason,
        "attempts": report.attempts,
        "intervals": [i.as_json() for i in report.intervals] if report.intervals else None,
        "tasks": [row.as_json() for row in report.tasks],
        "curve": [
            {
                "k": p.k,
                "tasks_scored": p.tasks_scored,
                "pass_hat_k": p.pass_hat_k,
                "pass_at_k": p.pass_at_k,
            }
            for p in report.curve
        ],
        "usage": report.usage.as_json() if report.usage is not None else None,
    }
    return json.dumps(document, indent=2) + "\n"
