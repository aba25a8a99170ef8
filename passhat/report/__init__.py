"""passhat.report: one report, several formats (text, markdown, JSON, HTML) and a plot.

Every caller (a local run, the operator's live eval, `passhat score` on files) hands in
per-task tallies and the ks; what the report says is computed once (`build_report`) and
only the rendering differs, so the formats can never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from passhat import lazy_exports
from passhat.api.errors import UsageError

if TYPE_CHECKING:
    from passhat.report.model import Report, build_report
    from passhat.report.plot import save_plot
    from passhat.stats import KIntervals, TaskTally

# NB: the renderers and the report model load on first use: `passhat.cli` mounts the
# report options of several commands, and a local run needs a renderer only at its end.
__getattr__, __dir__ = lazy_exports(
    __name__, {"Report": "model", "build_report": "model", "save_plot": "plot"}
)

__all__ = ["FORMATS", "Report", "build_report", "render", "render_report", "save_plot"]

FORMATS = ("text", "json", "json-full", "markdown", "html")


def render_report(report: Report, fmt: str, *, color: bool = False) -> str:
    """A built report in one of FORMATS (UsageError for another)."""
    if fmt == "text":
        from passhat.report.text import render_text

        return render_text(report, color=color)
    if fmt in ("json", "json-full"):
        from passhat.report.jsonfmt import render_json, render_json_full

        return render_json(report) if fmt == "json" else render_json_full(report)
    if fmt == "markdown":
        from passhat.report.markdown import render_markdown

        return render_markdown(report)
    if fmt == "html":
        from passhat.report.html import render_html

        return render_html(report)
    raise UsageError(f"unknown report format {fmt!r} (choose from {', '.join(FORMATS)})")


def render(
    tallies: Sequence[TaskTally],
    ks: Sequence[int],
    fmt: str,
    *,
    title: str = "",
    intervals: Sequence[KIntervals] | None = None,
    color: bool = False,
) -> str:
    """The report of `tallies` at `ks` in format `fmt` (text, json, json-full, markdown, html)."""
    from passhat.report.model import build_report

    return render_report(
        build_report(tallies, ks, title=title, intervals=intervals), fmt, color=color
    )
