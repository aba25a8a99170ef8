"""Release gates: what a gate decides, and the exit codes every gating command shares.

A CI pipeline gates on one of three commands, `passhat run` (a local run), `passhat
report NAME` (a cluster eval) and `passhat score FILES --gate ...` (trial files), and
reads the same exit codes from each (docs/scoring.md#exit-codes):

| code | meaning                                                                        |
|------|--------------------------------------------------------------------------------|
| 0    | finished; the gate passed (or there is no gate)                                |
| 1    | finished; the gate failed                                                      |
| 2    | usage or input error: a bad option, file, spec or gate; an eval that cannot run |
| 3    | not finished: trials still to run (or stopped before every slot was final)     |

A gate's verdict is computed here once, for the operator's status, the local run and
`passhat score`: the metric's estimate at gate.k over the tasks scored there, and for
`statistic: lowerBound` the low end of its two-sided percentile bootstrap interval over
tasks at `confidence` (`passhat.stats.bootstrap`, seed 0, `DEFAULT_RESAMPLES`), the same
interval the reports print at that level. A gate with no task scored at k fails.

A cluster eval's exit code is read from its conditions, never its phase string:
`exit_code_of(status, generation=, has_gate=)`; `settled(...)` says whether waiting can
still change it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from passhat.api import conditions as cond
from passhat.api.errors import UsageError
from passhat.stats import KIntervals, TaskTally, summarize

if TYPE_CHECKING:
    from passhat.api.spec import Gate

__all__ = [
    "EXIT_GATE_FAILED",
    "EXIT_NOT_FINISHED",
    "EXIT_PASSED",
    "EXIT_USAGE",
    "GATE_SEED",
    "GateVerdict",
    "evaluate_gate",
    "exit_code_of",
    "exit_code_of_eval",
    "is_settled",
    "parse_gate",
    "settled",
]

# Finished, and the gate passed (or there is no gate).
EXIT_PASSED = 0
# Finished, and the gate failed.
EXIT_GATE_FAILED = 1
# A usage or input error (also what the CLI returns for every PasshatError).
EXIT_USAGE = 2
# Not finished: trial slots are still open (`--wait` waits for them).
EXIT_NOT_FINISHED = 3

# How far below `min` a value may fall by float rounding alone and still meet it.
_ROUNDING = 1e-12

# The seed of every interval a gate, the status and the metrics compute: a status
# written twice from the same ledger carries the same bound.
GATE_SEED = 0

_METRIC_FIELD = {
    "passHatK": "pass_hat_k",
    "passAtK": "pass_at_k",
    "meanPassRate": "mean_pass_rate",
}
_EXPRESSION = re.compile(
    r"\s*(?P<metric>[A-Za-z]+)\s*@\s*(?P<k>\d+)\s*>=\s*(?P<min>[0-9]*\.?[0-9]+)\s*"
)


@dataclass(frozen=True)
class GateVerdict:
    """A gate evaluated on one set of tallies."""

    metric: str
    k: int
    min: float
    statistic: str
    confidence: float
    estimate: float
    lower_bound: float | None
    tasks_scored: int

    @property
    def value(self) -> float:
        """The figure compared with `min`: the estimate, or the interval's low end."""
        if self.statistic == "lowerBound" and self.lower_bound is not None:
            return self.lower_bound
        return self.estimate

    @property
    def passed(self) -> bool:
        """Whether a task was scored at k and the figure reached `min`."""
        # NB: a mean of ratios is a float sum: 9 tasks of 1.0 and one of 0.0 must meet 0.9
        return self.tasks_scored > 0 and self.value >= self.min - _ROUNDING

    def describe(self) -> str:
        """`passHatK at k=2 is 0.8125 (min 0.9)`, with the bound and its level when gated on it."""
        if self.statistic == "lowerBound":
            return (
                f"{self.metric} at k={self.k}: lower bound {self.value:.4f} of its "
                f"{100 * self.confidence:g}% interval (estimate {self.estimate:.4f}), "
                f"min {self.min:g}"
            )
        return f"{self.metric} at k={self.k} is {self.estimate:.4f} (min {self.min:g})"

    def as_status(self) -> dict[str, Any]:
        """`status.gate` (camelCase, as `passhat.api.status.GateResult`)."""
        status: dict[str, Any] = {
            "metric": self.metric,
            "k": self.k,
            "min": self.min,
            "value": self.value,
            "passed": self.passed,
            "statistic": self.statistic,
            "estimate": self.estimate,
        }
        if self.statistic == "lowerBound" and self.lower_bound is not None:
            status["lowerBound"] = self.lower_bound
            status["confidence"] = self.confidence
        return status


def evaluate_gate(
    gate: Gate,
    tallies: Sequence[TaskTally],
    *,
    intervals: Sequence[KIntervals] | None = None,
    seed: int = GATE_SEED,
    resamples: int | None = None,
) -> GateVerdict:
    """The verdict of `gate` on these tallies.

    `intervals`: bootstrap intervals already computed at the gate's confidence (the
    status's); the gate's k is looked up there before one is computed (with `seed` and
    `resamples`, default `DEFAULT_RESAMPLES`).
    """
    metric, k = str(gate.metric), int(gate.k)
    statistic, confidence = gate.statistic, gate.confidence
    summary = summarize(tallies, k)
    field = _METRIC_FIELD[metric]
    lower: float | None = None
    if statistic == "lowerBound":
        found = next(
            (i for i in intervals or () if i.k == k and abs(i.level - confidence) < 1e-12), None
        )
        if found is None:
            from passhat.stats import bootstrap
            from passhat.stats.bootstrap import DEFAULT_RESAMPLES

            (found,) = bootstrap(
                tallies,
                [k],
                seed=seed,
                level=confidence,
                resamples=resamples or DEFAULT_RESAMPLES,
            )
        lower = float(getattr(found, field).low)
    return GateVerdict(
        metric=metric,
        k=k,
        min=float(gate.min),
        statistic=statistic,
        confidence=confidence,
        estimate=float(getattr(summary, field)),
        lower_bound=lower,
        tasks_scored=summary.tasks_scored,
    )


