"""Inspect (inspect-ai) eval logs in JSON format, run with epochs: each epoch is a trial.

A team with an Inspect eval gets trials for free: `inspect eval task.py --epochs 8
--log-format json` already runs every sample n times. Each `samples[]` entry becomes one
row: the sample id is the task, the epoch the trial. Its score (the first scorer of the
log, or the only one the sample has) decides the outcome: "C" (correct), `true` or a number
>= 1 pass; "I", "P" (partial), "N" (no answer), `false` or a smaller number fail. A sample
that ended in an error (`error` set) is an infra error: Inspect raises them for model API
failures, timeouts and sandbox trouble, not for wrong answers. Binary `.eval` logs are zip
files: convert them with `inspect log convert --to json`.
"""

from __future__ import annotations

from typing import Any

from passhat.api.errors import InputError
from passhat.trials.outcomes import Outcome
from passhat.trials.readers.rows import TrialRow, parse_task_id

__all__ = ["is_inspect_log", "parse_inspect_log"]

_PASS = {"C"}
_FAIL = {"I", "P", "N"}


def is_inspect_log(document: Any) -> bool:
    """Whether a decoded JSON document looks like an Inspect eval log."""
    return isinstance(document, dict) and "eval" in document and "version" in document


def _scorer_name(document: dict[str, Any]) -> str | None:
    scorers = document.get("eval", {}).get("scorers") or []
    if scorers and isinstance(scorers[0], dict):
        name = scorers[0].get("name")
        return name if isinstance(name, str) else None
    return None


def _outcome(value: Any, *, path: str, where: str) -> Outcome:
    if isinstance(value, bool):
        return Outcome.PASS if value else Outcome.FAIL
    if isinstance(value, int | float):
        return Outcome.PASS if value >= 1 else Outcome.FAIL
    if isinstance(value, str) and value in _PASS | _FAIL:
        return Outcome.PASS if value in _PASS else Outcome.FAIL
    raise InputError(
        f"{where}score value {value!r} is not C/I/P/N, a boolean or a number", path=path
    )


def parse_inspect_log(document: dict[str, Any], *, path: str) -> list[TrialRow]:
    """One row per sample x epoch of an Inspect JSON log."""
    samples = document.get("samples")
    if not isinstance(samples, list) or not samples:
        status = document.get("status", "unknown")
        raise InputError(f"Inspect log has no samples (status: {status})", path=path)
    scorer = _scorer_name(document)
    rows = []
    for index, sample in enumerate(samples):
        where = f"samples[{index}]: "
        if not isinstance(sample, dict) or "id" not in sample:
            raise InputError(f"{where}not a sample with an id", path=path)
        task_id = parse_task_id(sample["id"], path=path, line=None, where=where)
        epoch = sample.get("epoch")
        trial = epoch - 1 if isinstance(epoch, int) and not isinstance(epoch, bool) else None
        if sample.get("error"):
            rows.append(TrialRow(task_id, Outcome.INFRA_ERROR, trial))
            continue
        scores = sample.get("scores") or {}
        if not isinstance(scores, dict) or not scores:
            raise InputError(f"{where}sample {task_id!r} has no score", path=path)
        score = scores.get(scorer) if scorer in scores else next(iter(scores.values()))
        if not isinstance(score, dict) or "value" not in score:
            raise InputError(f"{where}sample {task_id!r} has a score without a value", path=path)
        rows.append(TrialRow(task_id, _outcome(score["value"], path=path, where=where), trial))
    return rows
