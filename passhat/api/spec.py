"""The ConsistencyEval resource as pydantic models: one spec for both executors.

`passhat run eval.yaml` and `kubectl apply -f eval.yaml` read the same file, so the spec
lives here once: field names (camelCase on the wire, snake_case in Python), defaults and
every validation rule that does not need a cluster. The CRD in `crds/` is generated from
these models (`python -m passhat.api.crd`). The pod template is kept as a free dict (it is
a Kubernetes PodTemplateSpec) and checked by hand for what passhat relies on; its safety
on a shared cluster is a separate question (`passhat.api.podsecurity`) that only the
operator enforces.

Semantic errors are raised as `PydanticCustomError("passhat_spec", ...)` whose context
carries the path of the offending field relative to the model; `spec_problems()` turns any
ValidationError into `(field.path, reason)` pairs such as `("spec.ks[1]", "k=9 is larger
than trials=8")`.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from passhat.api.quantity import parse_quantity
from passhat.api.suite import SUITE_PATTERN
from passhat.stats import default_ks

__all__ = [
    "API_VERSION",
    "GROUP",
    "KIND",
    "MAX_ACTIVE_DEADLINE_SECONDS",
    "MAX_CHECK_SAMPLE",
    "MAX_CHECK_TIMES",
    "MAX_GRADER_TIMEOUT_SECONDS",
    "MAX_INLINE_TASKS",
    "MAX_PARALLELISM",
    "MAX_PARAMS_BYTES",
    "MAX_TASKS_BYTES",
    "MAX_TRIALS",
    "RESERVED_LABEL_PREFIX",
    "SUITE_PATTERN",
    "VERSION",
    "Budget",
    "ConsistencyEval",
    "EvalSpec",
    "ExitCodes",
    "Gate",
    "GraderSpec",
    "Grading",
    "Metadata",
    "RetryPolicy",
    "StabilityCheck",
    "Task",
    "TaskSource",
    "TrialSpec",
    "format_path",
    "params_json_bytes",
    "spec_problems",
    "template_problems",
]

GROUP = "passhat.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "ConsistencyEval"

# Bounds that keep one resource (and its status) well under the API server's object limit.
MAX_TRIALS = 1000
MAX_INLINE_TASKS = 10_000
MAX_KS = 32
# About 68 years: fits activeDeadlineSeconds (int64) and any local deadline arithmetic.
MAX_TIMEOUT_SECONDS = 2**31 - 1
MAX_ACTIVE_DEADLINE_SECONDS = MAX_TIMEOUT_SECONDS
# Bounds that keep one eval from taking the operator from the others (docs/security.md):
# a task's params as PASSHAT_TASK carries them (a pod copies them into every container's
# env; exec refuses one string over 128 KiB anyway) ...
MAX_PARAMS_BYTES = 64 * 1024
# ... all tasks together, inline or read from the tasksFrom ConfigMaps (the operator keeps
# every running eval's tasks in memory, about 4 times their text) ...
MAX_TASKS_BYTES = 4 * 1024 * 1024
# ... and attempts in flight (the largest the operator was measured at: 10,000 live pods
# of one eval, docs/benchmarks.md "Scale").
MAX_PARALLELISM = 10_000

SPEC_ERROR = "passhat_spec"
ExitCode = Annotated[int, Field(ge=0, le=255, description="A container exit code, 0-255.")]
K = Annotated[int, Field(ge=1, description="A k: how many trials pass^k and pass@k look at.")]
Path = tuple[str | int, ...]


def _problem(path: Path, reason: str) -> PydanticCustomError:
    """A validation error for the field at `path` (relative to the model raising it)."""
    return PydanticCustomError(SPEC_ERROR, "{reason}", {"reason": reason, "path": path})


class _Model(BaseModel):
    # NB: strict, as the CRD's schema: `trials: true` or `trials: "3"` is refused by
    # `kubectl apply`, so it must be refused locally too (an int still fills a float field)
    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        populate_by_name=True,
        alias_generator=to_camel,
        validate_default=False,
    )


class Metadata(BaseModel):
    """Kubernetes object metadata; passhat reads `name` (and `namespace` on a cluster)."""

    # NB: objects read from the API server carry uid, resourceVersion, managedFields, ...
    model_config = ConfigDict(extra="allow", populate_by_name=True, alias_generator=to_camel)

    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="Name of the eval (a DNS subdomain: lowercase letters, digits, '-', '.').",
    )
    namespace: str | None = Field(default=None, description="Namespace on a cluster.")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Annotations.")


class Task(_Model):
    """One task of the eval: an id and the parameters its trials see."""

    id: str = Field(
        min_length=1,
        max_length=253,
        description="Unique task id; exposed to every trial as PASSHAT_TASK_ID.",
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Free-form task parameters; exposed to every trial as PASSHAT_TASK (JSON, "
        f"at most {MAX_PARAMS_BYTES // 1024} KiB).",
    )
    _json_bytes: int = PrivateAttr(default=0)

    @model_validator(mode="after")
    def _bounded_params(self) -> Task:
        try:
            size = params_json_bytes(self.params)
        except RecursionError:
            raise _problem(("params",), "nested too deeply to pass as JSON") from None
        if size > MAX_PARAMS_BYTES:
            raise _problem(
                ("params",),
                f"{size} bytes as JSON (PASSHAT_TASK) is more than {MAX_PARAMS_BYTES // 1024} "
                "KiB per task; pass large inputs by reference (a volume, a URL)",
            )
        self._json_bytes = size + len(self.id.encode())
        return self

    @property
    def json_bytes(self) -> int:
        """The task's size as counted against MAX_TASKS_BYTES: its id and its params' JSON."""
        return self._json_bytes

    @field_validator("id")
    @classmethod
    def _printable_id(cls, value: str) -> str:
        if any(not ch.isprintable() for ch in value):
            raise ValueError("task id must be printable (no control characters)")
        if value != value.strip():
            raise ValueError("task id must not start or end with whitespace")
        return value


class TaskSource(_Model):
    """Tasks kept in a ConfigMap (large suites): each key holds a YAML or JSON list of tasks."""

    config_map: str = Field(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="Name of a ConfigMap in the eval's namespace (locally: a directory "
        "or a YAML file of that name next to the eval file).",
    )
    key: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description="Key holding a YAML/JSON list of tasks; all keys in sorted order if unset.",
    )


# The prefix of the labels passhat puts on trial pods; a template may not set them.
RESERVED_LABEL_PREFIX = "passhat.dev/"

# What admission checks of the pod template (the rest is Kubernetes' to validate when the
# operator creates the pod). NB: `image` is required on a cluster only; locally it is ignored.
_POD_SPEC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The pod spec: at least one container, each with a name and an image.",
    "x-kubernetes-preserve-unknown-fields": True,
    "required": ["containers"],
    "properties": {
        "containers": {
            "type": "array",
            "minItems": 1,
            "description": "The containers; the first one is the trial.",
            "items": {
                "type": "object",
                "description": "A container (Kubernetes Container).",
                "x-kubernetes-preserve-unknown-fields": True,
                "required": ["name", "image"],
                "properties": {
                    "name": {"type": "string", "minLength": 1, "description": "Container name."},
                    "image": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Container image (ignored by local runs).",
                    },
                },
            },
        }
    },
}


_TEMPLATE_METADATA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Labels and annotations of every trial pod.",
    "x-kubernetes-preserve-unknown-fields": True,
    "properties": {
        "labels": {
            "type": "object",
            "description": f"Pod labels (not under {RESERVED_LABEL_PREFIX}: passhat's own).",
            "additionalProperties": {"type": "string", "description": "A label's value."},
            "x-kubernetes-validations": [
                {
                    "rule": f"self.all(k, !k.startsWith('{RESERVED_LABEL_PREFIX}'))",
                    "message": f"labels under {RESERVED_LABEL_PREFIX} are passhat's own",
                }
            ],
        }
    },
}


class TrialSpec(_Model):
    """How one trial attempt runs: its pod template and its wall-clock limit."""

    timeout_seconds: int = Field(
        default=3600,
        ge=1,
        le=MAX_TIMEOUT_SECONDS,
        description="Hard wall-clock limit of one attempt (the pod's activeDeadlineSeconds).",
    )
    timeout_is: Literal["infra_error", "fail"] = Field(
        default="infra_error",
        description="How a timed-out attempt counts: infra_error (retried, not scored) or fail.",
    )
    template: dict[str, Any] = Field(
        description="A pod template (PodTemplateSpec). On a cluster every attempt is a pod "
        "built from it; locally the first container's command + args run with its env.",
        json_schema_extra={
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {"metadata": _TEMPLATE_METADATA_SCHEMA, "spec": _POD_SPEC_SCHEMA},
            "required": ["spec"],
        },
    )

    @model_validator(mode="after")
    def _check_template(self) -> TrialSpec:
        for path, reason in template_problems(self.template):
            raise _problem(("template", *path), reason)
        return self


class ExitCodes(_Model):
    """Which exit codes mean pass, fail and infra error (any other non-zero exit is a fail)."""

    pass_: list[ExitCode] = Field(
        default_factory=lambda: [0],
        alias="pass",
        description="Exit codes that mean the trial passed.",
    )
    fail: list[ExitCode] = Field(
        default_factory=lambda: [1], description="Exit codes that mean the trial failed."
    )
    infra_error: list[ExitCode] = Field(
        default_factory=lambda: [75],
        description="Exit codes that mean an infrastructure error (retried, never scored).",
    )

    @model_validator(mode="after")
    def _check_codes(self) -> ExitCodes:
        seen: dict[int, str] = {}
        lists = (("pass", self.pass_), ("fail", self.fail), ("infraError", self.infra_error))
        for name, codes in lists:
            for index, code in enumerate(codes):
                if code in seen:
                    where = "twice" if seen[code] == name else f"in both {seen[code]} and {name}"
                    raise _problem((name, index), f"exit code {code} is listed {where}")
                seen[code] = name
        return self


# What a grader pod may be given from its namespace: Secret and ConfigMap keys, as a pod's
# env and envFrom (the author may create pods there, so may read them in a pod anyway).
MAX_GRADER_ENV = 64
_OBJECT_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
# NB: Kubernetes' own rule for env names (any printable but '='); PASSHAT_ is passhat's
_ENV_NAME = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"


class KeyRef(_Model):
    """One key of a Secret or ConfigMap in the eval's namespace."""

    name: str = Field(
        min_length=1, max_length=253, pattern=_OBJECT_NAME, description="The object's name."
    )
    key: str = Field(min_length=1, max_length=253, description="The key in its data.")
    optional: bool | None = Field(
        default=None, description="Start the grader even when the key is missing."
    )


