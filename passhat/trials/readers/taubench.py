"""tau-bench results files: a JSON array of `{task_id, reward, trial, info, traj}`.

tau-bench (sierra-research) writes one entry per task x trial and itself counts a reward
of 1 as success, so reward >= 1 (within 1e-6) passes and anything lower fails. An entry
whose `info` carries an `error` is an infra error: tau-bench records a caught exception
(usually a model API failure) that way, with reward 0, not a graded attempt.
"""

from __future__ import annotations

from typing import Any

from passhat.api.errors import InputError
from passhat.trials.outcomes import Outcome
from passhat.trials.readers.rows import TrialRow, parse_task_id

__all__ = ["is_taubench", "parse_taubench"]

_SUCCESS = 1.0 - 1e-6


def is_taubench(document: Any) -> bool:
    """Whether a decoded JSON document is a list of tau-bench results."""
    return (
        isinstance(document, list)
        and bool(document)
        and isinstance(document[0], dict)
        and "reward" in document[0]
    )


def parse_taubench(document: list[Any], *, path: str) -> list[TrialRow]:
    """One row per result entry."""
    rows = []
    for index, entry in enumerate(document):
        where = f"[{index}]: "
        if not isinstance(entry, dict):
            raise InputError(f"{where}expected a JSON object", path=path)
        for key in ("task_id", "reward"):
            if key not in entry:
                raise InputError(f"{where}missing key {key!r}", path=path)
        reward = entry["reward"]
        if isinstance(reward, bool) or not isinstance(reward, int | float):
            raise InputError(f"{where}reward must be a number, got {reward!r}", path=path)
        info = entry.get("info")
        if isinstance(info, dict) and info.get("error"):
            outcome = Outcome.INFRA_ERROR
        else:
            outcome = Outcome.PASS if reward >= _SUCCESS else Outcome.FAIL
        trial = entry.get("trial")
        rows.append(
            TrialRow(
                task_id=parse_task_id(entry["task_id"], path=path, line=None, where=where),
                outcome=outcome,
                trial=trial if isinstance(trial, int) and not isinstance(trial, bool) else None,
            )
        )
    return rows
