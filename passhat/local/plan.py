"""Everything a local run needs from the spec, resolved and checked before anything starts.

A mistake in the spec must stop the run before the first trial (exit 2 with the field),
not surface as a thousand failed attempts: the command must exist, `valueFrom` needs a
cluster, a request must be able to fit on this machine. The result is a `Plan`, plain data
the executor runs without looking at the spec again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from passhat.api.errors import SpecError
from passhat.api.spec import ConsistencyEval, Grading, Task
from passhat.local.capacity import Capacity, Resources, container_resources
from passhat.local.sandbox import (
    base_env,
    container_command,
    container_env,
    exec_string_problem,
)
from passhat.trials.classify import TimeoutIs
from passhat.trials.retry import RetryPlan

__all__ = ["MAX_TIMEOUT_SECONDS", "Plan", "make_plan"]

# A longer timeoutSeconds is this one (ten years; a float holds any deadline up to it).
MAX_TIMEOUT_SECONDS = 10 * 365 * 86400


@dataclass(frozen=True)
class Plan:
    """One local eval run: what to run per attempt, the limits, grading and retries."""

    eval_name: str
    task_ids: list[str]
    task_params: list[str]
    trials: int
    executable: str
    argv: list[str]
    env: dict[str, str]
    requests: Resources
    limits: Resources
    timeout_seconds: float
    timeout_is: TimeoutIs
    grading: Grading
    retry: RetryPlan
    parallelism: int

    @property
    def expand_args(self) -> bool:
        """Whether the arguments use Kubernetes' `$(VAR)` expansion (or its `$$` escape)."""
        return any("$(" in arg or "$$" in arg for arg in self.argv[1:])

    @property
    def slots(self) -> int:
        """Trial slots: tasks x trials."""
        return len(self.task_ids) * self.trials


def make_plan(
    evaluation: ConsistencyEval,
    tasks: Sequence[Task],
    *,
    source: str | None,
    eval_dir: str,
    environ: Mapping[str, str] = os.environ,
    capacity: Capacity | None = None,
) -> Plan:
    """The plan of `evaluation` with its resolved `tasks`; SpecError for what cannot run here."""
    spec = evaluation.spec
    container = spec.main_container
    env = base_env(environ)
    env.update(container_env(container, source=source))
    executable, argv = container_command(
        container, path=env.get("PATH", os.defpath), eval_dir=eval_dir, source=source
    )
    params = [json.dumps(task.params, separators=(",", ":")) for task in tasks]
    for index, task in enumerate(tasks):
        for name, text, what in (
            ("PASSHAT_TASK_ID", task.id, "id"),
            ("PASSHAT_TASK", params[index], "params"),
        ):
            problem = exec_string_problem(text, prefix=name + "=")
            if problem is not None:
                raise SpecError(
                    f"{problem} (a trial sees it as ${name})",
                    field=f"spec.tasks[{index}].{what}",
                    path=source,
                )
    requests, limits = container_resources(container)
    if capacity is not None:
        capacity.check(requests, source=source)
    return Plan(
        eval_name=evaluation.metadata.name,
        task_ids=[task.id for task in tasks],
        task_params=params,
        trials=spec.trials,
        executable=executable,
        argv=argv,
        env=env,
        requests=requests,
        limits=limits,
        # NB: clamped before the float: an integer of hundreds of digits overflows one
        timeout_seconds=float(min(spec.trial.timeout_seconds, MAX_TIMEOUT_SECONDS)),
        timeout_is=spec.trial.timeout_is,
        grading=spec.grading,
        retry=RetryPlan.from_policy(spec.retry),
        parallelism=spec.parallelism,
    )
