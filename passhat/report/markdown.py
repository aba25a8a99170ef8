"""The markdown report, made to be pasted as a pull-request comment."""

from __future__ import annotations

from passhat.report.model import Report
from passhat.report.numbers import K_COLUMNS, by_reason, headline, k_cells, pct

__all__ = ["render_markdown"]

# Longer task lists fold into a <details> block so the comment stays readable.
_FOLD = 20


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report) -> str:
    """The report as GitHub-flavoured markdown."""
    title = f"passhat: {report.title}" if report.title else "passhat"
    lines = [f"### {_escape(title)}", ""]
    top = report.headline
    if top is not None:
        lines += [
            f"**{headline(top)}** · infra errors {pct(report.infra_error_rate)} "
            f"of {report.attempts} attempts",
            "",
        ]
    if report.infra_by_reason:
        lines += [_escape(by_reason(report.infra_by_reason)), ""]
    flaky = report.flaky
    if flaky:
        table = ["| task | passed | pass rate | infra errors |", "|---|---:|---:|---:|"]
        table += [
            f"| `{_escape(r.task_id)}` | {r.passed}/{r.graded} | {pct(r.pass_rate)} "
            f"| {r.infra_errors} |"
            for r in flaky
        ]
        heading = f"Flaky tasks ({len(flaky)}), most inconsistent first"
        if len(flaky) > _FOLD:
            lines += [f"<details><summary>{heading}</summary>", "", *table, "", "</details>", ""]
        else:
            lines += [f"#### {heading}", "", *table, ""]
    lines += [
        "#### Scores by k",
        "",
        "| " + " | ".join(K_COLUMNS) + " |",
        "|" + "---:|" * len(K_COLUMNS),
    ]
    lines += [
        "| " + " | ".join(k_cells(s, report.intervals_at(s.k))) + " |" for s in report.summaries
    ]
    if report.intervals:
        lines += ["", f"_{100 * report.intervals[0].level:g}% bootstrap intervals over tasks._"]
    for s in report.summaries:
        if s.need_more_trials:
            ids = ", ".join(f"`{_escape(t)}`" for t in s.need_more_trials)
            lines += ["", f"Need more trials for k={s.k} ({len(s.need_more_trials)}): {ids}"]
    return "\n".join(lines) + "\n"