def parse_gate(text: str, *, statistic: str = "estimate", confidence: float = 0.95) -> Gate:
    """A `passhat.api.spec.Gate` from `--gate` text such as `passHatK@2>=0.9`.

    UsageError naming the expression and what is wrong with it.
    """
    from pydantic import ValidationError

    from passhat.api.spec import Gate

    match = _EXPRESSION.fullmatch(text)
    if match is None:
        raise UsageError(
            f"--gate {text!r}: expected METRIC@K>=MIN, e.g. 'passHatK@2>=0.9' "
            f"(METRIC one of {', '.join(_METRIC_FIELD)})"
        )
    metric = match["metric"]
    if metric not in _METRIC_FIELD:
        raise UsageError(
            f"--gate {text!r}: unknown metric {metric!r} (one of {', '.join(_METRIC_FIELD)})"
        )
    try:
        return Gate.model_validate(
            {
                "metric": metric,
                "k": int(match["k"]),
                "min": float(match["min"]),
                "statistic": statistic,
                "confidence": confidence,
            }
        )
    except ValidationError as err:
        problem = err.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise UsageError(f"--gate {text!r}: {where}: {problem['msg']}") from None


def _is(
    conditions: Sequence[Mapping[str, Any]], kind: str, value: str, generation: int | None
) -> bool:
    """Whether condition `kind` has `value`, and was computed for this generation."""
    found = cond.find_condition(conditions, kind)
    if found is None or found.get("status") != value:
        return False
    seen = found.get("observedGeneration")
    return generation is None or seen is None or seen == generation


def _conditions_of(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    conditions = status.get("conditions")
    return [c for c in conditions or [] if isinstance(c, Mapping)]


def exit_code_of(status: Mapping[str, Any], *, generation: int | None, has_gate: bool) -> int:
    """The exit code of an eval's `status` (`generation`: its metadata.generation).

    Keyed on conditions (for the spec's current generation), not on the phase string:
    GatePassed=False is 1 whether or not every slot is final (a gate failed early, or
    an eval stopped by its budget); Complete=True is then 0, since GatePassed is True or
    there is no gate; a ConfigError that stopped the eval is 2 (the spec must change;
    not TasksUnavailable: the eval waits for its tasks' ConfigMap, which may still come);
    everything else is 3: trials are still to run, or the eval stopped before every slot
    was final (Failed: past its deadline), which leaves no verdict.
    """
    conditions = _conditions_of(status)
    if _is(conditions, cond.GATE_PASSED, "False", generation):
        return EXIT_GATE_FAILED
    if _is(conditions, cond.COMPLETE, "True", generation):
        if has_gate and not _is(conditions, cond.GATE_PASSED, "True", generation):
            return EXIT_NOT_FINISHED  # NB: a status written before the gate was added
        return EXIT_PASSED
    config_error = cond.find_condition(conditions, cond.CONFIG_ERROR)
    if (
        _is(conditions, cond.CONFIG_ERROR, "True", generation)
        and config_error is not None
        and config_error.get("reason") != cond.REASON_TASKS_UNAVAILABLE
    ):
        return EXIT_USAGE
    return EXIT_NOT_FINISHED


def settled(status: Mapping[str, Any], *, generation: int | None, has_gate: bool) -> bool:
    """Whether waiting longer can change `exit_code_of(status)`: a verdict, a stopping
    ConfigError, or Failed=True (the eval ended before every slot was final).

    The phase is read here only as a fallback, never for the code: an eval in phase
    Failed is stopped for good in every scheme (a condition added later that stops an
    eval, say a budget, must not make `--wait` wait forever)."""
    if exit_code_of(status, generation=generation, has_gate=has_gate) != EXIT_NOT_FINISHED:
        return True
    if status.get("phase") == "Failed" and status.get("observedGeneration") in (None, generation):
        return True
    return any(
        _is(_conditions_of(status), kind, "True", generation)
        for kind in (cond.FAILED, cond.BUDGET_EXHAUSTED)
    )


def _parts(obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], int | None, bool]:
    generation = (obj.get("metadata") or {}).get("generation")
    status = obj.get("status")
    return (
        status if isinstance(status, Mapping) else {},
        generation if isinstance(generation, int) else None,
        bool((obj.get("spec") or {}).get("gate")),
    )


def exit_code_of_eval(obj: Mapping[str, Any]) -> int:
    """`exit_code_of` a ConsistencyEval object as read from the API server."""
    status, generation, has_gate = _parts(obj)
    return exit_code_of(status, generation=generation, has_gate=has_gate)


def is_settled(obj: Mapping[str, Any]) -> bool:
    """`settled` of a ConsistencyEval object as read from the API server."""
    status, generation, has_gate = _parts(obj)
    return settled(status, generation=generation, has_gate=has_gate)
