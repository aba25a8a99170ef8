"""A suite's trend as inline SVG: pass^k per k, the mean and the infra rate, run by run.

Hand-written like the report's curve (`passhat.report.svg`): no scripts, no fonts or
files fetched, so the HTML page stays one self-contained file and `--plot trend.svg`
needs no plotting library. Runs are evenly spaced, oldest left, numbered as the table
numbers them; each point's tooltip names the run. A run with no task scored at a k
leaves a gap in that k's line rather than a misleading 0%.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from passhat.history.model import History, RunPoint
from passhat.report.svg import legend, percent_grid

__all__ = ["trend_svg"]

WIDTH, HEIGHT = 720, 320
LEFT, RIGHT, TOP, BOTTOM = 52, 170, 16, 44
# One color per k (cycled), then the mean and the infra rate.
K_COLORS = ("#c2410c", "#1d4ed8", "#15803d", "#7c3aed", "#0e7490", "#be185d")
MEAN_COLOR, INFRA_COLOR = "#6b7280", "#f59e0b"


def _x(index: int, count: int) -> float:
    span = WIDTH - LEFT - RIGHT
    return LEFT + (span / 2 if count <= 1 else span * index / (count - 1))


def _y(value: float) -> float:
    return TOP + (HEIGHT - TOP - BOTTOM) * (1.0 - value)


def _line(
    values: Sequence[float | None],
    titles: Sequence[str],
    *,
    color: str,
    label: str,
    dash: str = "",
) -> list[str]:
    """Polylines through the runs that have a value (a None breaks the line), and dots."""
    parts: list[str] = []
    run: list[str] = []
    count = len(values)
    for index, value in enumerate([*values, None]):
        if value is None:
            if len(run) > 1:
                parts.append(
                    f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} '
                    f'points="{" ".join(run)}"/>'
                )
            run = []
            continue
        x, y = _x(index, count), _y(value)
        run.append(f"{x:.1f},{y:.1f}")
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"><title>'
            f"{escape(label)}, run {index + 1} ({escape(titles[index])}): {100 * value:.1f}%"
            "</title></circle>"
        )
    return parts


def _pass_hat(point: RunPoint, k: int) -> float | None:
    summary = next(s for s in point.summaries if s.k == k)
    return summary.pass_hat_k if summary.tasks_scored else None


def trend_svg(history: History) -> str:
    """An SVG chart of the suite's pass^k (each k), mean pass rate and infra-error rate."""
    points = history.points
    titles = [p.run.title for p in points]
    plot_right = WIDTH - RIGHT
    what = f"suite {history.suite}" if history.suite else "the runs"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="pass^k over the runs of {escape(what)}" font-family="sans-serif" '
        'font-size="12">'
    ]
    parts += percent_grid(_y, left=LEFT, right=plot_right)
    step = max(1, len(points) // 12)
    for index in range(0, len(points), step):
        x = _x(index, len(points))
        parts.append(
            f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">'
            f"<title>{escape(titles[index])}</title>{index + 1}</text>"
        )
    parts.append(
        f'<text x="{(LEFT + plot_right) / 2:.1f}" y="{HEIGHT - 8}" text-anchor="middle">'
        "run (oldest first)</text>"
    )
    dashed, dotted = ' stroke-dasharray="5,4"', ' stroke-dasharray="2,3"'
    # NB: the mean and the infra rate first, so the pass^k lines are drawn on top (pass^1
    # is the mean: its line would hide under the dashes)
    means = [p.first.mean_pass_rate if p.first.tasks_scored else None for p in points]
    parts += _line(means, titles, color=MEAN_COLOR, label="mean pass rate", dash=dashed)
    infra = [p.first.infra_error_rate for p in points]
    parts += _line(infra, titles, color=INFRA_COLOR, label="infra-error rate", dash=dotted)
    entries: list[tuple[str, str, str]] = []
    for i, k in enumerate(history.ks):
        color = K_COLORS[i % len(K_COLORS)]
        label = f"pass^{k}"
        parts += _line([_pass_hat(p, k) for p in points], titles, color=color, label=label)
        entries.append((color, label, ""))
    entries += [(MEAN_COLOR, "mean pass rate", dashed), (INFRA_COLOR, "infra-error rate", dotted)]
    parts += legend(entries, x=plot_right, top=TOP)
    parts.append("</svg>")
    return "".join(parts)
