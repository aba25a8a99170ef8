"""Suite history: a suite's runs in time order, their scores and what changed between them.

A suite is the evals (or local runs) that share `spec.suite` or the `passhat.dev/suite`
label (`passhat.api.suite`). `passhat history` gathers its runs as `SuiteRun`s (local run
directories and bundles here, `passhat.history.rundirs`; cluster evals in
`passhat.operator.history_command`, the lowest layer that can list them), and from there
on nothing depends on where a run came from: `build_history` orders them and scores each
(pass^k per k, mean, flaky count, infra rate) and lists the tasks that changed between
consecutive runs with `passhat.stats.task_changes` (the per-task changes of `passhat
compare`); `render_history` prints it as text, markdown, JSON or an HTML page with the
trend drawn as inline SVG (`trend_svg`).

Layer: above `stats`, `api`, `trials`, `records` and `report`; below `operator` and `cli`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from passhat import lazy_exports

if TYPE_CHECKING:
    from passhat.history.model import (
        History,
        RunPoint,
        Step,
        SuiteRun,
        build_history,
        order_runs,
    )
    from passhat.history.render import render_history
    from passhat.history.rundirs import local_runs, select_suite
    from passhat.history.svg import trend_svg

# NB: the modules load on first use: the CLI mounts `passhat history` at every start.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "History": "model",
        "RunPoint": "model",
        "Step": "model",
        "SuiteRun": "model",
        "build_history": "model",
        "order_runs": "model",
        "render_history": "render",
        "local_runs": "rundirs",
        "select_suite": "rundirs",
        "trend_svg": "svg",
    },
)

HISTORY_FORMATS = ("text", "json", "markdown", "html")

__all__ = [
    "HISTORY_FORMATS",
    "History",
    "RunPoint",
    "Step",
    "SuiteRun",
    "build_history",
    "local_runs",
    "order_runs",
    "render_history",
    "select_suite",
    "trend_svg",
]
