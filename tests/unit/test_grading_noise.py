"""passhat.grading.noise: what is sampled, and how regrades are counted."""

from __future__ import annotations

from passhat.grading.noise import GraderCheck, TranscriptGrades, sample_graded
from passhat.records.record import AttemptRecord


def _record(task_id: str, trial: int, outcome: str, attempt: int = 0) -> AttemptRecord:
    return {"task_id": task_id, "trial": trial, "attempt": attempt, "outcome": outcome}


RECORDS = [
    _record(task, trial, outcome)
    for task in ("a", "b", "c")
    for trial, outcome in enumerate(["pass", "fail", "infra_error", "pass"])
]


def test_only_graded_attempts_are_sampled_whatever_the_order() -> None:
    """Infra attempts are counted, never chosen; the sample depends on the seed, not on
    the order the records came in."""
    forward = sample_graded(RECORDS, sample=5, seed=4)
    backward = sample_graded(list(reversed(RECORDS)), sample=5, seed=4)
    assert forward == backward
    assert (forward.graded, forward.infra_skipped, len(forward.chosen)) == (9, 3, 5)
    assert all(r["outcome"] != "infra_error" for r in forward.chosen)
    everything = sample_graded(RECORDS, sample=None, seed=0)
    assert len(everything.chosen) == 9


def test_counting_regrades() -> None:
    """A tie is noisy and backs neither verdict; one verdict is not enough to judge."""
    tie = TranscriptGrades("a", 0, 0, "pass", verdicts=["pass", "fail"])
    agree = TranscriptGrades("a", 1, 0, "fail", verdicts=["fail", "fail", "pass"])
    flipped = TranscriptGrades("b", 0, 0, "pass", verdicts=["fail", "fail"])
    lonely = TranscriptGrades("c", 0, 0, "pass", verdicts=["fail"], errors=["timed out"])
    check = GraderCheck(times=2, transcripts=[tie, agree, flipped, lonely])
    assert [t.noisy for t in check.transcripts] == [True, True, False, False]
    assert [t.disagrees for t in check.judged] == [True, False, True]
    assert (check.noise_rate, check.disagree_with_original) == (2 / 3, 2 / 3)
    assert check.grader_errors == 1 and check.gradings == 8
    short = check.as_json(max_noisy=1)
    assert len(short["noisy"]) == 1 and short["noisy_total"] == 2
