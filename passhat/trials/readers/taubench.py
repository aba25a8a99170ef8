"""tau-bench results files: a JSON array of `{task_id, reward, trial, info, traj}`.

tau-bench (sierra-research/tau-bench, `tau_bench/run.py`) writes one `EnvRunResult` per
task x trial and scores them itself in `display_metrics`: success is a reward within 1e-6
of 1, pass^k over all entries. A caught exception is written as reward 0 with
`info.error` (run.py, the `except Exception` of `_run`) and tau-bench counts it as a
failure, so by default passhat does too: its pass^k is the one tau-bench prints. With
`--harness-errors infra` those entries are infra errors instead (reason `harness_error`):
out of n and c, as a team that wants model API failures not to count against the agent
would have it. An array whose rows carry passhat's `outcome` is not tau-bench's.
"""

from __future__ import annotations

from typing import Any

from passhat.api.errors import InputError
from passhat.trials.outcomes import Outcome
from passhat.trials.readers.options import ReadOptions
from passhat.trials.readers.rows import TrialRow, parse_task_id

__all__ = ["HARNESS_ERROR", "is_success", "is_taubench", "parse_taubench"]

# infra_error (with --harness-errors infra): the harness caught an exception for this entry
HARNESS_ERROR = "harness_error"


def is_success(reward: float) -> bool:
    """tau-bench's and tau2-bench's `is_successful`: `(1 - 1e-6) <= reward <= (1 + 1e-6)`."""
    return (1 - 1e-6) <= reward <= (1 + 1e-6)


def is_taubench(document: Any) -> bool:
    """Whether a decoded JSON document is a list of tau-bench results (rows with `reward`,
    none with passhat's `outcome`)."""
    return (
        isinstance(document, list)
        and bool(document)
        and isinstance(document[0], dict)
        and "reward" in document[0]
        and not any(isinstance(entry, dict) and "outcome" in entry for entry in document)
    )


def parse_taubench(document: list[Any], *, path: str, options: ReadOptions) -> list[TrialRow]:
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
        reason = None
        if options.harness_errors == "infra" and isinstance(info, dict) and info.get("error"):
            outcome, reason = Outcome.INFRA_ERROR, HARNESS_ERROR
        else:
            outcome = Outcome.PASS if is_success(reward) else Outcome.FAIL
        trial = entry.get("trial")
        rows.append(
            TrialRow(
                task_id=parse_task_id(entry["task_id"], path=path, line=None, where=where),
                outcome=outcome,
                trial=trial if isinstance(trial, int) and not isinstance(trial, bool) else None,
                reason=reason,
            )
        )
    return rows
