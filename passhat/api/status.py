"""The ConsistencyEval `status` as pydantic models: the names users and tools read.

`kubectl get`, `kubectl wait`, Grafana and `passhat report` all read these fields, and
the CRD's status schema is generated from these models (fields not in them are pruned by
the API server). Status stays bounded: per-k numbers, capped task lists with their full
counts, and the per-slot record compressed in `ledger` (see
`passhat.trials.ledger.SlotLedger.pack`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from passhat.stats import KIntervals, KSummary

__all__ = [
    "MAX_RETRY_WAITS",
    "PHASES",
    "PHASE_FAILED",
    "PHASE_PENDING",
    "PHASE_RUNNING",
    "PHASE_SUCCEEDED",
    "Condition",
    "CreateBackoff",
    "Display",
    "EvalStatus",
    "GateResult",
    "GraderCheck",
    "KMetrics",
    "NoisyTranscript",
    "PinnedConfigMap",
    "Progress",
    "RetryWait",
    "SpendSum",
    "Summary",
    "Timing",
    "Usage",
    "build_display",
    "build_summary",
    "percent",
]

# No trial has finished yet (or the eval waits for its tasks).
PHASE_PENDING = "Pending"
# Trials are running.
PHASE_RUNNING = "Running"
# Every slot is final (Complete=True), whatever the gate said: its verdict is the
# GatePassed condition and the Gate column (docs/operator.md#phases-and-conditions).
PHASE_SUCCEEDED = "Succeeded"
# The eval ended before every slot was final: a ConfigError, or its deadline
# (spec.activeDeadlineSeconds), as a Job's Failed condition.
PHASE_FAILED = "Failed"
PHASES = (PHASE_PENDING, PHASE_RUNNING, PHASE_SUCCEEDED, PHASE_FAILED)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel)


class Progress(_Model):
    """Where the trial slots stand."""

    done: int = Field(default=0, ge=0, description="Trial slots that are final.")
    running: int = Field(
        default=0, ge=0, description="Trial attempts running now (admitted, if queued)."
    )
    waiting: int = Field(
        default=0,
        ge=0,
        description="Trial attempts whose pod waits for admission (Kueue's scheduling gate).",
    )
    pending: int = Field(
        default=0,
        ge=0,
        description="Trial slots not final, not running, not waiting (incl. retries).",
    )
    retries: int = Field(default=0, ge=0, description="Infra-error attempts retried so far.")


# One end of an interval: [low, high].
_Bound = Annotated[float, Field(description="The interval's low end, then its high end.")]


class KMetrics(_Model):
    """The numbers at one k, over the tasks with at least k graded trials."""

    k: int = Field(ge=1, description="The k.")
    tasks_scored: int = Field(ge=0, description="Tasks with at least k graded trials.")
    mean_pass_rate: float = Field(description="Mean over scored tasks of c/n.")
    pass_at_k: float = Field(description="Mean unbiased pass@k: 1 - C(n-c,k)/C(n,k).")
    pass_hat_k: float = Field(description="Mean pass^k: C(c,k)/C(n,k).")
    mean_pass_rate_interval: list[_Bound] | None = Field(
        default=None,
        min_length=2,
        max_length=2,
        description="[low, high] bootstrap interval over tasks of meanPassRate "
        "(summary.intervalLevel; the same draw for every k).",
    )
    pass_at_k_interval: list[_Bound] | None = Field(
        default=None, min_length=2, max_length=2, description="[low, high] of passAtK."
    )
    pass_hat_k_interval: list[_Bound] | None = Field(
        default=None, min_length=2, max_length=2, description="[low, high] of passHatK."
    )


class Summary(_Model):
    """The eval's numbers per k, and the headline for `kubectl get`."""

    by_k: list[KMetrics] = Field(
        default_factory=list, description="One entry per k in spec.ks, ascending."
    )
    infra_error_rate: float = Field(
        default=0.0, description="Infra-error attempts / all attempts (as passhat score)."
    )
    infra_errors_by_reason: dict[
        str, Annotated[int, Field(description="Infra-error attempts with this reason.")]
    ] = Field(
        default_factory=dict,
        description=(
            "Infra-error attempts by reason (oom_killed, evicted, preempted, timeout, "
            "node_lost, lost, deleted, image_error, config_error, reported, ...), retried "
            "ones included."
        ),
    )
    k: int | None = Field(
        default=None, description="The headline k: gate.k if there is a gate, else the largest k."
    )
    pass_hat_k: float | None = Field(default=None, description="pass^k at the headline k.")
    interval_level: float | None = Field(
        default=None,
        description="The level of the byK intervals: a percentile bootstrap over tasks, "
        "seeded, 2000 resamples (gate.confidence when a gate, else 0.95).",
    )