class ObjectRef(_Model):
    """A whole Secret or ConfigMap in the eval's namespace."""

    name: str = Field(
        min_length=1, max_length=253, pattern=_OBJECT_NAME, description="The object's name."
    )
    optional: bool | None = Field(
        default=None, description="Start the grader even when the object is missing."
    )


class EnvSource(_Model):
    """Where an env variable's value comes from: exactly one of the two."""

    secret_key_ref: KeyRef | None = Field(default=None, description="A Secret's key.")
    config_map_key_ref: KeyRef | None = Field(default=None, description="A ConfigMap's key.")

    @model_validator(mode="after")
    def _check_one(self) -> EnvSource:
        if (self.secret_key_ref is None) == (self.config_map_key_ref is None):
            raise ValueError("give exactly one of secretKeyRef and configMapKeyRef")
        return self


class EnvVar(_Model):
    """An env variable of the grader pod: a literal value or a Secret/ConfigMap key."""

    name: str = Field(
        min_length=1, max_length=256, pattern=_ENV_NAME, description="The variable's name."
    )
    value: str | None = Field(default=None, max_length=32768, description="A literal value.")
    value_from: EnvSource | None = Field(
        default=None, description="The value from a Secret or ConfigMap key."
    )

    @model_validator(mode="after")
    def _check_value(self) -> EnvVar:
        if self.name.startswith("PASSHAT_"):
            raise _problem(("name",), f"{self.name}: PASSHAT_ variables are passhat's own")
        if self.value is not None and self.value_from is not None:
            raise _problem(("valueFrom",), f"{self.name}: give value or valueFrom, not both")
        return self


