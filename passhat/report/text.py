"""The terminal report (rich), rendered to a string so it works without a terminal."""

from __future__ import annotations

import io

from passhat.report.model import Report, TaskRow
from passhat.report.numbers import K_COLUMNS, by_reason, headline, k_cells, pct, strip_text
from passhat.report.spend import spend_line, task_spend_lines

__all__ = ["render_text"]

# The consistent tasks' strips shown in the terminal; the HTML and JSON reports list all.
CONSISTENT_MAX = 20


def _task_lines(tasks: list[TaskRow]) -> str:
    """Plain aligned lines, not a rich Table: thousands of flaky tasks must stay fast.
    With trial marks, a last column shows each task's trials in trial order."""
    strips = any(r.trials for r in tasks)
    rows = [("task", "passed", "pass rate", "infra errors")] + [
        (r.task_id, f"{r.passed}/{r.graded}", pct(r.pass_rate), str(r.infra_errors)) for r in tasks
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    marks = ["trials"] + [strip_text(r.trials) for r in tasks]
    lines = [
        "  ".join(
            [row[0].ljust(widths[0])]
            + [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
            + ([strip] if strips else [])
        )
        for row, strip in zip(rows, marks, strict=True)
    ]
    return "\n".join(lines) + "\n"


def render_text(report: Report, *, color: bool = False, width: int = 100) -> str:
    """The report as text; ANSI colours only when `color`."""
    from rich.console import Console
    from rich.table import Table

    out = io.StringIO()
    console = Console(
        file=out,
        width=width,
        force_terminal=color,
        no_color=not color,
        highlight=False,
        emoji=False,
    )
    title = f"passhat · {report.title}" if report.title else "passhat"
    console.print(f"[bold]{title}[/bold]")
    top = report.headline
    if top is not None:
        console.print(
            f"[bold]{headline(top)}[/bold] · infra errors {pct(report.infra_error_rate)} "
            f"of {report.attempts} attempts",
            soft_wrap=True,
        )
    if report.coverage:
        console.print(report.coverage, soft_wrap=True, markup=False)
    if report.infra_by_reason:
        console.print(by_reason(report.infra_by_reason), soft_wrap=True, markup=False)
    if report.usage is not None:
        console.print(spend_line(report.usage, report.attempts), soft_wrap=True, markup=False)
    flaky = report.flaky
    if flaky:
        # The flaky tasks come first, right under the headline: they are why pass^k < mean.
        console.print(f"\n[bold]Flaky tasks ({len(flaky)}), most inconsistent first[/bold]")
        out.write(_task_lines(flaky))
        if any(r.trials for r in flaky):
            out.write("trials in trial order: + pass, - fail, ! infra error, . not final\n")
        console.print()
    consistent = [r for r in report.tasks if not r.flaky and r.trials]
    if consistent:
        # NB: with trial marks only: a task that passed (or failed) every graded trial can
        # still show where its infra errors and unfinished trials were
        shown = consistent[:CONSISTENT_MAX]
        console.print(f"[bold]Consistent tasks ({len(consistent)})[/bold]")
        out.write(_task_lines(shown))
        if len(consistent) > len(shown):
            out.write(
                f"… {len(consistent) - len(shown)} more (the HTML and JSON reports list all)\n"
            )
        if not flaky:
            out.write("trials in trial order: + pass, - fail, ! infra error, . not final\n")
        console.print()
    table = Table(show_edge=False, pad_edge=False)
    for name in K_COLUMNS:
        table.add_column(name, justify="right")
    for s in report.summaries:
        table.add_row(
            *k_cells(s, report.intervals_at(s.k), mean_interval=report.mean_interval_at(s.k))
        )
    console.print(table)
    if report.intervals:
        level = report.intervals[0].level
        console.print(f"[{100 * level:g}% bootstrap intervals over tasks]")
    for s in report.summaries:
        if s.need_more_trials:
            console.print(
                f"\nNeed more trials for k={s.k} ({len(s.need_more_trials)}): "
                + ", ".join(s.need_more_trials),
                soft_wrap=False,
            )
    spent = task_spend_lines(report.usage) if report.usage is not None else []
    if spent:
        console.print("\n[bold]Spend per task, costliest first[/bold]")
        out.write("".join(f"  {line}\n" for line in spent))
    return out.getvalue()
