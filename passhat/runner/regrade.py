"""`passhat regrade DIR --grader CMD --sample N --times R`: is the grader itself consistent?

pass^k measures the agent only if the grader says the same thing about the same
transcript every time; an LLM judge often does not. Regrading stored transcripts R times
each, without rerunning the agent, shows every transcript that got both a pass and a fail
(grader noise) and the noise rate: noisy transcripts / transcripts graded. Grader infra
errors are counted apart and never make a transcript noisy.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from typing import Any

from passhat.api.errors import InputError, UsageError
from passhat.runner.grader import GRADER_ERROR, run_grader
from passhat.trials.outcomes import Outcome

__all__ = ["Regrade", "TranscriptGrades", "find_transcripts", "regrade", "render_regrade"]


@dataclass
class TranscriptGrades:
    """The outcomes one transcript got, in order."""

    path: str
    outcomes: list[str] = field(default_factory=list)
    # what the grader said when it broke (exit 127, timeout, ...): one per broken grading
    grader_errors: list[str] = field(default_factory=list)

    @property
    def noisy(self) -> bool:
        """Whether the grader both passed and failed this transcript."""
        return "pass" in self.outcomes and "fail" in self.outcomes


@dataclass
class Regrade:
    """The result of regrading a sample of transcripts."""

    times: int
    transcripts: list[TranscriptGrades]

    @property
    def noisy(self) -> list[TranscriptGrades]:
        """Transcripts that got both a pass and a fail."""
        return [t for t in self.transcripts if t.noisy]

    @property
    def gradings(self) -> int:
        """Gradings done: transcripts x times."""
        return len(self.transcripts) * self.times

    @property
    def grader_errors(self) -> list[str]:
        """What the grader said each time it broke, in transcript order."""
        return [message for t in self.transcripts for message in t.grader_errors]

    @property
    def infra_errors(self) -> int:
        """Gradings that came out infra_error (the grader broke or exited 75)."""
        return sum(t.outcomes.count("infra_error") for t in self.transcripts)

    @property
    def noise_rate(self) -> float:
        """Noisy transcripts / transcripts graded (0.0 when none)."""
        return len(self.noisy) / len(self.transcripts) if self.transcripts else 0.0

    def as_json(self) -> dict[str, Any]:
        """The JSON form printed by `--format json`."""
        return {
            "transcripts": len(self.transcripts),
            "times": self.times,
            "noise_rate": self.noise_rate,
            "noisy": [
                {"transcript": t.path, "outcomes": dict(_counts(t.outcomes))} for t in self.noisy
            ],
            "infra_errors": self.infra_errors,
        }


def _counts(outcomes: list[str]) -> list[tuple[str, int]]:
    return [(o.value, outcomes.count(o.value)) for o in Outcome if o.value in outcomes]


def find_transcripts(directory: str) -> list[str]:
    """Transcript files (`*.log`) under `directory/transcripts` (or `directory`), sorted.

    Only regular files: a FIFO or device named `*.log` would block the grader's read."""
    if not os.path.isdir(directory):
        raise InputError(
            "not a directory (expected a run directory of passhat run)", path=directory
        )
    base = os.path.join(directory, "transcripts")
    base = base if os.path.isdir(base) else directory
    found: list[str] = []
    for root, dirs, files in os.walk(base, onerror=_raise):
        dirs.sort()
        found.extend(
            path
            for name in sorted(files)
            if name.endswith(".log") and os.path.isfile(path := os.path.join(root, name))
        )
    if not found:
        raise InputError("no transcripts (*.log) found", path=base)
    return found


def _raise(err: OSError) -> None:
    raise InputError(f"cannot read: {err.strerror or err}", path=err.filename) from None


def regrade(
    directory: str,
    grader: str,
    *,
    sample: int | None = None,
    times: int = 3,
    seed: int = 0,
    timeout: float | None = None,
) -> Regrade:
    """Grade a seeded sample of the run's transcripts `times` times each."""
    if times < 2:
        raise UsageError("--times must be at least 2 (noise needs two gradings)")
    if sample is not None and sample < 1:
        raise UsageError("--sample must be at least 1")
    paths = find_transcripts(directory)
    if sample is not None and sample < len(paths):
        paths = sorted(random.Random(seed).sample(paths, sample))
    graded = []
    for path in paths:
        grades = TranscriptGrades(os.path.relpath(path, directory))
        for _ in range(times):
            grade = run_grader(grader, path, timeout=timeout)
            grades.outcomes.append(grade.outcome.value)
            if grade.reason == GRADER_ERROR:
                grades.grader_errors.append(grade.message)
        graded.append(grades)
    result = Regrade(times=times, transcripts=graded)
    broken = result.grader_errors
    if len(broken) == result.gradings:
        # NB: else a grader that never ran (a typo) reads as "noise rate 0.000"
        raise UsageError(
            f"--grader: the grader broke on all {result.gradings} gradings: {broken[0]}"
        )
    return result


def render_regrade(result: Regrade, fmt: str) -> str:
    """The regrade report as text or JSON."""
    if fmt == "json":
        return json.dumps(result.as_json(), indent=2) + "\n"
    lines = [
        f"regraded {len(result.transcripts)} transcripts {result.times} times each",
        f"grader noise rate: {result.noise_rate:.3f} "
        f"({len(result.noisy)} of {len(result.transcripts)} transcripts got both pass and fail)",
    ]
    for t in result.noisy:
        counts = ", ".join(f"{name} {count}" for name, count in _counts(t.outcomes))
        lines.append(f"  noisy: {t.path} ({counts})")
    if result.infra_errors:
        line = (
            f"grader infra errors: {result.infra_errors} of {result.gradings} gradings "
            "(not counted)"
        )
        if result.grader_errors:
            line += f"; e.g. {result.grader_errors[0]}"
        lines.append(line)
    return "\n".join(lines) + "\n"