class EnvFrom(_Model):
    """Every key of a Secret or ConfigMap as env variables (exactly one of the two)."""

    prefix: str | None = Field(
        default=None, max_length=256, pattern=_ENV_NAME, description="Put before each key."
    )
    secret_ref: ObjectRef | None = Field(default=None, description="A Secret.")
    config_map_ref: ObjectRef | None = Field(default=None, description="A ConfigMap.")

    @model_validator(mode="after")
    def _check_one(self) -> EnvFrom:
        if (self.secret_ref is None) == (self.config_map_ref is None):
            raise ValueError("give exactly one of secretRef and configMapRef")
        if (self.prefix or "").startswith("PASSHAT_"):
            raise _problem(("prefix",), "PASSHAT_ variables are passhat's own")
        return self


class GraderSpec(_Model):
    """The eval's grader, for regrading stored transcripts (`passhat regrade`).

    The contract of `passhat trial --grader`: the transcript on stdin and at
    `$PASSHAT_TRANSCRIPT`, a result JSON as the last output line or exit 0 pass / 1 fail /
    75 infra error. Locally `command` runs as a shell command (its items shell-quoted); on
    a cluster the operator's stability check runs it in a pod of `image`, as argv under
    `/bin/sh` (which feeds it the transcript on stdin).
    """

    image: str | None = Field(
        default=None,
        min_length=1,
        max_length=512,
        description="Container image the operator's stability check runs the grader in "
        "(it needs /bin/sh); required for stabilityCheck on a cluster, unused locally.",
    )
    command: list[
        Annotated[str, Field(min_length=1, max_length=4096, description="One argument.")]
    ] = Field(
        min_length=1,
        max_length=64,
        description="The grader's command (argv), run with its items shell-quoted by "
        "passhat regrade.",
    )
    env: list[EnvVar] = Field(
        default_factory=list,
        max_length=MAX_GRADER_ENV,
        description="Env variables of the grader pods (an LLM judge's API key from a Secret); "
        "on a cluster only: locally the grader runs in the caller's environment.",
    )
    env_from: list[EnvFrom] = Field(
        default_factory=list,
        max_length=MAX_GRADER_ENV,
        description="Secrets and ConfigMaps whose keys become env variables of the grader "
        "pods (cluster only, as env).",
    )


