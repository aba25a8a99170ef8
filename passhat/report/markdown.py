"""The markdown report, made to be pasted as a pull-request comment."""

from __future__ import annotations

from passhat.report.model import Report
from passhat.report.numbers import K_COLUMNS, by_reason, headline, k_cells, pct, strip_text
from passhat.report.spend import spend_line, task_spend_lines

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
    if report.coverage:
        lines += [_escape(report.coverage), ""]
    if report.infra_by_reason:
        lines += [_escape(by_reason(report.infra_by_reason)), ""]
    if report.usage is not None:
        lines += [_escape(spend_line(report.usage, report.attempts)), ""]
    flaky = report.flaky
    if flaky:
        strips = any(r.trials for r in flaky)
        table = [
            "| task | passed | pass rate | infra errors |" + (" trials |" if strips else ""),
            "|---|---:|---:|---:|" + ("---|" if strips else ""),
        ]
        table += [
            f"| `{_escape(r.task_id)}` | {r.passed}/{r.graded} | {pct(r.pass_rate)} "
            f"| {r.infra_errors} |" + (f" `{strip_text(r.trials)}` |" if strips else "")
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
        "| "
        + " | ".join(
            k_cells(s, report.intervals_at(s.k), mean_interval=report.mean_interval_at(s.k))
        )
        + " |"
        for s in report.summaries
    ]
    if report.intervals:
        lines += ["", f"_{100 * report.intervals[0].level:g}% bootstrap intervals over tasks._"]
    for s in report.summaries:
        if s.need_more_trials:
            ids = ", ".join(f"`{_escape(t)}`" for t in s.need_more_trials)
            lines += ["", f"Need more trials for k={s.k} ({len(s.need_more_trials)}): {ids}"]
    spent = task_spend_lines(report.usage) if report.usage is not None else []
    if spent:
        lines += ["", "<details><summary>Spend per task, costliest first</summary>", ""]
        lines += [f"- {_escape(line)}" for line in spent]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"