class GateResult(_Model):
    """The gate of the spec evaluated on the current numbers."""

    metric: str = Field(description="passHatK, passAtK or meanPassRate.")
    k: int = Field(description="The k the metric is computed at.")
    min: float = Field(description="The minimum the metric must reach.")
    value: float = Field(description="The figure compared with min (the estimate, or the bound).")
    passed: bool = Field(
        description="Whether value >= min (and a task was scored at k; with a stability "
        "check, the grader is stable)."
    )
    statistic: str | None = Field(
        default=None, description="estimate or lowerBound (the spec's gate.statistic)."
    )
    estimate: float | None = Field(default=None, description="The metric's estimate at k.")
    lower_bound: float | None = Field(
        default=None, description="The low end of the metric's interval (lowerBound gates)."
    )
    confidence: float | None = Field(
        default=None, description="The level of that interval (lowerBound gates)."
    )
    grader_stable: bool | None = Field(
        default=None,
        description="With spec.grading.stabilityCheck: whether the grader was stable.",
    )


class NoisyTranscript(_Model):
    """A regraded transcript that got both a pass and a fail."""

    task_id: str = Field(description="The task's id.")
    trial: int = Field(description="The trial (0-based).")
    attempt: int = Field(description="The attempt (0-based).")
    verdicts: dict[str, Annotated[int, Field(description="Regrades that gave this verdict.")]] = (
        Field(description="How many regrades said pass, fail, and gave no verdict (grader_error).")
    )
    original: str = Field(description="The verdict recorded in the run: pass or fail.")


class GraderCheck(_Model):
    """spec.grading.stabilityCheck as the operator runs it: a seeded sample of the graded
    transcripts, each regraded `times` times by grader pods (the numbers of
    `passhat regrade --format json`, in camelCase)."""

    phase: Literal["Running", "Done"] = Field(description="Running, or Done.")
    ledger: str = Field(
        description="The sampled attempts (task index.trial.attempt) and each grading's "
        "mark: p pass, f fail, e grader error, . not yet; x: no transcript, L: too large."
    )
    transcripts: int = Field(description="Sampled transcripts regraded.")
    times: int = Field(description="Gradings of each.")
    gradings: int = Field(description="transcripts x times.")
    done_gradings: int = Field(description="Gradings that ended so far.")
    judged: int = Field(description="Transcripts with at least two verdicts.")
    noise_rate: float = Field(
        description="Judged transcripts with both a pass and a fail / judged."
    )
    noise_rate_interval: list[_Bound] = Field(
        description="[low, high]: the 95 % Wilson interval of noiseRate."
    )
    disagree_with_original: float = Field(
        description="Judged transcripts whose majority regrade is not the recorded verdict "
        "/ judged."
    )
    noisy: list[NoisyTranscript] = Field(
        default_factory=list, description="The noisy transcripts (capped; noisyTotal counts all)."
    )
    noisy_total: int = Field(default=0, description="Noisy transcripts (uncapped).")
    grader_errors: int = Field(
        default=0, description="Gradings that gave no verdict (crash, timeout, exit 75)."
    )
    grader_error_messages: list[Annotated[str, Field(description="A grader error message.")]] = (
        Field(default_factory=list, description="Up to 5 distinct grader error messages.")
    )
    graded_attempts: int = Field(description="Graded attempts of the eval (the population).")
    infra_attempts_skipped: int = Field(description="Infra attempts: never graded, never sampled.")
    missing_transcripts: int = Field(
        default=0, description="Sampled attempts without an archived transcript, or too large."
    )
    max_noise_rate: float = Field(description="spec.grading.stabilityCheck.maxNoiseRate.")
    stable: bool | None = Field(
        default=None,
        description="Once Done: some transcript was judged and noiseRate <= maxNoiseRate.",
    )
    start_time: str | None = Field(
        default=None,
        description="When the check started.",
        json_schema_extra={"format": "date-time"},
    )
    completion_time: str | None = Field(
        default=None, description="When it ended.", json_schema_extra={"format": "date-time"}
    )