# Bounds of spec.grading.stabilityCheck: sample x times grader pods at most (2,000), and
# status.graderCheck.ledger stays a few KiB.
MAX_CHECK_SAMPLE = 200
MAX_CHECK_TIMES = 10
MAX_GRADER_TIMEOUT_SECONDS = 3600


class StabilityCheck(_Model):
    """Regrade a seeded sample of the graded transcripts after the trials, and fail the
    gate while the grader says both pass and fail about too many of them."""

    sample: int = Field(
        default=20,
        ge=1,
        le=MAX_CHECK_SAMPLE,
        description="Graded attempts whose transcripts are regraded (all when fewer); infra "
        "attempts are never sampled.",
    )
    times: int = Field(
        default=3,
        ge=2,
        le=MAX_CHECK_TIMES,
        description="Gradings of each sampled transcript (noise needs two).",
    )
    max_noise_rate: float = Field(
        ge=0.0,
        le=1.0,
        description="The most grader noise the gate accepts: the share of regraded "
        "transcripts that got both a pass and a fail.",
    )
    seed: int = Field(
        default=0, ge=0, le=2**31 - 1, description="Seed of the sample (as passhat regrade)."
    )
    timeout_seconds: int = Field(
        default=300,
        ge=1,
        le=MAX_GRADER_TIMEOUT_SECONDS,
        description="Wall-clock limit of one grading; a grader that outlives it is a grader "
        "error, never a pass or a fail.",
    )


class Grading(_Model):
    """How a finished attempt is graded when it writes no result JSON, and by what grader
    its transcript is regraded."""

    exit_codes: ExitCodes = Field(
        default_factory=ExitCodes, description="Exit code lists for pass, fail and infraError."
    )
    grader: GraderSpec | None = Field(
        default=None,
        description="The grader `passhat regrade` runs on stored transcripts when no "
        "--grader is given.",
    )
    stability_check: StabilityCheck | None = Field(
        default=None,
        description="Regrade a sample of the graded transcripts after the trials (grader "
        "pods on a cluster, the grader command locally); the gate fails while the grader's "
        "noise rate is above maxNoiseRate. Needs grader (with an image on a cluster).",
    )

    @model_validator(mode="after")
    def _check_needs_grader(self) -> Grading:
        if self.stability_check is not None and (self.grader is None or not self.grader.image):
            raise _problem(
                ("stabilityCheck",),
                "needs spec.grading.grader with an image and a command (what regrades the "
                "transcripts: a pod of the image on a cluster, the command locally)",
            )
        return self


