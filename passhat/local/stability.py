"""`passhat run` with `spec.grading.stabilityCheck`: regrade after the trials, gate on it.

The same spec field the operator runs as grader pods drives a local regrade with the
grader's command (`passhat.grading.regrade`, the engine of `passhat regrade`): a seeded
sample of the run's graded attempts, regraded `times` times each with the check's
timeout, `spec.parallelism` gradings at a time. The result is written to the run
directory (`grader-check.json`: `passhat regrade --format json`'s object plus
`max_noise_rate` and `stable`) and its text report to stderr; the gate passes only on a
stable grader (some transcript judged, noise rate at most `maxNoiseRate`), as on a cluster.
A check that cannot run (no graded attempt, a grader that broke on every grading) is not
stable: it never passes a gate by default.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from typing import TextIO

from passhat.api.errors import UsageError
from passhat.api.spec import EvalSpec
from passhat.grading.noise import GraderCheck
from passhat.grading.regrade import regrade
from passhat.grading.render import render_regrade
from passhat.records.bundle import write_file
from passhat.records.source import RunDirectory

__all__ = ["CHECK_FILE", "LocalCheck", "run_stability_check"]

# The check's result in the run directory.
CHECK_FILE = "grader-check.json"


@dataclass(frozen=True)
class LocalCheck:
    """What the local stability check found (`check` None: it could not run)."""

    stable: bool
    check: GraderCheck | None
    problem: str = ""


def run_stability_check(spec: EvalSpec, out: str, stderr: TextIO) -> LocalCheck:
    """Regrade run directory `out` as `spec.grading.stabilityCheck` says; report on stderr."""
    settings, grader = spec.grading.stability_check, spec.grading.grader
    assert settings is not None and grader is not None
    source = RunDirectory(out)
    records = source.records()
    stderr.write(
        f"passhat: grader stability check: regrading up to {settings.sample} graded transcripts "
        f"{settings.times} times each with spec.grading.grader.command\n"
    )
    try:
        check = regrade(
            source,
            shlex.join(grader.command),
            records=records,
            sample=settings.sample,
            times=settings.times,
            seed=settings.seed,
            parallelism=spec.parallelism,
            timeout=float(settings.timeout_seconds),
        )
    except UsageError as err:
        problem = str(err)
        write_file(
            os.path.join(out, CHECK_FILE),
            (json.dumps({"error": problem, "stable": False}, indent=2) + "\n").encode(),
        )
        stderr.write(f"passhat: grader stability check: {problem}; the grader is not stable\n")
        return LocalCheck(stable=False, check=None, problem=problem)
    stable = bool(check.judged) and check.noise_rate <= settings.max_noise_rate
    body = {**check.as_json(), "max_noise_rate": settings.max_noise_rate, "stable": stable}
    write_file(os.path.join(out, CHECK_FILE), (json.dumps(body, indent=2) + "\n").encode())
    stderr.write(render_regrade(check, "text", records=records, title=out))
    verdict = "stable" if stable else "NOT stable"
    stderr.write(
        f"passhat: grader {verdict}: noise rate {check.noise_rate:.3f}, max "
        f"{settings.max_noise_rate:g} (spec.grading.stabilityCheck.maxNoiseRate)\n"
    )
    return LocalCheck(stable=stable, check=check)
