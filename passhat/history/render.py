"""`passhat history` output: text and markdown tables, JSON, and an HTML page with the trend.

One row per run, oldest first (the numbers the trend's x axis shows), then, for each
pair of consecutive runs, the tasks that changed, printed as `passhat compare` prints
them (`passhat.report.comparison.changes_block`), so a regression reads the same in both.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape

from passhat.api.errors import UsageError
from passhat.history import HISTORY_FORMATS
from passhat.history.model import History, RunPoint, Step, iso
from passhat.history.svg import trend_svg
from passhat.report.comparison import CHANGE_WORDS, change_counts, changes_block
from passhat.report.numbers import pct

__all__ = ["render_history"]


def _header(history: History) -> list[str]:
    return [
        "#",
        "run",
        "started",
        "state",
        "tasks",
        "mean",
        *(f"pass^{k}" for k in history.ks),
        "flaky",
        "infra",
    ]


def _started(point: RunPoint) -> str:
    text = iso(point.run.started)
    return text.replace("T", " ") if text else "-"


def _row(index: int, point: RunPoint) -> list[str]:
    def rate(value: float, scored: int) -> str:
        return pct(value) if scored else "-"

    first = point.first
    return [
        str(index + 1),
        point.run.title,
        _started(point),
        point.run.state,
        str(point.tasks),
        rate(first.mean_pass_rate, first.tasks_scored),
        *(rate(s.pass_hat_k, s.tasks_scored) for s in point.summaries),
        str(len(first.flaky)),
        pct(first.infra_error_rate),
    ]


def _membership(step: Step) -> list[str]:
    """`2 tasks only in the later run: x, y` (and the earlier run's), when there are any."""
    return [
        f"{len(ids)} task{'s' * (len(ids) != 1)} only in {which}: {', '.join(ids)}"
        for ids, which in ((step.added, "the later run"), (step.removed, "the earlier run"))
        if ids
    ]


def _title(history: History) -> str:
    runs = len(history.points)
    what = f"suite {history.suite}" if history.suite else "runs"
    return f"passhat history: {what}, {runs} run{'s' * (runs != 1)}, oldest first"


def _step_heading(index: int, step: Step) -> str:
    return f"run {index + 1} → run {index + 2} ({step.before} → {step.after})"


def _text(history: History, *, markdown: bool) -> str:
    header = _header(history)
    rows = [_row(i, p) for i, p in enumerate(history.points)]
    lines = [f"### {_title(history)}" if markdown else _title(history), ""]
    if markdown:
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|---:|---|---|---|" + "---:|" * (len(header) - 4))
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    else:
        table = [header, *rows]
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        for row in table:
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if history.steps:
        heading = "Changes between consecutive runs"
        lines += ["", f"#### {heading}" if markdown else heading]
    for index, step in enumerate(history.steps):
        heading = _step_heading(index, step)
        lines += ["", f"**{heading}**" if markdown else heading]
        lines += changes_block(step.changes, unchanged=step.unchanged, markdown=markdown)
        lines += [f"{'- ' if markdown else ''}{note}" for note in _membership(step)]
    return "\n".join(lines) + "\n"


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 64rem; color: #111827; }
h1 { font-size: 1.3rem; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; }
th, td { padding: 0.25rem 0.7rem; border-bottom: 1px solid #e5e7eb; text-align: right; }
th:nth-child(2), td:nth-child(2), td.task { text-align: left; }
td.task { font-family: ui-monospace, monospace; }
.note { color: #6b7280; font-size: 0.85rem; }
.regressed, .newly_flaky { color: #b91c1c; }
.improved, .newly_passing { color: #15803d; }
"""


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _html_step(index: int, step: Step) -> str:
    counts = change_counts(step.changes) or "no change"
    heading = f"<h3>{escape(_step_heading(index, step))}: {escape(counts)}</h3>"
    if not step.changes:
        note = f"No task's pass rate changed ({step.unchanged} paired tasks)."
        return f'{heading}<p class="note">{escape(note)}</p>' + _html_membership(step)
    head = "".join(f"<th>{h}</th>" for h in ("task", "change", "A", "B", "B - A (pts)", "p"))
    body = "".join(
        f'<tr><td class="task">{escape(c.task_id)}</td>'
        f'<td class="{escape(c.kind)}">{escape(CHANGE_WORDS.get(c.kind, c.kind))}</td>'
        f"<td>{c.passed_a}/{c.graded_a}</td><td>{c.passed_b}/{c.graded_b}</td>"
        f"<td>{100 * c.diff:+.1f}</td><td>{c.p_value:.4f}</td></tr>"
        for c in step.changes
    )
    unchanged = f'<p class="note">{step.unchanged} paired tasks unchanged.</p>'
    return (
        f"{heading}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{unchanged}"
        + _html_membership(step)
    )


def _html_membership(step: Step) -> str:
    return "".join(f'<p class="note">{escape(note)}</p>' for note in _membership(step))


def _html(history: History) -> str:
    title = _title(history)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        trend_svg(history),
        "<h2>Runs</h2>",
        _html_table(_header(history), [_row(i, p) for i, p in enumerate(history.points)]),
        '<p class="note">mean, flaky and infra at the smallest k; "-": no task has k graded '
        "trials in that run.</p>",
    ]
    if history.steps:
        parts.append("<h2>Changes between consecutive runs, most significant first</h2>")
        parts += [_html_step(i, s) for i, s in enumerate(history.steps)]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def render_history(history: History, fmt: str) -> str:
    """The history in one of HISTORY_FORMATS (UsageError for another)."""
    if fmt == "json":
        return json.dumps(history.as_json(), indent=2) + "\n"
    if fmt == "html":
        return _html(history)
    if fmt not in HISTORY_FORMATS:
        raise UsageError(f"unknown format {fmt!r} (choose from {', '.join(HISTORY_FORMATS)})")
    return _text(history, markdown=fmt == "markdown")