class RetryPolicy(_Model):
    """How infra errors are retried: attempts, then exponential backoff with a cap."""

    infra_errors: int = Field(
        default=3,
        ge=0,
        le=100,
        description="Retries of a trial slot after infra errors; a slot that runs out stays "
        "infra_error and out of the score.",
    )
    backoff_seconds: float = Field(
        default=10.0, ge=0, le=86400, description="Delay before the first retry; doubles each time."
    )
    max_backoff_seconds: float = Field(
        default=300.0, ge=0, le=86400, description="Cap on the delay between retries."
    )


class Gate(_Model):
    """A pass/fail gate on one metric at one k (exit code 1 locally, GatePassed condition)."""

    metric: Literal["passHatK", "passAtK", "meanPassRate"] = Field(
        description="The metric to gate on."
    )
    k: int = Field(ge=1, description="The k the metric is computed at; at most trials.")
    min: float = Field(ge=0.0, le=1.0, description="The gate passes when metric >= min.")
    statistic: Literal["estimate", "lowerBound"] = Field(
        default="estimate",
        description="What must reach min: the metric's estimate, or the lower bound of its "
        "two-sided bootstrap interval over tasks at `confidence` (seeded: reproducible).",
    )
    confidence: float = Field(
        default=0.95,
        ge=0.5,
        le=0.999,
        description="The level of the two-sided interval a lowerBound gate uses, 0.5 to "
        "0.999 (default 0.95).",
    )


class Budget(_Model):
    """What an eval may spend before it stops (docs/spec.md#budget): like a Job's
    backoffLimit, an eval past its budget ends Failed, keeping what was scored."""

    max_attempts: int | None = Field(
        default=None,
        ge=1,
        le=2**31 - 1,
        description="Trial attempts (retries included) the eval may start; none past it. "
        "Once they have all ended with slots not final, the eval stops (BudgetExhausted).",
    )
    max_cost_usd: float | None = Field(
        default=None,
        alias="maxCostUSD",
        ge=1e-6,
        le=1e9,
        description="US dollars the trials may report spending (result JSON cost_usd, "
        "infra-error attempts included). Once reached, running trials are stopped and not "
        "recorded, and the eval stops (BudgetExhausted).",
    )

    @model_validator(mode="after")
    def _check_some(self) -> Budget:
        if self.max_attempts is None and self.max_cost_usd is None:
            raise _problem((), "give maxAttempts, maxCostUSD or both")
        return self


