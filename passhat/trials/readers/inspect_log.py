"""Inspect (inspect-ai) eval logs run with epochs, `.eval` or JSON: each epoch is a trial.

A team with an Inspect eval gets trials for free: `inspect eval task.py --epochs 8`
already runs every sample n times. Each sample x epoch becomes one row: the sample id is
the task, the epoch the trial. Both log formats read alike: JSON (`--log-format json`,
`samples[]` inline) and the default `.eval` zip (`passhat.trials.readers.evalzip`).

The score: the log's first scorer (Inspect's headline) or `--scorer NAME`. Its value is
turned into a number as Inspect's own metrics do (`inspect_ai.scorer.value_to_float`: C
1, P 0.5, I and N 0, yes/true 1, no/false 0, numbers and numeric strings as they are,
anything else 0), and the sample passes when that number is 1 (within 1e-6, the
tolerance tau-bench and tau2-bench use): with C/I scores the mean pass rate is Inspect's
`accuracy`. A sample that ended in an error (`error` set) is an infra error: Inspect
leaves it out of its metrics too, and raises such errors for model API failures,
timeouts and sandbox trouble, not for wrong answers.

Every row carries the log's task name (`eval.task`, its suite: samples of two tasks are
told apart when the inputs hold both) and the key (task instance id, sample, epoch): the
same log read twice, or an aborted log and its `inspect eval-retry` log (which keeps the
task instance id and copies the finished samples), count each sample x epoch once. A log
whose status is not `success` is read with a warning saying how much of it is missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from passhat.api.errors import InputError
from passhat.trials.outcomes import Outcome
from passhat.trials.readers.evalzip import EvalZip
from passhat.trials.readers.options import ReadOptions, Warn
from passhat.trials.readers.rows import TrialRow, one_per_attempt, parse_task_id

__all__ = ["is_inspect_log", "parse_inspect_log", "read_inspect_eval"]

_SUCCESS = 1.0 - 1e-6
_LETTERS = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}
_WORDS = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}


def is_inspect_log(document: Any) -> bool:
    """Whether a decoded JSON document looks like an Inspect eval log."""
    return isinstance(document, dict) and "eval" in document and "version" in document


@dataclass(frozen=True)
class _Log:
    """What every row of one log needs from its header."""

    path: str
    task: str
    instance: str
    scorer: str | None
    requested: bool  # the scorer was asked for (--scorer), not the log's first

    @classmethod
    def of(cls, header: dict[str, Any], *, path: str, options: ReadOptions) -> _Log:
        spec = header.get("eval")
        if not isinstance(spec, dict):
            raise InputError("Inspect log without its `eval` spec", path=path)
        task = spec.get("task")
        instance = spec.get("task_id") or spec.get("eval_id") or ""
        names = _scorer_names(spec)
        if options.scorer is not None and names and options.scorer not in names:
            raise InputError(
                f"no scorer {options.scorer!r} in this Inspect log (its scorers: "
                f"{', '.join(names)})",
                path=path,
            )
        scorer = options.scorer or (names[0] if names else None)
        return cls(
            path=path,
            task=task if isinstance(task, str) and task else "task",
            instance=str(instance),
            scorer=scorer,
            requested=options.scorer is not None,
        )

    def row(self, sample: Any, *, where: str) -> TrialRow:
        """The row of one sample x epoch."""
        if not isinstance(sample, dict) or "id" not in sample:
            raise InputError(f"{where}not a sample with an id", path=self.path)
        task_id = parse_task_id(sample["id"], path=self.path, line=None, where=where)
        epoch = sample.get("epoch")
        if not isinstance(epoch, int) or isinstance(epoch, bool):
            epoch = None
        trial = epoch - 1 if epoch is not None else None
        key = (self.instance, task_id, str(epoch or 1))
        if sample.get("error"):
            outcome = Outcome.INFRA_ERROR
        else:
            outcome = self._outcome(sample.get("scores"), task_id=task_id, where=where)
        return TrialRow(task_id, outcome, trial, suite=self.task, key=key)

    def _outcome(self, scores: Any, *, task_id: str, where: str) -> Outcome:
        if not isinstance(scores, dict) or not scores:
            raise InputError(f"{where}sample {task_id!r} has no score", path=self.path)
        if self.scorer in scores:
            score = scores[self.scorer]
        elif self.requested:
            raise InputError(
                f"{where}sample {task_id!r} has no score of scorer {self.scorer!r} "
                f"(it has: {', '.join(scores)})",
                path=self.path,
            )
        else:
            score = next(iter(scores.values()))
        if not isinstance(score, dict) or "value" not in score:
            raise InputError(
                f"{where}sample {task_id!r} has a score without a value", path=self.path
            )
        value = score["value"]
        if isinstance(value, dict | list):
            raise InputError(
                f"{where}sample {task_id!r}: the score value is a {type(value).__name__}, not "
                "one value (pick a scorer with one value per sample with --scorer)",
                path=self.path,
            )
        return Outcome.PASS if _to_float(value) >= _SUCCESS else Outcome.FAIL


def _scorer_names(spec: dict[str, Any]) -> list[str]:
    scorers = spec.get("scorers") or []
    if not isinstance(scorers, list):
        return []
    return [s["name"] for s in scorers if isinstance(s, dict) and isinstance(s.get("name"), str)]


def _to_float(value: Any) -> float:
    """Inspect's `value_to_float()` with its default C/I/P/N (inspect_ai/scorer/_metric.py)."""
    if isinstance(value, str) and value in _LETTERS:
        return _LETTERS[value]
    if isinstance(value, bool | int | float):
        number = float(value)
        return number if math.isfinite(number) else 0.0
    if isinstance(value, str):
        lowered = value.lower()
        if lowered in _WORDS:
            return _WORDS[lowered]
        try:
            number = float(lowered)
        except ValueError:
            return 0.0
        return number if math.isfinite(number) else 0.0
    return 0.0


