"""What each attempt spent, and the sums every report, the status and the metrics show.

Every trial is a full agent run that costs tokens and dollars, so a trial may say what it
spent in its result JSON, beside its outcome:

    {"outcome": "pass", "usage": {"input_tokens": 1200, "output_tokens": 340},
     "cost_usd": 0.0123, "metrics": {"tool_calls": 7}}

Each part is optional. passhat adds what it measured itself (`resources`: peak memory and
CPU seconds of the attempt; see docs/scoring.md#what-the-trials-cost for which source on
which platform). A value that is not what its field needs (a negative or non-number token
count or cost, a non-number metric) is the trial's error: `spend_of` returns the problem
naming the field, the attempt is recorded with its outcome as always, and its reported
spend is left out of the sums (counted in `invalid`): an agent's bad bookkeeping never
costs a graded trial.

Infra-error attempts count too: the money was spent even if the attempt is out of the
score. `SpendTotals` is one sum (an eval's, or a task's); `UsageSummary` an eval's with
its tasks'. Both executors and every reader of trial records use these, so a local run, a
cluster eval and `passhat score` of a trial file sum alike.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_METRICS",
    "MAX_USAGE_TASKS",
    "Resources",
    "Spend",
    "SpendTotals",
    "UsageSummary",
    "record_spend",
    "resources_of",
    "spend_of",
    "summarize_usage",
    "usage_of_files",
]

# Free-form metrics per attempt, and metric names an eval's sums keep (the first seen).
MAX_METRICS = 16
# Tasks `status.usage.byTask` lists; an eval with more keeps its totals only.
MAX_USAGE_TASKS = 1000
_METRIC_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,62}$")
_TOKENS = ("input_tokens", "output_tokens")
# status.usage keys only the eval's total carries, not each task's entry.
_TOTAL_ONLY = frozenset({"metrics", "reportedAttempts", "measuredAttempts"})


@dataclass(frozen=True)
class Spend:
    """What one attempt reported it spent."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    metrics: Mapping[str, float] = field(default_factory=dict)

    def as_record(self) -> dict[str, Any]:
        """The fields as a trial record carries them (result JSON names); `cost_usd`
        always, so a record says the attempt reported (a cost of 0 included)."""
        out: dict[str, Any] = {"cost_usd": self.cost_usd}
        if self.input_tokens or self.output_tokens:
            out["usage"] = {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}
        if self.metrics:
            out["metrics"] = dict(self.metrics)
        return out


@dataclass(frozen=True)
class Resources:
    """What passhat measured of one attempt; None where the platform did not say."""

    peak_memory_bytes: int | None = None
    cpu_seconds: float | None = None
    source: str = ""

    def as_record(self) -> dict[str, Any]:
        """`{"peak_memory_bytes": ..., "cpu_seconds": ..., "source": ...}` (known parts)."""
        out: dict[str, Any] = {}
        if self.peak_memory_bytes is not None:
            out["peak_memory_bytes"] = self.peak_memory_bytes
        if self.cpu_seconds is not None:
            out["cpu_seconds"] = round(self.cpu_seconds, 3)
        if self.source:
            out["source"] = self.source
        return out


