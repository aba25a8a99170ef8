"""`passhat compare` and `passhat power` output: text, markdown and JSON."""

from __future__ import annotations

import json

from passhat.api.errors import UsageError
from passhat.report.numbers import pct
from passhat.stats import Comparison, Difference, PowerPlan

__all__ = ["COMPARE_FORMATS", "render_comparison", "render_power"]

COMPARE_FORMATS = ("text", "json", "markdown")


def _points(value: float) -> str:
    return f"{100.0 * value:+.1f}"


def _difference_cells(name: str, d: Difference) -> list[str]:
    interval = f"[{_points(d.interval.low)}, {_points(d.interval.high)}]"
    return [name, pct(d.a), pct(d.b), _points(d.diff), interval, f"{d.p_value:.4f}", d.verdict]


def _rows(c: Comparison) -> list[list[str]]:
    return [
        _difference_cells("mean pass rate", c.mean_pass_rate),
        _difference_cells(f"pass^{c.k}", c.pass_hat_k),
    ]


def _notes(c: Comparison) -> list[str]:
    notes = [f"{c.tasks_paired} tasks paired"]
    if c.tasks_paired == 0:
        notes = [f"nothing to compare: no task has {c.k} graded trials in both A and B"]
    if c.only_in_a:
        notes.append(f"{len(c.only_in_a)} only in A: {', '.join(c.only_in_a)}")
    if c.only_in_b:
        notes.append(f"{len(c.only_in_b)} only in B: {', '.join(c.only_in_b)}")
    if c.need_more_trials:
        notes.append(
            f"{len(c.need_more_trials)} with fewer than {c.k} graded trials in A or B: "
            + ", ".join(c.need_more_trials)
        )
    return notes


_HEADER = ["metric", "A", "B", "B - A (pts)", "interval", "p", "verdict"]


def render_comparison(comparisons: list[Comparison], fmt: str, *, title: str = "") -> str:
    """B against A, one block per k."""
    if fmt == "json":
        return json.dumps([c.as_json() for c in comparisons], indent=2) + "\n"
    if fmt not in COMPARE_FORMATS:
        raise UsageError(f"unknown format {fmt!r} (choose from {', '.join(COMPARE_FORMATS)})")
    markdown = fmt == "markdown"
    lines = [f"### {title}" if markdown else title] if title else []
    for c in comparisons:
        level = f"{100 * c.level:g}%"
        if markdown:
            lines += ["", f"**k = {c.k}** ({level} intervals, paired over tasks)", ""]
            lines.append("| " + " | ".join(_HEADER) + " |")
            lines.append("|---|---:|---:|---:|---:|---:|---|")
            lines += ["| " + " | ".join(row) + " |" for row in _rows(c)]
            lines += ["", *(f"- {note}" for note in _notes(c))]
        else:
            rows = [_HEADER, *_rows(c)]
            widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER))]
            lines += ["", f"k = {c.k} ({level} intervals, paired over tasks)"]
            for row in rows:
                cells = (cell.ljust(w) for cell, w in zip(row, widths, strict=True))
                lines.append("  ".join(cells).rstrip())
            lines += [f"  {note}" for note in _notes(c)]
    return "\n".join(lines).lstrip("\n") + "\n"


def render_power(plan: PowerPlan, fmt: str) -> str:
    """Tasks needed per trial count."""
    if fmt == "json":
        return json.dumps(plan.as_json(), indent=2) + "\n"
    if fmt not in COMPARE_FORMATS:
        raise UsageError(f"unknown format {fmt!r} (choose from {', '.join(COMPARE_FORMATS)})")
    intro = (
        f"To detect a change of {_points(plan.diff)} points in mean pass rate "
        f"(from {pct(plan.mean_rate)}) with power {plan.target_power:g} at alpha "
        f"{plan.alpha:g}, paired over tasks (passhat compare):"
    )
    assumptions = (
        f"within-task variance p(1-p) = {plan.within_variance:.4f}; "
        f"task-to-task sd of the change = {plan.task_sd:g}"
    )
    if fmt == "markdown":
        lines = [
            intro,
            "",
            "| trials per task | tasks | total trials per agent |",
            "|---:|---:|---:|",
        ]
        lines += [f"| {r.trials} | {r.tasks} | {r.trials * r.tasks} |" for r in plan.rows]
        lines += ["", f"_{assumptions}_"]
    else:
        lines = [intro, "", "  trials per task   tasks   total trials per agent"]
        lines += [f"  {r.trials:>15}   {r.tasks:>5}   {r.trials * r.tasks:>22}" for r in plan.rows]
        lines += ["", assumptions]
    return "\n".join(lines) + "\n"
