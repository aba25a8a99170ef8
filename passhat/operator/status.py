"""The eval's `status`, computed from the ledger alone, so every pass writes it whole.

Status is a pure function of (spec, tasks, ledger, live pods, previous conditions): the
loop never patches a counter in place, it recomputes the summary from the ledger's
per-task tallies with the same `passhat.stats.summarize_many` that `passhat score` uses.
So a status written after an operator restart equals the one an uninterrupted run would
have written. Lists are capped (`flaky`, `needMoreTrials`); the packed ledger keeps the
full per-slot record, which `passhat report` expands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from passhat.api import conditions as cond
from passhat.api.gate import GATE_SEED, evaluate_gate
from passhat.api.spec import EvalSpec
from passhat.api.status import (
    PHASE_FAILED,
    PHASE_PENDING,
    PHASE_RUNNING,
    PHASE_SUCCEEDED,
    build_display,
    build_summary,
)
from passhat.stats import bootstrap, summarize_many
from passhat.trials.ledger import SlotLedger

__all__ = [
    "StatusInputs",
    "build_status",
    "condition_status",
    "config_error_status",
    "infra_errors_by_reason",
    "is_terminal",
]


def condition_status(status: Mapping[str, Any], kind: str) -> str | None:
    """The `status` ("True"/"False"/"Unknown") of condition `kind`, None when absent."""
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            value = condition.get("status")
            return str(value) if value is not None else None
    return None


def is_terminal(status: Mapping[str, Any]) -> bool:
    """Whether the eval is finished for good: complete, failed (its deadline passed),
    stopped by a drain or its budget, or stopped by a ConfigError."""
    if condition_status(status, cond.COMPLETE) == "True":
        return True
    if condition_status(status, cond.BUDGET_EXHAUSTED) == "True":
        return True
    if condition_status(status, cond.FAILED) == "True":
        return True
    if condition_status(status, cond.STOPPED) == "True":
        return True
    return status.get("phase") == PHASE_FAILED and (
        condition_status(status, cond.CONFIG_ERROR) == "True"
    )


@dataclass(frozen=True)
class StatusInputs:
    """What one pass knows when it writes status."""

    spec: EvalSpec
    task_ids: Sequence[str]
    ledger: SlotLedger
    running: int
    generation: int
    previous: Mapping[str, Any]
    now: float
    infra_error_threshold: float = 0.2
    max_listed: int = 50
    # Infra-error attempts by reason, this pass's included (previous counts + new ones).
    infra_errors_by_reason: Mapping[str, int] = field(default_factory=dict)
    # Recorded attempts not yet in the record store (0 when no store is configured).
    archive_waiting: int = 0
    # The eval's pods still to be kept or released: after this pass's write, or in
    # flight. As a Job is `Complete` only once it removed every pod's tracking
    # finalizer, the eval is not `Complete` while any is left.
    letting_go: int = 0
    # The record store's last error while archiving this eval's attempts, if it failed.
    archive_error: str | None = None
    # status.taskSources: the tasksFrom ConfigMaps as pinned at the start (taskpin.py).
    task_sources: Sequence[Mapping[str, Any]] = ()
    # Live attempts whose pod waits for admission (Kueue's scheduling gate, queueing.py).
    waiting: int = 0
    # status.graderCheck (gradercheck.py), once the stability check started, and its
    # GraderStable condition as (status, reason, message).
    grader_check: Mapping[str, Any] | None = None
    grader_condition: tuple[str, str, str] | None = None
    # The suite the eval is a run of (passhat.api.suite.suite_of), None when none.
    suite: str | None = None


def _conditions(previous: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(c) for c in previous.get("conditions") or [] if isinstance(c, Mapping)]


def _set(
    conditions: list[dict[str, Any]],
    kind: str,
    value: bool,
    reason: str,
    message: str,
    *,
    generation: int,
    now: float,
) -> list[dict[str, Any]]:
    return cond.set_condition(
        conditions,
        kind,
        "True" if value else "False",
        reason,
        message,
        generation=generation,
        now=cond.timestamp(now),
    )


def build_status(inputs: StatusInputs) -> dict[str, Any]:
    """The whole `status` of an eval after a pass (camelCase, as written)."""
    spec, ledger, previous, now = inputs.spec, inputs.ledger, inputs.previous, inputs.now
    tallies = ledger.tallies(list(inputs.task_ids))
    ks = spec.report_ks
    by_k = summarize_many(tallies, ks)
    first, last = min(by_k, key=lambda s: s.k), max(by_k, key=lambda s: s.k)
    attempts = sum(t.attempts for t in tallies)
    infra_rate = first.infra_error_rate
    # NB: one seeded draw at the gate's confidence: the status, the metrics and a
    # lowerBound gate show the same bounds, and a rewrite from the same ledger is equal
    level = spec.gate.confidence if spec.gate is not None else 0.95
    interval_ks = sorted({*ks, *([spec.gate.k] if spec.gate is not None else [])})
    intervals = bootstrap(tallies, interval_ks, seed=GATE_SEED, level=level)
    verdict = evaluate_gate(spec.gate, tallies, intervals=intervals) if spec.gate else None
    gate = verdict.as_status() if verdict is not None else None
    # NB: with a stability check, an eval is complete only once the check ended, and its
    # gate passes only on a stable grader (a gate passed on grader noise means nothing)
    checking = spec.grading.stability_check is not None
    check = inputs.grader_check
    check_done = check is not None and check.get("phase") == "Done"
    stable = bool(check.get("stable")) if check is not None and check_done else None
    metric_met = bool(gate["passed"]) if gate is not None else False
    if gate is not None and checking:
        gate["passed"] = metric_met and stable is True
        if stable is not None:
            gate["graderStable"] = stable
    # NB: with a record store, an eval is complete only once every record is in it.
    complete = (
        ledger.complete
        and inputs.archive_waiting == 0
        and inputs.letting_go == 0
        and (not checking or check_done)
    )
    running = min(inputs.running, ledger.pending)
    waiting = min(inputs.waiting, ledger.pending - running)
    generation = inputs.generation

    conditions = _conditions(previous)
    final_message = f"{ledger.done}/{ledger.slots} trial slots final"
    reason = cond.REASON_ALL_FINAL if complete else cond.REASON_RUNNING
    if ledger.complete and inputs.archive_waiting:
        final_message += f"; {inputs.archive_waiting} attempts wait to be archived"
    elif ledger.complete and checking and not check_done:
        reason = cond.REASON_CHECKING_GRADER
        final_message += "; the grader stability check runs"
        if check is not None:
            final_message += f" ({check.get('doneGradings')}/{check.get('gradings')} gradings)"
    elif ledger.complete and inputs.letting_go:
        final_message += f"; {inputs.letting_go} pods wait to be kept or released"
    conditions = _set(
        conditions,
        cond.COMPLETE,
        complete,
        reason,
        final_message,
        generation=generation,
        now=now,
    )
    if inputs.grader_condition is not None:
        value, why, text = inputs.grader_condition
        conditions = cond.set_condition(
            conditions,
            cond.GRADER_STABLE,
            value,
            why,
            text,
            generation=generation,
            now=cond.timestamp(now),
        )
    conditions = _archive_condition(conditions, inputs, previous)
    if attempts:
        high = infra_rate > inputs.infra_error_threshold
        conditions = _set(
            conditions,
            cond.INFRA_ERRORS_HIGH,
            high,
            cond.REASON_ABOVE_THRESHOLD if high else cond.REASON_BELOW_THRESHOLD,
            f"infra-error rate {infra_rate:.3f} (threshold {inputs.infra_error_threshold:g})",
            generation=generation,
            now=now,
        )
    if gate is not None and complete:
        gate_reason = cond.REASON_GATE_MET if gate["passed"] else cond.REASON_GATE_MISSED
        gate_message = verdict.describe() if verdict is not None else ""
        if metric_met and not gate["passed"]:
            gate_reason = cond.REASON_GRADER_UNSTABLE
            gate_message += "; but the grader is not stable (condition GraderStable)"
        conditions = _set(
            conditions,
            cond.GATE_PASSED,
            bool(gate["passed"]),
            gate_reason,
            gate_message,
            generation=generation,
            now=now,
        )
    if condition_status(previous, cond.CONFIG_ERROR) == "True":
        conditions = _set(
            conditions,
            cond.CONFIG_ERROR,
            False,
            cond.REASON_RESOLVED,
            "the eval's tasks resolve",
            generation=generation,
            now=now,
        )

    if complete:
        # NB: a missed gate is a verdict, not a failed run: GatePassed=False says it
        # (a Job's Failed means it could not finish; docs/operator.md#phases-and-conditions)
        phase = PHASE_SUCCEEDED
    elif ledger.done or ledger.retries or running or ledger.complete:
        phase = PHASE_RUNNING
    else:
        phase = PHASE_PENDING

    summary = build_summary(
        by_k,
        headline_k=spec.gate.k if spec.gate is not None else last.k,
        infra_error_rate=infra_rate,
        infra_errors_by_reason=inputs.infra_errors_by_reason,
        intervals=[i for i in intervals if i.k in ks],
    )
    status: dict[str, Any] = {
        "phase": phase,
        "observedGeneration": generation,
        "startTime": previous.get("startTime") or cond.timestamp(now),
        "progress": {
            "done": ledger.done,
            "running": running,
            "waiting": waiting,
            "pending": ledger.pending - running - waiting,
            "retries": ledger.retries,
        },
        "summary": summary,
        "flaky": first.flaky[: inputs.max_listed],
        "flakyCount": len(first.flaky),
        "needMoreTrials": last.need_more_trials[: inputs.max_listed],
        "needMoreTrialsCount": len(last.need_more_trials),
        "conditions": conditions,
        "ledger": ledger.pack(),
        "display": build_display(
            done=ledger.done,
            slots=ledger.slots,
            summary=summary,
            gate_passed=bool(gate["passed"]) if gate is not None and complete else None,
        ),
    }
    if gate is not None:
        status["gate"] = gate
    if check is not None:
        status["graderCheck"] = dict(check)
    if inputs.task_sources:
        status["taskSources"] = [dict(pin) for pin in inputs.task_sources]
    if inputs.suite is not None:
        status["suite"] = inputs.suite
    if complete:
        status["completionTime"] = previous.get("completionTime") or cond.timestamp(now)
    return status


def _archive_condition(
    conditions: list[dict[str, Any]], inputs: StatusInputs, previous: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """ArchivePending: True while the record store fails; False once it works again
    (absent while it never failed, so a healthy eval's conditions do not churn)."""
    if inputs.archive_error is not None and inputs.archive_waiting:
        return _set(
            conditions,
            cond.ARCHIVE_PENDING,
            True,
            cond.REASON_STORE_FAILING,
            f"{inputs.archive_waiting} recorded attempts wait for the record store "
            f"(their pods are held): {inputs.archive_error}",
            generation=inputs.generation,
            now=inputs.now,
        )
    if condition_status(previous, cond.ARCHIVE_PENDING) == "True" and not inputs.archive_waiting:
        return _set(
            conditions,
            cond.ARCHIVE_PENDING,
            False,
            cond.REASON_ARCHIVED,
            "every recorded attempt is in the record store",
            generation=inputs.generation,
            now=inputs.now,
        )
    return conditions


def infra_errors_by_reason(
    previous: Mapping[str, Any], verdicts: Sequence[tuple[str, bool]]
) -> dict[str, int]:
    """`summary.infraErrorsByReason` after a pass: the previous status's counts plus this
    pass's infra-error attempts (`verdicts`: (reason, is infra error) per recorded attempt).

    Exact for the same reason as the ledger: both are in one status write that carries
    the resourceVersion its counts were read at, so an attempt is added once.
    """
    summary = previous.get("summary")
    counts: dict[str, int] = {}
    if isinstance(summary, Mapping) and isinstance(summary.get("infraErrorsByReason"), Mapping):
        for reason, count in summary["infraErrorsByReason"].items():
            if isinstance(count, int) and count > 0:
                counts[str(reason)] = count
    for reason, infra in verdicts:
        if infra:
            counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def config_error_status(
    *,
    previous: Mapping[str, Any],
    message: str,
    reason: str,
    terminal: bool,
    generation: int,
    now: float,
) -> dict[str, Any]:
    """Status of an eval that cannot run as written: ConfigError=True naming the field.

    `terminal` (the spec itself is wrong, or every first attempt hit an image/config
    error) sets phase Failed for good; otherwise (tasks' ConfigMap missing before any
    trial ran) the phase stays Pending and the loop keeps checking.
    """
    status = {key: value for key, value in previous.items() if key != "conditions"}
    status["phase"] = PHASE_FAILED if terminal else PHASE_PENDING
    progress = previous.get("progress")
    if terminal and isinstance(progress, Mapping):
        # NB: a stopped eval's pods are all let go (live ones deleted): none runs any more
        status["progress"] = {**progress, "running": 0}
        if "waiting" in progress:
            status["progress"]["waiting"] = 0
    status["observedGeneration"] = generation
    status["message"] = message
    status["conditions"] = _set(
        _conditions(previous),
        cond.CONFIG_ERROR,
        True,
        reason,
        message,
        generation=generation,
        now=now,
    )
    return status