def _number(value: Any) -> float | None:
    """`value` as a finite float, None for anything else (bool, string, NaN, 1e999)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else f'"{value}"'
    return text if len(text) <= 40 else text[:37] + "..."


def spend_of(result: Mapping[str, Any] | None) -> tuple[Spend | None, str | None]:
    """(the spend `result` reports, None when it reports none; the problem, if any).

    `result` is a result JSON (or a trial record, which carries the same fields). The
    problem names the field, e.g. `cost_usd: -0.5 is negative`; with a problem the spend
    is None (none of it counts: a half-believed report would mislead more than none).
    """
    if not result or not any(key in result for key in ("usage", "cost_usd", "metrics")):
        return None, None
    tokens = {name: 0 for name in _TOKENS}
    usage = result.get("usage")
    if usage is not None:
        if not isinstance(usage, Mapping):
            return None, f"usage: {_shown(usage)} is not an object"
        for name in _TOKENS:
            if name not in usage or usage[name] is None:
                continue
            value = _number(usage[name])
            if value is None or value != int(value):
                return None, f"usage.{name}: {_shown(usage[name])} is not a whole number"
            if value < 0:
                return None, f"usage.{name}: {_shown(usage[name])} is negative"
            tokens[name] = int(value)
    cost = 0.0
    if result.get("cost_usd") is not None:
        number = _number(result["cost_usd"])
        if number is None:
            return None, f"cost_usd: {_shown(result['cost_usd'])} is not a number"
        if number < 0:
            return None, f"cost_usd: {_shown(result['cost_usd'])} is negative"
        cost = number
    metrics: dict[str, float] = {}
    raw = result.get("metrics")
    if raw is not None:
        if not isinstance(raw, Mapping):
            return None, f"metrics: {_shown(raw)} is not an object"
        if len(raw) > MAX_METRICS:
            return None, f"metrics: {len(raw)} names, more than {MAX_METRICS}"
        for name, value in raw.items():
            if not _METRIC_NAME.match(str(name)):
                return None, f"metrics: {_shown(name)} is not a metric name ([A-Za-z_][...])"
            number = _number(value)
            if number is None:
                return None, f"metrics.{name}: {_shown(value)} is not a number"
            metrics[str(name)] = number
    return Spend(tokens["input_tokens"], tokens["output_tokens"], cost, metrics), None


def resources_of(obj: Mapping[str, Any] | None) -> Resources | None:
    """The `resources` object of a record or result (None when absent or unreadable:
    passhat wrote it, so a bad one is dropped, not reported as the trial's error)."""
    raw = (obj or {}).get("resources")
    if not isinstance(raw, Mapping):
        return None
    memory = _number(raw.get("peak_memory_bytes"))
    cpu = _number(raw.get("cpu_seconds"))
    if memory is None and cpu is None:
        return None
    return Resources(
        peak_memory_bytes=int(memory) if memory is not None and memory >= 0 else None,
        cpu_seconds=cpu if cpu is not None and cpu >= 0 else None,
        source=str(raw.get("source") or ""),
    )


def record_spend(
    record: Mapping[str, Any],
) -> tuple[Spend | None, Resources | None, str | None]:
    """(spend, resources, problem) of one trial record: its own fields (a local journal
    line) or, when it has none, its `result` (a cluster attempt's result JSON)."""
    source: Mapping[str, Any] = record
    result = record.get("result")
    own = any(key in record for key in ("usage", "cost_usd", "metrics"))
    if not own and isinstance(result, Mapping):
        source = result
    spend, problem = spend_of(source)
    if problem is None and isinstance(record.get("spend_error"), str):
        problem = record["spend_error"]  # NB: a journal line keeps the problem, not the values
    resources = resources_of(record) or (
        resources_of(result) if isinstance(result, Mapping) else None
    )
    return spend, resources, problem


@dataclass
class SpendTotals:
    """A sum of attempts' spend: an eval's or one task's."""

    # Attempts that reported a spend, and attempts passhat measured.
    reported: int = 0
    measured: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cpu_seconds: float = 0.0
    # The largest peak of any one attempt (peaks do not add up).
    peak_memory_bytes: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    # Attempts whose reported spend was refused (spend_of's problem): not in the sums.
    invalid: int = 0

    def add(self, spend: Spend | None, resources: Resources | None, *, invalid: bool) -> None:
        """Add one attempt."""
        if invalid:
            self.invalid += 1
        if spend is not None:
            self.reported += 1
            self.input_tokens += spend.input_tokens
            self.output_tokens += spend.output_tokens
            self.cost_usd += spend.cost_usd
            for name, value in spend.metrics.items():
                if name in self.metrics or len(self.metrics) < 2 * MAX_METRICS:
                    self.metrics[name] = self.metrics.get(name, 0.0) + value
        if resources is not None:
            self.measured += 1
            self.cpu_seconds += resources.cpu_seconds or 0.0
            self.peak_memory_bytes = max(self.peak_memory_bytes, resources.peak_memory_bytes or 0)

    def merge(self, other: SpendTotals) -> None:
        """Add another sum to this one."""
        self.reported += other.reported
        self.measured += other.measured
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cost_usd += other.cost_usd
        self.cpu_seconds += other.cpu_seconds
        self.peak_memory_bytes = max(self.peak_memory_bytes, other.peak_memory_bytes)
        self.invalid += other.invalid
        for name, value in other.metrics.items():
            if name in self.metrics or len(self.metrics) < 2 * MAX_METRICS:
                self.metrics[name] = self.metrics.get(name, 0.0) + value

    @property
    def empty(self) -> bool:
        """Nothing reported, measured or refused."""
        return not (self.reported or self.measured or self.invalid)

    def as_json(self) -> dict[str, Any]:
        """snake_case JSON (the reports' `usage`)."""
        return {
            "reported_attempts": self.reported,
            "measured_attempts": self.measured,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "cpu_seconds": round(self.cpu_seconds, 3),
            "peak_memory_bytes": self.peak_memory_bytes,
            "metrics": {name: round(value, 6) for name, value in self.metrics.items()},
            "invalid_attempts": self.invalid,
        }

    def as_status(self) -> dict[str, Any]:
        """camelCase JSON, as `status.usage` (and each of its `byTask`) holds it."""
        out: dict[str, Any] = {
            "reportedAttempts": self.reported,
            "measuredAttempts": self.measured,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "costUSD": round(self.cost_usd, 6),
            "cpuSeconds": round(self.cpu_seconds, 3),
            "peakMemoryBytes": self.peak_memory_bytes,
        }
        if self.metrics:
            out["metrics"] = {name: round(value, 6) for name, value in self.metrics.items()}
        if self.invalid:
            out["invalidAttempts"] = self.invalid
        return out

    @classmethod
    def from_status(cls, data: Any) -> SpendTotals:
        """The sum `as_status` wrote (lenient: a malformed part reads as 0)."""
        if not isinstance(data, Mapping):
            return cls()

        def number(key: str) -> float:
            value = _number(data.get(key))
            return value if value is not None and value >= 0 else 0.0

        metrics = data.get("metrics")
        return cls(
            reported=int(number("reportedAttempts")),
            measured=int(number("measuredAttempts")),
            input_tokens=int(number("inputTokens")),
            output_tokens=int(number("outputTokens")),
            cost_usd=number("costUSD"),
            cpu_seconds=number("cpuSeconds"),
            peak_memory_bytes=int(number("peakMemoryBytes")),
            metrics={
                str(name): value
                for name, raw in (metrics.items() if isinstance(metrics, Mapping) else ())
                if (value := _number(raw)) is not None
            },
            invalid=int(number("invalidAttempts")),
        )


@dataclass
class UsageSummary:
    """An eval's spend: the total and each task's (`by_task` None: not kept, too many)."""

    total: SpendTotals = field(default_factory=SpendTotals)
    by_task: dict[str, SpendTotals] | None = field(default_factory=dict)

    def add(
        self, task_id: str, spend: Spend | None, resources: Resources | None, *, invalid: bool
    ) -> None:
        """Add one attempt of task `task_id`."""
        self.total.add(spend, resources, invalid=invalid)
        if self.by_task is None or (spend is None and resources is None and not invalid):
            return
        if task_id not in self.by_task and len(self.by_task) >= MAX_USAGE_TASKS:
            self.by_task = None  # NB: all or none: a partial per-task table would mislead
            return
        self.by_task.setdefault(task_id, SpendTotals()).add(spend, resources, invalid=invalid)

    @property
    def empty(self) -> bool:
        """No attempt reported, was measured or was refused."""
        return self.total.empty

    def as_json(self) -> dict[str, Any]:
        """`{"total": {...}, "by_task": {task: {...}} | null}` (snake_case)."""
        return {
            "total": self.total.as_json(),
            "by_task": (
                {task: totals.as_json() for task, totals in self.by_task.items()}
                if self.by_task is not None
                else None
            ),
        }

    def as_status(self, *, n_tasks: int) -> dict[str, Any]:
        """`status.usage`: the totals, and `byTask` while the eval has at most
        MAX_USAGE_TASKS tasks."""
        out = self.total.as_status()
        if self.by_task is not None and n_tasks <= MAX_USAGE_TASKS:
            # NB: a task's entry keeps its non-zero sums only, no metrics and no attempt
            # counts: 1000 tasks stay under 192 KiB of status at worst (test_status_size)
            out["byTask"] = {
                task: {
                    key: value
                    for key, value in totals.as_status().items()
                    if value and key not in _TOTAL_ONLY
                }
                for task, totals in self.by_task.items()
            }
        return out

    @classmethod
    def from_status(cls, data: Any) -> UsageSummary:
        """The summary `as_status` wrote (no `byTask`: per-task sums not kept)."""
        if not isinstance(data, Mapping):
            return cls()
        total = SpendTotals.from_status(data)
        by_task = data.get("byTask")
        tasks: dict[str, SpendTotals] | None = None
        if isinstance(by_task, Mapping):
            tasks = {str(task): SpendTotals.from_status(item) for task, item in by_task.items()}
        elif total.empty:
            tasks = {}
        return cls(total=total, by_task=tasks)


def summarize_usage(records: Iterable[Mapping[str, Any]]) -> UsageSummary:
    """The spend of trial records (each attempt once: the caller dedupes, as for tallies)."""
    summary = UsageSummary()
    for record in records:
        spend, resources, problem = record_spend(record)
        summary.add(str(record.get("task_id")), spend, resources, invalid=problem is not None)
    return summary


def usage_of_files(paths: Sequence[str]) -> UsageSummary | None:
    """The spend recorded in passhat trial files (`trials.jsonl`, or a run directory or
    bundle holding one), each attempt once; None when none of them records any (other
    formats, e.g. Inspect logs, say nothing of it here). Lenient: the reader that scores
    the same files reports their errors."""
    records: dict[tuple[Any, Any, Any], Mapping[str, Any]] = {}
    for path in paths:
        if os.path.isdir(path):
            path = os.path.join(path, "trials.jsonl")
        if not path.endswith(".jsonl"):
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(record, dict) and "task_id" in record:
                key = (record.get("task_id"), record.get("trial"), record.get("attempt"))
                records.setdefault(key, record)
    summary = summarize_usage(records.values())
    return None if summary.empty else summary
