"""The pass^k and pass@k curve over k as inline SVG (no scripts, no external files)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from passhat.report.model import CurvePoint

__all__ = ["curve_svg", "legend", "percent_grid"]

WIDTH, HEIGHT = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 52, 150, 16, 40
HAT_COLOR, AT_COLOR, MEAN_COLOR = "#c2410c", "#1d4ed8", "#6b7280"


def _x(k: int, last: int) -> float:
    span = WIDTH - LEFT - RIGHT
    return LEFT + (span / 2 if last == 1 else span * (k - 1) / (last - 1))


def _y(value: float) -> float:
    return TOP + (HEIGHT - TOP - BOTTOM) * (1.0 - value)


def _series(points: list[CurvePoint], last: int, attr: str, color: str, label: str) -> list[str]:
    coords = [(_x(p.k, last), _y(getattr(p, attr))) for p in points]
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    parts = [f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>']
    for p, (x, y) in zip(points, coords, strict=True):
        value = getattr(p, attr)
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}">'
            f"<title>{escape(label)} k={p.k}: {value:.4f} ({p.tasks_scored} tasks)</title></circle>"
        )
    return parts


def percent_grid(y_of: Callable[[float], float], *, left: float, right: float) -> list[str]:
    """Horizontal lines at 0, 25, ..., 100 % from `left` to `right`, labelled on the left."""
    parts = []
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = y_of(tick)
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#e5e7eb"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{100 * tick:.0f}%</text>'
        )
    return parts


def legend(entries: Sequence[tuple[str, str, str]], *, x: float, top: float) -> list[str]:
    """A line sample and a label per (color, label, extra stroke attributes), stacked."""
    parts = []
    for i, (color, label, dash) in enumerate(entries):
        y = top + 10 + 20 * i
        parts.append(
            f'<line x1="{x + 16}" y1="{y}" x2="{x + 40}" y2="{y}" '
            f'stroke="{color}" stroke-width="2"{dash}/>'
            f'<text x="{x + 46}" y="{y + 4}">{escape(label)}</text>'
        )
    return parts


def curve_svg(points: list[CurvePoint], *, mean: float | None = None) -> str:
    """An SVG plot of pass^k and pass@k against k, with the mean pass rate as a dashed line."""
    last = max((p.k for p in points), default=1)
    plot_right = WIDTH - RIGHT
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" '
        'aria-label="pass^k and pass@k over k" font-family="sans-serif" font-size="12">'
    ]
    parts += percent_grid(_y, left=LEFT, right=plot_right)
    ticks = sorted({p.k for p in points}) if len(points) <= 16 else None
    if ticks is None:
        ticks = sorted({1, last, *(round(1 + (last - 1) * i / 4) for i in range(5))})
    for k in ticks:
        x = _x(k, last)
        parts.append(
            f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">{k}</text>'
        )
    parts.append(
        f'<text x="{(LEFT + plot_right) / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle">k</text>'
    )
    if mean is not None:
        y = _y(mean)
        parts.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{plot_right}" y2="{y:.1f}" '
            f'stroke="{MEAN_COLOR}" stroke-dasharray="5,4"/>'
        )
    if points:
        parts += _series(points, last, "pass_at_k", AT_COLOR, "pass@k")
        parts += _series(points, last, "pass_hat_k", HAT_COLOR, "pass^k")
    entries = [(AT_COLOR, "pass@k", ""), (HAT_COLOR, "pass^k", "")]
    if mean is not None:
        entries.append((MEAN_COLOR, "mean pass rate", ' stroke-dasharray="5,4"'))
    parts += legend(entries, x=plot_right, top=TOP)
    parts.append("</svg>")
    return "".join(parts)
