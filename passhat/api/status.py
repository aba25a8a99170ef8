"""The ConsistencyEval `status` as pydantic models: the names users and tools read.

`kubectl get`, `kubectl wait`, Grafana and `passhat report` all read these fields, and
the CRD's status schema is generated from these models (fields not in them are pruned by
the API server). Status stays bounded: per-k numbers, capped task lists with their full
counts, and the per-slot record compressed in `ledger` (see
`passhat.trials.ledger.SlotLedger.pack`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from passhat.stats import KSummary

__all__ = [
    "PHASES",
    "PHASE_FAILED",
    "PHASE_PENDING",
    "PHASE_RUNNING",
    "PHASE_SUCCEEDED",
    "Condition",
    "EvalStatus",
    "GateResult",
    "KMetrics",
    "PinnedConfigMap",
    "Progress",
    "Summary",
    "build_summary",
]

# No trial has finished yet (or the eval waits for its tasks).
PHASE_PENDING = "Pending"
# Trials are running.
PHASE_RUNNING = "Running"
# Every slot is final and the gate (if any) passed.
PHASE_SUCCEEDED = "Succeeded"
# Every slot is final and the gate failed, or the eval stopped on a ConfigError or its
# deadline (spec.activeDeadlineSeconds).
PHASE_FAILED = "Failed"
PHASES = (PHASE_PENDING, PHASE_RUNNING, PHASE_SUCCEEDED, PHASE_FAILED)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel)


class Progress(_Model):
    """Where the trial slots stand."""

    done: int = Field(default=0, ge=0, description="Trial slots that are final.")
    running: int = Field(default=0, ge=0, description="Trial attempts running now.")
    pending: int = Field(
        default=0, ge=0, description="Trial slots not final and not running (incl. retries)."
    )
    retries: int = Field(default=0, ge=0, description="Infra-error attempts retried so far.")


class KMetrics(_Model):
    """The numbers at one k, over the tasks with at least k graded trials."""

    k: int = Field(ge=1, description="The k.")
    tasks_scored: int = Field(ge=0, description="Tasks with at least k graded trials.")
    mean_pass_rate: float = Field(description="Mean over scored tasks of c/n.")
    pass_at_k: float = Field(description="Mean unbiased pass@k: 1 - C(n-c,k)/C(n,k).")
    pass_hat_k: float = Field(description="Mean pass^k: C(c,k)/C(n,k).")


class Summary(_Model):
    """The eval's numbers per k, and the headline for `kubectl get`."""

    by_k: list[KMetrics] = Field(
        default_factory=list, description="One entry per k in spec.ks, ascending."
    )
    infra_error_rate: float = Field(
        default=0.0, description="Infra-error attempts / all attempts (as passhat score)."
    )
    infra_errors_by_reason: dict[str, int] = Field(
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


class GateResult(_Model):
    """The gate of the spec evaluated on the current numbers."""

    metric: str = Field(description="passHatK, passAtK or meanPassRate.")
    k: int = Field(description="The k the metric is computed at.")
    min: float = Field(description="The minimum the metric must reach.")
    value: float = Field(description="The metric's value.")
    passed: bool = Field(description="Whether value >= min.")


class Condition(_Model):
    """A condition in the Kubernetes shape (see passhat.api.conditions)."""

    type: str = Field(
        description=(
            "Complete, GatePassed, ConfigError, InfraErrorsHigh, ArchivePending, Failed or "
            "CreateRefused."
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


class EvalStatus(_Model):
    """Observed state of a ConsistencyEval, written by the operator."""

    phase: str | None = Field(default=None, description="Pending, Running, Succeeded or Failed.")
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
    progress: Progress | None = Field(default=None, description="Where the trial slots stand.")
    summary: Summary | None = Field(default=None, description="pass^k, pass@k, mean per k.")
    flaky: list[str] = Field(
        default_factory=list,
        description="Flaky task ids (0 < c < n), most inconsistent first; capped.",
    )
    flaky_count: int = Field(default=0, ge=0, description="Number of flaky tasks (uncapped).")
    need_more_trials: list[str] = Field(
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
            "CreateRefused."
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
    task_sources: list[PinnedConfigMap] | None = Field(
        default=None,
        description="The tasksFrom ConfigMaps as read when the eval started (pinned).",
    )


def build_summary(
    by_k: Sequence[KSummary],
    *,
    headline_k: int | None,
    infra_error_rate: float,
    infra_errors_by_reason: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """`status.summary` (camelCase JSON) from the per-k summaries of `passhat.stats`.

    `headline_k` picks the k shown in `kubectl get` (gate.k, else the largest k); when it
    is not among `by_k` (a gate.k outside spec.ks) the largest k is the headline.
    """
    ordered = sorted(by_k, key=lambda s: s.k)
    headline = next((s for s in ordered if s.k == headline_k), ordered[-1] if ordered else None)
    summary = Summary(
        by_k=[
            KMetrics(
                k=s.k,
                tasks_scored=s.tasks_scored,
                mean_pass_rate=s.mean_pass_rate,
                pass_at_k=s.pass_at_k,
                pass_hat_k=s.pass_hat_k,
            )
            for s in ordered
        ],
        infra_error_rate=infra_error_rate,
        infra_errors_by_reason=dict(infra_errors_by_reason or {}),
        k=headline.k if headline is not None else None,
        pass_hat_k=headline.pass_hat_k if headline is not None else None,
    )
    return summary.model_dump(mode="json", by_alias=True, exclude_none=True)