class EvalSpec(_Model):
    """What to run and how to score it."""

    tasks: list[Task] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_INLINE_TASKS,
        description="The tasks, inline. Give exactly one of tasks and tasksFrom.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"]},
    )
    tasks_from: list[TaskSource] | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="ConfigMap keys holding the tasks (for large suites).",
    )
    trials: int = Field(ge=1, le=MAX_TRIALS, description="Trials per task (n); at least every k.")
    ks: list[K] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_KS,
        description="The ks to report pass^k and pass@k at; default 1, 3 and trials "
        "(capped at trials).",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    parallelism: int = Field(
        default=1, ge=1, le=MAX_PARALLELISM, description="Trial attempts in flight at once."
    )
    active_deadline_seconds: int | None = Field(
        default=None,
        ge=1,
        le=MAX_ACTIVE_DEADLINE_SECONDS,
        description="Seconds the eval may be active, counted from its start (status.startTime), "
        "as a Job's: once past, running trials are stopped, no more start, and the eval "
        "ends Failed with reason DeadlineExceeded, keeping what was scored.",
    )
    queue_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=63,
        pattern=r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
        description="Kueue LocalQueue for the trial pods (their kueue.x-k8s.io/queue-name "
        "label); ignored locally.",
    )
    priority_class_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="PriorityClass of the trial and grader pods (their priorityClassName, "
        "which Kueue takes as the workload's priority), as the template's own field; only "
        "from the operator's allowed list; ignored locally.",
    )
    # NB: no schema default: a CRD default would put the field into every stored eval,
    # which an operator older than the field refuses (unknown field) until it is upgraded
    pod_retention: Literal["all", "failed", "none"] | None = Field(
        default=None,
        description="Which finished trial pods stay once their outcome is recorded (and "
        "archived, with a record store): all (unset: all, like a Job's pods), failed (pods "
        "of attempts that did not pass), or none. The rest are deleted; ignored locally.",
    )
    suite: str | None = Field(
        default=None,
        min_length=1,
        max_length=63,
        pattern=SUITE_PATTERN,
        description="The suite this eval is a run of: evals that share it are runs of one "
        "suite (passhat history, the passhat_suite_* metrics). A label value (at most 63 "
        "letters, digits, '-', '_', '.'); wins over the passhat.dev/suite label.",
    )
    trial: TrialSpec = Field(description="How one trial attempt runs.")
    grading: Grading = Field(default_factory=Grading, description="How exit codes are graded.")
    retry: RetryPolicy = Field(
        default_factory=RetryPolicy, description="How infra errors are retried."
    )
    gate: Gate | None = Field(default=None, description="Optional pass/fail gate.")
    budget: Budget | None = Field(
        default=None,
        description="Optional spending limit: attempts and/or reported US dollars; past it "
        "the eval stops (BudgetExhausted) and its gate fails.",
    )

    @model_validator(mode="after")
    def _check_spec(self) -> EvalSpec:
        if (self.tasks is None) == (self.tasks_from is None):
            raise _problem((), "give exactly one of tasks and tasksFrom")
        for index, k in enumerate(self.ks or []):
            if k > self.trials:
                raise _problem(("ks", index), f"k={k} is larger than trials={self.trials}")
            if k in (self.ks or [])[:index]:
                raise _problem(("ks", index), f"k={k} is listed twice")
        if self.gate is not None and self.gate.k > self.trials:
            raise _problem(("gate", "k"), f"k={self.gate.k} is larger than trials={self.trials}")
        for path, reason in task_id_problems(self.tasks or []):
            raise _problem(("tasks", *path), reason)
        total = 0
        for index, task in enumerate(self.tasks or []):
            total += task.json_bytes
            if total > MAX_TASKS_BYTES:
                raise _problem(
                    ("tasks", index),
                    f"the tasks up to this one are {total} bytes (ids and params as JSON), "
                    f"more than {MAX_TASKS_BYTES // 2**20} MiB; split the suite into several "
                    "evals",
                )
        for path, reason in task_source_problems(self.tasks_from or []):
            raise _problem(("tasksFrom", *path), reason)
        if self.priority_class_name is not None:
            # NB: into the template, so every reader of it (the operator's allowed lists,
            # trial and grader pods) sees one priority
            pod_spec = self.trial.template["spec"]
            named = pod_spec.get("priorityClassName")
            if named not in (None, self.priority_class_name):
                raise _problem(
                    ("priorityClassName",),
                    f"{self.priority_class_name} differs from the trial template's "
                    f"priorityClassName {named}; give it in one place",
                )
            pod_spec["priorityClassName"] = self.priority_class_name
        return self

    @property
    def report_ks(self) -> list[int]:
        """The ks to report, ascending: `ks`, or the default 1, 3, trials (capped)."""
        return sorted(self.ks) if self.ks is not None else default_ks(self.trials)

    @property
    def headline_k(self) -> int:
        """The k `kubectl get` shows pass^k at: gate.k if there is a gate, else the largest k."""
        return self.gate.k if self.gate is not None else max(self.report_ks)

    @property
    def main_container(self) -> dict[str, Any]:
        """The template's first container (the one that runs locally)."""
        containers: list[dict[str, Any]] = self.trial.template["spec"]["containers"]
        return containers[0]


class ConsistencyEval(_Model):
    """A consistency eval: run every task `trials` times and score pass^k, pass@k."""

    api_version: Literal["passhat.dev/v1alpha1"] = Field(
        alias="apiVersion", description="passhat.dev/v1alpha1"
    )
    kind: Literal["ConsistencyEval"] = Field(description="ConsistencyEval")
    metadata: Metadata
    spec: EvalSpec