def _warn_unfinished(
    header: dict[str, Any], rows: list[TrialRow], *, path: str, warn: Warn
) -> None:
    status = header.get("status") or "started"
    if status == "success":
        return
    spec = header.get("eval") or {}
    dataset = spec.get("dataset") if isinstance(spec, dict) else None
    config = spec.get("config") if isinstance(spec, dict) else None
    samples = dataset.get("samples") if isinstance(dataset, dict) else None
    epochs = config.get("epochs") if isinstance(config, dict) else None
    graded = sum(1 for row in rows if row.outcome is not Outcome.INFRA_ERROR)
    errored = len(rows) - graded
    error = header.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    why = f" ({message})" if isinstance(message, str) and message else ""
    text = f"{path}: Inspect log status is {status!r}{why}, not 'success'"
    if isinstance(samples, int) and samples > 0:
        expected = samples * (epochs if isinstance(epochs, int) and epochs > 0 else 1)
        missing = max(expected - len(rows), 0)
        text += (
            f": it lacks {expected - graded} of its {expected} samples x epochs "
            f"({errored} ended in an error, counted as infra errors; {missing} never ran)"
        )
    warn(
        text + "; if `inspect eval-retry` finished it, give its log too: "
        "each sample x epoch counts once"
    )


def _no_samples(status: object) -> str:
    hint = " (was it run with --no-log-samples?)" if status == "success" else ""
    return f"Inspect log has no samples (status: {status}){hint}"


def parse_inspect_log(
    document: dict[str, Any], *, path: str, options: ReadOptions, warn: Warn
) -> list[TrialRow]:
    """One row per sample x epoch of an Inspect JSON log."""
    log = _Log.of(document, path=path, options=options)
    samples = document.get("samples")
    if not isinstance(samples, list) or not samples:
        status = document.get("status", "unknown")
        raise InputError(_no_samples(status), path=path)
    rows = one_per_attempt([log.row(s, where=f"samples[{i}]: ") for i, s in enumerate(samples)])
    _warn_unfinished(document, rows, path=path, warn=warn)
    return rows


def read_inspect_eval(path: Path, *, name: str, options: ReadOptions, warn: Warn) -> list[TrialRow]:
    """One row per sample x epoch of an Inspect `.eval` log, its samples read one at a time."""
    with EvalZip(path, name=name) as log_zip:
        header = log_zip.read("header.json")
        if header is None:  # NB: a run still going, or killed: only the start journal
            header = log_zip.read("_journal/start.json")
        if not isinstance(header, dict):
            raise InputError(
                "not an Inspect .eval log: no header.json or _journal/start.json in the zip",
                path=name,
            )
        log = _Log.of(header, path=name, options=options)
        rows = one_per_attempt(
            [log.row(sample, where=f"{member}: ") for member, sample in log_zip.members("samples/")]
        )
    if not rows:
        status = header.get("status") or "started"
        raise InputError(_no_samples(status), path=name)
    _warn_unfinished(header, rows, path=name, warn=warn)
    return rows
