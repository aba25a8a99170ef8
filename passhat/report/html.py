"""The self-contained HTML report: one file, inline CSS and SVG, nothing fetched.

Beside a run directory's or bundle's `transcripts/` (its `report.html`), each flaky task
links to its attempts' transcripts by relative links, so the folder opens anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from urllib.parse import quote

from passhat.report.model import Report, TaskRow
from passhat.report.numbers import K_COLUMNS, STRIP_MAX, by_reason, k_cells, pct
from passhat.report.spend import spend_line, task_spend_lines
from passhat.report.svg import curve_svg

__all__ = ["render_html"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; color: #111827; }
h1 { font-size: 1.3rem; margin-bottom: 0.2rem; }
.headline { display: flex; gap: 2.5rem; align-items: baseline; margin: 1rem 0 1.5rem; }
.big { font-size: 2.4rem; font-weight: 700; }
.label { color: #6b7280; font-size: 0.85rem; }
.gap .big { color: #c2410c; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; }
th, td { padding: 0.25rem 0.7rem; border-bottom: 1px solid #e5e7eb; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.task { font-family: ui-monospace, monospace; }
td.links { text-align: left; font-size: 0.85rem; }
td.links a { margin-right: 0.5rem; white-space: nowrap; }
.note { color: #6b7280; font-size: 0.85rem; }
td.trials { text-align: left; white-space: nowrap; font-size: 0.75rem; color: #6b7280; }
.strip i { display: inline-block; width: 0.5rem; height: 0.9rem; margin-right: 1px;
  vertical-align: middle; }
.strip i.pass { background: #16a34a; }
.strip i.fail { background: #dc2626; }
.strip i.infra { background: #f59e0b; }
.strip i.pending { background: #e5e7eb; }
"""

# The CSS class of each trial mark (passhat.trials.strips).
_MARK_CLASS = {"+": "pass", "-": "fail", "!": "infra", ".": "pending"}


def _metric(label: str, value: str, css: str = "") -> str:
    return (
        f'<div class="{css}"><div class="big">{escape(value)}</div>'
        f'<div class="label">{escape(label)}</div></div>'
    )


def _links(links: Sequence[tuple[str, str]]) -> str:
    return "".join(
        f'<a href="{escape(quote(href), quote=True)}">{escape(label)}</a>' for label, href in links
    )


def _strip(marks: str) -> str:
    """A task's trials as coloured cells in trial order (titled for a mouse-over)."""
    shown = marks[:STRIP_MAX]
    cells = "".join(
        f'<i class="{_MARK_CLASS.get(m, "infra")}" title="trial {i}: '
        f'{_MARK_CLASS.get(m, "infra")}"></i>'
        for i, m in enumerate(shown)
    )
    more = f" +{len(marks) - STRIP_MAX}" if len(marks) > STRIP_MAX else ""
    counts = ", ".join(
        f"{marks.count(mark)} {name}" for mark, name in _MARK_CLASS.items() if mark in marks
    )
    return f'<span class="strip" role="img" aria-label="{counts}">{cells}</span>{more}'


def _task_table(
    rows: list[TaskRow], links: Mapping[str, Sequence[tuple[str, str]]] | None = None
) -> str:
    strips = any(r.trials for r in rows)
    names = (
        ["task", "passed", "pass rate", "infra errors"]
        + (["trials"] if strips else [])
        + (["transcripts"] if links else [])
    )
    head = "".join(f"<th>{h}</th>" for h in names)
    body = "".join(
        f'<tr><td class="task">{escape(r.task_id)}</td><td>{r.passed}/{r.graded}</td>'
        f"<td>{pct(r.pass_rate)}</td><td>{r.infra_errors}</td>"
        + (f'<td class="trials">{_strip(r.trials)}</td>' if strips else "")
        + (f'<td class="links">{_links(links.get(r.task_id, ()))}</td>' if links else "")
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(report: Report) -> str:
    """The report as one HTML page."""
    title = f"passhat · {report.title}" if report.title else "passhat"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
    ]
    top = report.headline
    if top is not None:
        gap = top.mean_pass_rate - top.pass_hat_k
        parts += [
            '<div class="headline">',
            _metric("mean pass rate", pct(top.mean_pass_rate)),
            _metric(f"pass^{top.k}", pct(top.pass_hat_k)),
            _metric("lost to inconsistency", f"{100 * gap:.1f} pts", "gap"),
            _metric(f"infra errors ({report.attempts} attempts)", pct(report.infra_error_rate)),
            "</div>",
        ]
    if report.coverage:
        parts.append(f'<p class="note">{escape(report.coverage)}</p>')
    if report.infra_by_reason:
        parts.append(f'<p class="note">{escape(by_reason(report.infra_by_reason))}</p>')
    if report.usage is not None:
        parts.append(f'<p class="note">{escape(spend_line(report.usage, report.attempts))}</p>')
    flaky = report.flaky
    if any(r.trials for r in report.tasks):
        parts.append(
            '<p class="note">Trials in trial order: <span class="strip"><i class="pass"></i>'
            '</span> pass <span class="strip"><i class="fail"></i></span> fail '
            '<span class="strip"><i class="infra"></i></span> infra error '
            '<span class="strip"><i class="pending"></i></span> not final</p>'
        )
    if flaky:
        parts.append(f"<h2>Flaky tasks ({len(flaky)}), most inconsistent first</h2>")
        parts.append(_task_table(flaky, report.transcripts))
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{escape(c)}</td>"
            for c in k_cells(
                s, report.intervals_at(s.k), mean_interval=report.mean_interval_at(s.k)
            )
        )
        + "</tr>"
        for s in report.summaries
    )
    head = "".join(f"<th>{escape(h)}</th>" for h in K_COLUMNS)
    parts.append("<h2>Scores by k</h2>")
    parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    if report.intervals:
        level = 100 * report.intervals[0].level
        parts.append(f'<p class="note">{level:g}% bootstrap intervals over tasks.</p>')
    mean = top.mean_pass_rate if top is not None else None
    parts.append(f"<h2>pass^k and pass@k over k</h2>{curve_svg(report.curve, mean=mean)}")
    for s in report.summaries:
        if s.need_more_trials:
            ids = ", ".join(s.need_more_trials)
            parts.append(
                f'<p class="note">Need more trials for k={s.k} '
                f"({len(s.need_more_trials)}): {escape(ids)}</p>"
            )
    steady = [r for r in report.tasks if not r.flaky]
    if steady:
        parts.append(f"<h2>Other tasks ({len(steady)})</h2>")
        parts.append(_task_table(steady))
    spent = task_spend_lines(report.usage) if report.usage is not None else []
    if spent:
        items = "".join(f"<li>{escape(line)}</li>" for line in spent)
        parts.append(
            f"<details><summary>Spend per task, costliest first</summary><ul>{items}</ul></details>"
        )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