class Condition(_Model):
    """A condition in the Kubernetes shape (see passhat.api.conditions)."""

    type: str = Field(
        description=(
            "Complete, GatePassed, ConfigError, InfraErrorsHigh, ArchivePending, Failed, "
            "CreateRefused, Stopped or GraderStable."
        )
    )
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(description="A CamelCase reason.")
    message: str = Field(default="", description="Human-readable detail.")
    last_transition_time: str = Field(
        description="When status last changed.", json_schema_extra={"format": "date-time"}
    )
    observed_generation: int | None = Field(
        default=None, description="The metadata.generation this condition was computed for."
    )


class PinnedConfigMap(_Model):
    """A ConfigMap `spec.tasksFrom` reads, as it was when the eval started."""

    config_map: str = Field(description="The ConfigMap's name (in the eval's namespace).")
    uid: str = Field(description="Its metadata.uid when the tasks were first read.")
    resource_version: str = Field(description="Its metadata.resourceVersion then.")
    sha256: str = Field(
        description="sha256 of the data the tasks were read from (the keys used, as canonical "
        "JSON); a ConfigMap whose data differs later stops the eval (ConfigError TasksChanged)."
    )


# At most this many trial slots' retry waits are kept in status.timing (the longest ones).
MAX_RETRY_WAITS = 256


class RetryWait(_Model):
    """A trial slot whose next attempt waits for its retry backoff."""

    task: int = Field(ge=0, description="The task's index in the spec.")
    trial: int = Field(ge=0, description="The trial's index.")
    not_before: str = Field(
        description="No attempt before this time.", json_schema_extra={"format": "date-time"}
    )


class CreateBackoff(_Model):
    """The eval's pod creates backing off while the API server refuses them (pacing)."""

    reason: str = Field(description="QuotaExceeded, Throttled or Forbidden.")
    message: str = Field(description="The API server's refusal.")
    refusals: int = Field(ge=1, description="Refused passes in a row.")
    not_before: str = Field(
        description="No create before this time (unless a pod of the eval ended, for a quota).",
        json_schema_extra={"format": "date-time"},
    )


class Timing(_Model):
    """Timing state an operator restart or a new leader must not forget, so it does not
    retry everything at once: retry backoffs (the longest ones, capped) and the create
    backoff. Expired entries mean nothing."""

    retries: list[RetryWait] = Field(
        default_factory=list,
        max_length=MAX_RETRY_WAITS,
        description=f"Slots waiting for their retry backoff (at most {MAX_RETRY_WAITS}).",
    )
    create_backoff: CreateBackoff | None = Field(
        default=None, description="While pod creates back off."
    )


