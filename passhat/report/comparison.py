"""`passhat compare` and `passhat power` output: text, markdown and JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence

from passhat.api.errors import UsageError
from passhat.report.numbers import pct
from passhat.stats import Comparison, Difference, PowerPlan, TaskChange

__all__ = [
    "CHANGE_WORDS",
    "COMPARE_FORMATS",
    "change_counts",
    "changes_block",
    "render_comparison",
    "render_power",
]

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


_CHANGE_HEADER = ["task", "change", "A", "B", "B - A (pts)", "p"]
CHANGE_WORDS = {
    "regressed": "regressed",
    "newly_flaky": "newly flaky",
    "improved": "improved",
    "newly_passing": "newly passing",
}


def _change_rows(changes: Sequence[TaskChange]) -> list[list[str]]:
    return [
        [
            c.task_id,
            CHANGE_WORDS.get(c.kind, c.kind),
            f"{c.passed_a}/{c.graded_a}",
            f"{c.passed_b}/{c.graded_b}",
            _points(c.diff),
            f"{c.p_value:.4f}",
        ]
        for c in changes
    ]


def change_counts(changes: Sequence[TaskChange]) -> str:
    counts = {kind: sum(c.kind == kind for c in changes) for kind in CHANGE_WORDS}
    return ", ".join(f"{n} {CHANGE_WORDS[kind]}" for kind, n in counts.items() if n)


def changes_block(changes: Sequence[TaskChange], *, unchanged: int, markdown: bool) -> list[str]:
    """The per-task changes, most significant first (Fisher's exact p per task)."""
    if not changes:
        return ["", f"No task's pass rate changed ({unchanged} paired tasks)."]
    heading = (
        f"Tasks that changed ({len(changes)}: {change_counts(changes)}; {unchanged} "
        "unchanged), most significant first"
    )
    rows = _change_rows(changes)
    if markdown:
        lines = ["", f"**{heading}**", ""]
        lines.append("| " + " | ".join(_CHANGE_HEADER) + " |")
        lines.append("|---|---|---:|---:|---:|---:|")
        return lines + ["| " + " | ".join(row) + " |" for row in rows]
    table = [_CHANGE_HEADER, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(_CHANGE_HEADER))]
    lines = ["", heading]
    for row in table:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return lines


def render_comparison(
    comparisons: list[Comparison],
    fmt: str,
    *,
    title: str = "",
    changes: Sequence[TaskChange] = (),
    unchanged: int = 0,
    sources: tuple[str, str] = ("", ""),
) -> str:
    """B against A: the per-task changes, most significant first, then one block per k.

    JSON: `{"a", "b", "by_k": [one comparison per k], "changes": [...], "unchanged"}`.
    """
    if fmt == "json":
        document = {
            "a": sources[0],
            "b": sources[1],
            "by_k": [c.as_json() for c in comparisons],
            "changes": [c.as_json() for c in changes],
            "unchanged": unchanged,
        }
        return json.dumps(document, indent=2) + "\n"
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
    lines += changes_block(changes, unchanged=unchanged, markdown=markdown)
    return "\n".join(lines).lstrip("\n") + "\n"


def render_power(plan: PowerPlan, fmt: str) -> str:
    """Tasks needed per trial count, and what each plan costs per agent (in trials, and
    in dollars when the pilot reported its cost)."""
    if fmt == "json":
        return json.dumps(plan.as_json(), indent=2) + "\n"
    if fmt not in COMPARE_FORMATS:
        raise UsageError(f"unknown format {fmt!r} (choose from {', '.join(COMPARE_FORMATS)})")
    metric = "mean pass rate" if plan.k == 1 else f"pass^{plan.k}"
    intro = (
        f"To detect a change of {_points(plan.diff)} points in {metric} "
        f"(from {pct(plan.mean_rate)}) with power {plan.target_power:g} at alpha "
        f"{plan.alpha:g}, paired over tasks (passhat compare):"
    )
    within = (
        "p(1-p)"
        if plan.k == 1
        else f"of a task's pass^{plan.k} estimate with {plan.rows[0].trials} trials"
    )
    assumptions = (
        f"within-task variance {within} = {plan.within_variance:.4f}; "
        f"task-to-task sd of the change = {plan.task_sd:g}"
    )
    priced = plan.cost_per_trial is not None
    if priced:
        assumptions += (
            f"; ${plan.cost_per_trial:.4f} per graded trial; compare runs two agents: "
            "twice the totals"
        )
    header = ["trials per task", "tasks", "total trials per agent"] + (
        ["cost per agent"] if priced else []
    )
    rows = []
    for r in plan.rows:
        cells = [str(r.trials), str(r.tasks), str(r.trials * r.tasks)]
        if plan.cost_per_trial is not None:
            cells.append(f"${r.trials * r.tasks * plan.cost_per_trial:,.2f}")
        rows.append(cells)
    if fmt == "markdown":
        lines = [intro, "", "| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
        lines += ["| " + " | ".join(cells) + " |" for cells in rows]
        lines += ["", f"_{assumptions}_"]
    else:
        widths = [len(h) for h in header]
        lines = [intro, "", "  " + "   ".join(header)]
        lines += [
            "  " + "   ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))
            for cells in rows
        ]
        lines += ["", assumptions]
    return "\n".join(lines) + "\n"
