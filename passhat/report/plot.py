"""`--plot FILE.png`: the pass^k / pass@k curve as a picture, via matplotlib (optional).

matplotlib is imported only here, only when asked, with the Agg backend so it needs no
display; without it installed the user gets a one-line InputError-style message instead.
"""

from __future__ import annotations

import os

from passhat.api.errors import UsageError
from passhat.report.model import Report

__all__ = ["save_plot"]


def save_plot(report: Report, path: str | os.PathLike[str]) -> None:
    """Write the curve of `report` to `path` (PNG, or any format matplotlib knows by suffix)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'passhat[plot]'") from None
    ks = [p.k for p in report.curve]
    figure, axes = plt.subplots(figsize=(7, 4), dpi=100)
    try:
        axes.plot(ks, [p.pass_at_k for p in report.curve], marker="o", label="pass@k")
        axes.plot(ks, [p.pass_hat_k for p in report.curve], marker="o", label="pass^k")
        top = report.headline
        if top is not None:
            axes.axhline(top.mean_pass_rate, linestyle="--", color="grey", label="mean pass rate")
        axes.set_xlabel("k")
        axes.set_ylim(-0.02, 1.02)
        axes.set_title(report.title or "passhat")
        axes.legend(loc="lower left")
        axes.grid(alpha=0.3)
        figure.tight_layout()
        try:
            figure.savefig(os.fspath(path))
        except (OSError, ValueError) as err:
            raise UsageError(f"--plot {os.fspath(path)}: cannot write: {err}") from None
    finally:
        plt.close(figure)
