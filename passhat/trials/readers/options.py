"""How harness results become pass / fail / infra_error where a team may choose otherwise.

By default every reader scores a file as the harness that wrote it scores it (its own
printed numbers, docs/scoring.md); these options are the documented departures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["ReadOptions", "Warn"]

# Where a reader says something that is not an error (a log that did not finish).
Warn = Callable[[str], None]


@dataclass(frozen=True)
class ReadOptions:
    """`scorer`: the Inspect scorer that decides (None: the log's first scorer).
    `harness_errors`: "scored", a harness's error entries count as the harness counts them
    (tau-bench: reward 0, a failure); "infra", they are infra errors (out of n and c), as
    passhat counts its own (`passhat score --harness-errors`)."""

    scorer: str | None = None
    harness_errors: Literal["scored", "infra"] = "scored"