class SpendSum(_Model):
    """What attempts spent (as their result JSON reported) and used (as measured)."""

    reported_attempts: int = Field(
        default=0, ge=0, description="Attempts that reported usage, cost_usd or metrics."
    )
    measured_attempts: int = Field(
        default=0, ge=0, description="Attempts whose CPU seconds (and peak memory) were measured."
    )
    input_tokens: int = Field(default=0, ge=0, description="Sum of usage.input_tokens.")
    output_tokens: int = Field(default=0, ge=0, description="Sum of usage.output_tokens.")
    cost_usd: float = Field(
        default=0.0, ge=0, alias="costUSD", description="Sum of cost_usd, US dollars."
    )
    cpu_seconds: float = Field(default=0.0, ge=0, description="Sum of measured CPU seconds.")
    peak_memory_bytes: int = Field(
        default=0, ge=0, description="The largest measured peak memory of one attempt."
    )
    metrics: dict[str, Annotated[float, Field(description="The metric's sum.")]] | None = Field(
        default=None, description="Sums of the free-form metrics the attempts reported."
    )
    invalid_attempts: int | None = Field(
        default=None,
        ge=0,
        description="Attempts whose reported spend was refused (a bad value): not summed.",
    )


class Usage(SpendSum):
    """`status.usage`: the eval's spend, infra-error attempts included, and each task's."""

    by_task: dict[str, SpendSum] | None = Field(
        default=None,
        description="Each task's sums, while the eval has at most 1000 tasks (else absent).",
    )


class Display(_Model):
    """The headline figures as text, for `kubectl get` columns (the numbers are in
    `progress`, `summary` and `gate`); a figure not known yet is empty."""

    done: str = Field(default="", description="Final trial slots of all slots, e.g. `12/16`.")
    mean_pass_rate: str = Field(
        default="", description="The mean pass rate at the smallest k, e.g. `62.5%`."
    )
    pass_hat_k: str = Field(
        default="", description="pass^k at the headline k (summary.k), e.g. `54.2%`."
    )
    infra_error_rate: str = Field(
        default="", description="Infra-error attempts / all attempts, e.g. `6.3%`."
    )
    gate: str = Field(
        default="",
        description="The gate's verdict once every slot is final: Passed or Missed (empty "
        "without a gate, and before then).",
    )


class EvalStatus(_Model):
    """Observed state of a ConsistencyEval, written by the operator."""

    phase: str | None = Field(
        default=None,
        description="Pending, Running, Succeeded (every trial slot final, gate passed or "
        "not: see the GatePassed condition) or Failed (ended before every slot was final: "
        "a ConfigError or the deadline).",
    )
    observed_generation: int | None = Field(
        default=None, description="The metadata.generation this status was computed for."
    )
    start_time: str | None = Field(
        default=None,
        description="When the operator first worked on the eval.",
        json_schema_extra={"format": "date-time"},
    )
    completion_time: str | None = Field(
        default=None,
        description="When every trial slot became final.",
        json_schema_extra={"format": "date-time"},
    )
    message: str | None = Field(default=None, description="Why the eval cannot run, if so.")
    suite: str | None = Field(
        default=None,
        description="The suite this eval is a run of (spec.suite, else the passhat.dev/suite "
        "label), as of the last status write; the metrics' suite label.",
    )
    progress: Progress | None = Field(default=None, description="Where the trial slots stand.")
    summary: Summary | None = Field(default=None, description="pass^k, pass@k, mean per k.")
    flaky: list[Annotated[str, Field(description="A flaky task's id.")]] = Field(
        default_factory=list,
        description="Flaky task ids (0 < c < n), most inconsistent first; capped.",
    )
    flaky_count: int = Field(default=0, ge=0, description="Number of flaky tasks (uncapped).")
    need_more_trials: list[
        Annotated[str, Field(description="The id of a task with too few graded trials.")]
    ] = Field(
        default_factory=list,
        description="Task ids with fewer graded trials than the largest k; capped.",
    )
    need_more_trials_count: int = Field(
        default=0, ge=0, description="Number of tasks needing more trials (uncapped)."
    )
    gate: GateResult | None = Field(default=None, description="The gate's result.")
    conditions: list[Condition] = Field(
        default_factory=list,
        description=(
            "Complete, GatePassed, ConfigError, InfraErrorsHigh, ArchivePending, Failed, "
            "CreateRefused, Stopped, GraderStable."
        ),
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
    )
    ledger: str | None = Field(
        default=None,
        description="Every trial slot's attempts and outcome, packed (zlib + base64).",
    )
    display: Display | None = Field(
        default=None, description="The headline figures as text, for kubectl get columns."
    )
    grader_check: GraderCheck | None = Field(
        default=None,
        description="The grader stability check (spec.grading.stabilityCheck), once started.",
    )
    task_sources: list[PinnedConfigMap] | None = Field(
        default=None,
        description="The tasksFrom ConfigMaps as read when the eval started (pinned).",
    )
    timing: Timing | None = Field(
        default=None,
        description="Retry and create backoffs, kept across operator restarts and failovers.",
    )
    usage: Usage | None = Field(
        default=None,
        description="What the recorded attempts reported spending (tokens, US dollars, "
        "metrics) and used (CPU seconds, peak memory), once one did.",
    )