def task_id_problems(tasks: Sequence[Task]) -> Iterator[tuple[Path, str]]:
    """`((index, "id"), reason)` for every task whose id repeats an earlier one."""
    seen: set[str] = set()
    for index, task in enumerate(tasks):
        if task.id in seen:
            yield (index, "id"), f'duplicate task id "{task.id}"'
        seen.add(task.id)


def task_source_problems(sources: Sequence[TaskSource]) -> Iterator[tuple[Path, str]]:
    """`((index,), reason)` for every tasksFrom entry that reads what an earlier one reads
    (the same ConfigMap key, or a whole ConfigMap and one of its keys): read twice, its
    tasks would only repeat, as duplicate ids."""
    for index, source in enumerate(sources):
        for before, other in enumerate(sources[:index]):
            if other.config_map != source.config_map:
                continue
            if other.key is None or source.key is None or other.key == source.key:
                what = f'key "{source.key}" of ' if source.key is not None else ""
                yield (
                    (index,),
                    f'{what}ConfigMap "{source.config_map}" is already read by '
                    f"spec.tasksFrom[{before}]",
                )
                break


def params_json_bytes(params: Mapping[str, Any]) -> int:
    """The size of `params` as the JSON a trial pod gets in PASSHAT_TASK (ASCII, so its
    length in characters is its length in bytes); RecursionError when too deep to encode."""
    return len(json.dumps(params))


_RESOURCE_NAME = re.compile(r"^([a-z0-9.-]+/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def template_problems(template: Any) -> list[tuple[Path, str]]:
    """What passhat needs of a pod template and does not find (paths relative to it).

    Checked: the template and its `spec` are objects, `spec.containers` is a non-empty
    list of objects each with a name, and every quantity in `resources.requests` /
    `resources.limits` parses and no request exceeds its limit.
    """
    if not isinstance(template, Mapping):
        return [((), "must be a pod template (an object with spec.containers)")]
    problems: list[tuple[Path, str]] = _label_problems(template.get("metadata"))
    spec = template.get("spec")
    if not isinstance(spec, Mapping):
        return [*problems, (("spec",), "required: a pod spec with containers")]
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return [*problems, (("spec", "containers"), "at least one container is required")]
    names: set[str] = set()
    for index, container in enumerate(containers):
        at: Path = ("spec", "containers", index)
        if not isinstance(container, Mapping):
            problems.append((at, "must be an object"))
            continue
        name = container.get("name")
        if not isinstance(name, str) or not name:
            problems.append(((*at, "name"), "every container needs a name"))
        elif name in names:
            problems.append(((*at, "name"), f'duplicate container name "{name}"'))
        else:
            names.add(name)
        problems.extend(_resource_problems(container.get("resources"), (*at, "resources")))
        problems.extend(_command_problems(container, at))
    return problems


def _command_problems(container: Mapping[str, Any], at: Path) -> list[tuple[Path, str]]:
    """command, args and env as Kubernetes types them (lists of strings; env entries with
    a non-empty string name and a string value): locally they are run as they are, so
    `command: [sh, -c, true]` would otherwise run `sh -c True`."""
    problems: list[tuple[Path, str]] = []
    for part in ("command", "args"):
        items = container.get(part)
        if items is None:
            continue
        if not isinstance(items, list):
            problems.append(((*at, part), "must be a list of strings"))
            continue
        problems.extend(
            ((*at, part, index), f"must be a string (got {_yaml_kind(item)}; quote it)")
            for index, item in enumerate(items)
            if not isinstance(item, str)
        )
    env = container.get("env")
    if env is None:
        return problems
    if not isinstance(env, list):
        return [*problems, ((*at, "env"), "must be a list of {name, value} objects")]
    for index, entry in enumerate(env):
        where: Path = (*at, "env", index)
        if not isinstance(entry, Mapping):
            problems.append((where, "must be an object with name and value"))
            continue
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            problems.append(((*where, "name"), "must be a non-empty string"))
        elif "=" in name or "\0" in name:
            problems.append(((*where, "name"), "must not contain '=' or NUL"))
        value = entry.get("value")
        if value is not None and not isinstance(value, str):
            problems.append(
                ((*where, "value"), f"must be a string (got {_yaml_kind(value)}; quote it)")
            )
    return problems


def _yaml_kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return "a number"
    if value is None:
        return "null"
    return "a list" if isinstance(value, list) else "an object"


def _label_problems(metadata: Any) -> list[tuple[Path, str]]:
    """Template labels under `passhat.dev/`: the operator's own, which say which trial a
    pod runs and whether its outcome is recorded (a pod labelled `recorded` from the start
    would never be counted)."""
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    if not isinstance(labels, Mapping):
        return []
    return [
        (("metadata", "labels", key), f"labels under {RESERVED_LABEL_PREFIX} are passhat's own")
        for key in labels
        if isinstance(key, str) and key.startswith(RESERVED_LABEL_PREFIX)
    ]


def _resource_problems(resources: Any, at: Path) -> list[tuple[Path, str]]:
    if resources is None:
        return []
    if not isinstance(resources, Mapping):
        return [(at, "must be an object with requests and/or limits")]
    problems: list[tuple[Path, str]] = []
    values: dict[str, dict[str, Any]] = {}
    for part in ("requests", "limits"):
        entries = resources.get(part)
        if entries is None:
            continue
        if not isinstance(entries, Mapping):
            problems.append(((*at, part), "must be a map of resource name to quantity"))
            continue
        values[part] = {}
        for resource, quantity in entries.items():
            if not isinstance(resource, str) or not _RESOURCE_NAME.match(resource):
                problems.append(((*at, part, str(resource)), "invalid resource name"))
                continue
            try:
                values[part][resource] = parse_quantity(quantity)
            except ValueError as err:
                problems.append(((*at, part, resource), str(err)))
    for resource, request in values.get("requests", {}).items():
        limit = values.get("limits", {}).get(resource)
        if limit is not None and request > limit:
            problems.append(
                (
                    (*at, "requests", resource),
                    f"request {resources['requests'][resource]} is more than the limit "
                    f"{resources['limits'][resource]}",
                )
            )
    return problems


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]*$")


