"""Grader noise: which graded attempts to regrade, and what their regrades say.

Pure (no processes, no I/O), so the CLI's `passhat regrade` and the operator's stability
check sample alike and report the same numbers from the same verdicts:

- `sample_graded(records, sample=, seed=)`: a seeded sample of the **graded** attempts
  (pass or fail). Infra attempts were never graded, so there is nothing to regrade: they
  are counted apart, never sampled. The sample does not depend on record order.
- `GraderCheck.build(...)` from each sampled transcript's regrades: the noise rate
  (transcripts with both a pass and a fail / transcripts with at least two verdicts),
  its 95 % Wilson interval, the share whose majority regrade differs from the verdict
  recorded in the run, the noisy transcripts and the grader errors (a grading that gave
  no verdict: a crash, a timeout, exit 75; never a pass or a fail).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from passhat.records.record import AttemptRecord
from passhat.stats import Interval, wilson
from passhat.trials.outcomes import Outcome

__all__ = [
    "LEVEL",
    "GraderCheck",
    "Sample",
    "TranscriptGrades",
    "sample_graded",
]

LEVEL = 0.95
_VERDICTS = (Outcome.PASS.value, Outcome.FAIL.value)
# Distinct grader error messages kept in the report (the count is always whole).
_ERROR_EXAMPLES = 5

AttemptKey = tuple[str, int, int]


def _key(record: AttemptRecord) -> AttemptKey:
    return (record["task_id"], record["trial"], record["attempt"])


@dataclass(frozen=True)
class Sample:
    """The graded attempts chosen for regrading, and what was left out."""

    chosen: list[AttemptRecord]
    graded: int  # graded attempts in the source (the population sampled)
    infra_skipped: int  # infra attempts in the source: never graded, never sampled


def sample_graded(records: Iterable[AttemptRecord], *, sample: int | None, seed: int) -> Sample:
    """A seeded sample of `sample` graded attempts (all when None or more than there are),
    ordered by task, trial and attempt."""
    records = list(records)
    graded = sorted((r for r in records if r["outcome"] in _VERDICTS), key=_key)
    infra = sum(1 for r in records if r["outcome"] == Outcome.INFRA_ERROR.value)
    chosen = graded
    if sample is not None and sample < len(graded):
        chosen = sorted(random.Random(seed).sample(graded, sample), key=_key)
    return Sample(chosen=chosen, graded=len(graded), infra_skipped=infra)


@dataclass
class TranscriptGrades:
    """What the regrades of one attempt's transcript said."""

    task_id: str
    trial: int
    attempt: int
    original: str  # the verdict recorded in the run: pass or fail
    verdicts: list[str] = field(default_factory=list)  # pass / fail, in grading order
    errors: list[str] = field(default_factory=list)  # one message per grading without a verdict

    @property
    def passes(self) -> int:
        return self.verdicts.count(Outcome.PASS.value)

    @property
    def fails(self) -> int:
        return self.verdicts.count(Outcome.FAIL.value)

    @property
    def judged(self) -> bool:
        """At least two verdicts: enough to tell noise (fewer: the grader kept breaking)."""
        return len(self.verdicts) >= 2

    @property
    def noisy(self) -> bool:
        """The grader both passed and failed this transcript."""
        return self.passes > 0 and self.fails > 0

    @property
    def majority(self) -> str | None:
        """pass or fail, whichever most regrades said; None on a tie or no verdict."""
        if self.passes == self.fails:
            return None
        return Outcome.PASS.value if self.passes > self.fails else Outcome.FAIL.value

    @property
    def disagrees(self) -> bool:
        """The regrades do not back the recorded verdict: their majority differs (a tie
        backs neither verdict, so it counts as disagreeing)."""
        return self.majority != self.original

    def as_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "trial": self.trial,
            "attempt": self.attempt,
            "verdicts": {"pass": self.passes, "fail": self.fails, "grader_error": len(self.errors)},
            "original": self.original,
        }


@dataclass(frozen=True)
class GraderCheck:
    """The result of regrading a sample of transcripts `times` times each."""

    times: int
    transcripts: list[TranscriptGrades]  # the sampled attempts regraded, in sample order
    graded_attempts: int = 0  # graded attempts in the source
    infra_skipped: int = 0  # infra attempts in the source (never sampled)
    missing: int = 0  # sampled attempts whose transcript the source does not have

    @classmethod
    def build(
        cls,
        *,
        times: int,
        sample: Sample,
        grades: Sequence[TranscriptGrades],
        missing: int = 0,
    ) -> GraderCheck:
        """The check of `sample`'s regrades (`missing`: sampled attempts with no transcript)."""
        return cls(
            times=times,
            transcripts=list(grades),
            graded_attempts=sample.graded,
            infra_skipped=sample.infra_skipped,
            missing=missing,
        )

    @property
    def judged(self) -> list[TranscriptGrades]:
        """Transcripts with at least two verdicts: the noise rate's denominator."""
        return [t for t in self.transcripts if t.judged]

    @property
    def noisy(self) -> list[TranscriptGrades]:
        """Transcripts that got both a pass and a fail."""
        return [t for t in self.transcripts if t.noisy]

    @property
    def noise_rate(self) -> float:
        """Noisy transcripts / judged transcripts (0.0 when none was judged)."""
        judged = len(self.judged)
        return len(self.noisy) / judged if judged else 0.0

    @property
    def noise_rate_interval(self) -> Interval:
        """The 95 % Wilson interval of the noise rate ([0, 1] when none was judged)."""
        return wilson(len(self.noisy), len(self.judged), level=LEVEL)

    @property
    def disagreements(self) -> list[TranscriptGrades]:
        """Judged transcripts whose majority regrade is not the recorded verdict."""
        return [t for t in self.judged if t.disagrees]

    @property
    def disagree_with_original(self) -> float:
        """Disagreements / judged transcripts (0.0 when none was judged)."""
        judged = len(self.judged)
        return len(self.disagreements) / judged if judged else 0.0

    @property
    def gradings(self) -> int:
        """Gradings run: transcripts x times."""
        return len(self.transcripts) * self.times

    @property
    def grader_errors(self) -> int:
        """Gradings that gave no verdict (the grader crashed, hung, or exited 75)."""
        return sum(len(t.errors) for t in self.transcripts)

    @property
    def grader_error_messages(self) -> list[str]:
        """The first few distinct messages of the grader errors, in grading order."""
        seen: list[str] = []
        for t in self.transcripts:
            for message in t.errors:
                if message not in seen and len(seen) < _ERROR_EXAMPLES:
                    seen.append(message)
        return seen

    def as_json(self, *, max_noisy: int | None = None) -> dict[str, Any]:
        """The object `passhat regrade --format json` prints (`max_noisy`: keep at most that
        many noisy transcripts; `noisy_total` always counts them all)."""
        noisy = self.noisy
        interval = self.noise_rate_interval
        return {
            "transcripts": len(self.transcripts),
            "times": self.times,
            "judged": len(self.judged),
            "noise_rate": self.noise_rate,
            "noise_rate_interval": [interval.low, interval.high],
            "disagree_with_original": self.disagree_with_original,
            "noisy": [t.as_json() for t in (noisy if max_noisy is None else noisy[:max_noisy])],
            "noisy_total": len(noisy),
            "grader_errors": self.grader_errors,
            "grader_error_messages": self.grader_error_messages,
            "gradings": self.gradings,
            "graded_attempts": self.graded_attempts,
            "infra_attempts_skipped": self.infra_skipped,
            "missing_transcripts": self.missing,
        }