def percent(value: float) -> str:
    """A rate as `kubectl get` shows it: `54.2%` (one decimal, as the reports)."""
    return f"{100.0 * value:.1f}%"


def build_display(
    *,
    done: int,
    slots: int,
    summary: Mapping[str, Any],
    gate_passed: bool | None,
) -> dict[str, Any]:
    """`status.display` (camelCase JSON): `summary` as build_summary wrote it; `gate_passed`
    None while there is no verdict."""
    by_k = [row for row in summary.get("byK") or [] if isinstance(row, Mapping)]
    first = by_k[0] if by_k else {}
    # NB: a k no task has enough graded trials for yet shows nothing, not 0.0%
    head = next((row for row in by_k if row.get("k") == summary.get("k")), {})
    display = Display(
        done=f"{done}/{slots}",
        mean_pass_rate=percent(first["meanPassRate"]) if first.get("tasksScored") else "",
        pass_hat_k=percent(head["passHatK"]) if head.get("tasksScored") else "",
        infra_error_rate=percent(summary.get("infraErrorRate") or 0.0),
        gate="" if gate_passed is None else ("Passed" if gate_passed else "Missed"),
    )
    return display.model_dump(mode="json", by_alias=True)


def build_summary(
    by_k: Sequence[KSummary],
    *,
    headline_k: int | None,
    infra_error_rate: float,
    infra_errors_by_reason: Mapping[str, int] | None = None,
    intervals: Sequence[KIntervals] | None = None,
) -> dict[str, Any]:
    """`status.summary` (camelCase JSON) from the per-k summaries of `passhat.stats`.

    `headline_k` picks the k shown in `kubectl get` (gate.k, else the largest k); when it
    is not among `by_k` (a gate.k outside spec.ks) the largest k is the headline.
    `intervals` (one per k, from `passhat.stats.bootstrap`) add each row's intervals.
    """
    ordered = sorted(by_k, key=lambda s: s.k)
    at_k = {i.k: i for i in intervals or ()}
    headline = next((s for s in ordered if s.k == headline_k), ordered[-1] if ordered else None)
    summary = Summary(
        by_k=[
            KMetrics(
                k=s.k,
                tasks_scored=s.tasks_scored,
                mean_pass_rate=s.mean_pass_rate,
                pass_at_k=s.pass_at_k,
                pass_hat_k=s.pass_hat_k,
                **_interval_fields(at_k.get(s.k)),
            )
            for s in ordered
        ],
        infra_error_rate=infra_error_rate,
        infra_errors_by_reason=dict(infra_errors_by_reason or {}),
        k=headline.k if headline is not None else None,
        pass_hat_k=headline.pass_hat_k if headline is not None else None,
        interval_level=next(iter(at_k.values())).level if at_k else None,
    )
    return summary.model_dump(mode="json", by_alias=True, exclude_none=True)


def _interval_fields(intervals: KIntervals | None) -> dict[str, Any]:
    if intervals is None:
        return {}
    return {
        "mean_pass_rate_interval": intervals.mean_pass_rate.as_json(),
        "pass_at_k_interval": intervals.pass_at_k.as_json(),
        "pass_hat_k_interval": intervals.pass_hat_k.as_json(),
    }