def format_path(path: Sequence[str | int]) -> str:
    """`("spec", "ks", 1)` -> `spec.ks[1]`; a key with dots or slashes is quoted
    (`labels["passhat.dev/trial"]`), so the path reads back unambiguously."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif not _PLAIN_KEY.match(str(part)):
            text += f"[{json.dumps(str(part))}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def spec_problems(error: ValidationError, prefix: Path = ()) -> list[tuple[Path, str]]:
    """Every problem of a ValidationError as `(absolute path, one-line reason)`.

    `prefix` is prepended (e.g. `("spec",)` when `EvalSpec` was validated on its own).
    Unknown fields come first (a typo usually also causes a "missing" error) and name the
    missing field they were probably meant to be.
    """
    items = error.errors(include_url=False)
    missing = [tuple(item["loc"]) for item in items if item["type"] == "missing"]
    problems: list[tuple[Path, str]] = []
    for item in sorted(items, key=lambda item: item["type"] != "extra_forbidden"):
        loc: Path = tuple(item["loc"])
        ctx = item.get("ctx") or {}
        if item["type"] == SPEC_ERROR:
            problems.append(((*prefix, *loc, *ctx.get("path", ())), str(ctx["reason"])))
        elif item["type"] == "extra_forbidden":
            problems.append(((*prefix, *loc), _unknown_field(loc, missing)))
        else:
            problems.append(((*prefix, *loc), _reason(item)))
    return problems


def _unknown_field(loc: Path, missing: list[Path]) -> str:
    candidates = [m[-1] for m in missing if m[:-1] == loc[:-1] and isinstance(m[-1], str)]
    close = difflib.get_close_matches(str(loc[-1]), [str(c) for c in candidates], n=1)
    return f'unknown field (did you mean "{close[0]}"?)' if close else "unknown field"


def _reason(item: Mapping[str, Any]) -> str:
    kind = item["type"]
    value = item.get("input")
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required field is missing"
    message = str(item["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    message = message.replace("Input should be", "should be").replace(" after validation", "")
    message = message.replace("String should", "should").replace("List should", "should")
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        message += f" (got {_shown(value)})"
    return message


def _shown(value: str | int | float) -> str:
    """`repr(value)`, shortened (an int of more than 4300 digits has no repr at all)."""
    if isinstance(value, int) and value.bit_length() > 128:
        return "a very large integer"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."
