"""passhat.grading: the grader contract and grader noise.

A grader is a user's shell command that reads a transcript and says pass or fail
(`grader.run_grader`, the one step `passhat trial` and `passhat regrade` share). pass^k
measures the agent only if the grader says the same thing about the same transcript every
time; `regrade` grades a seeded sample of stored transcripts several times each and
`noise` tells how often it did not (`GraderCheck`).

Layer: below `local`, `operator`, `runner` and `cli`; imports only `stats`, `api`,
`trials` and `records`. Nothing heavy at import time (`passhat trial` starts every trial).
"""

from passhat.grading.grader import GRADER_ERROR, Grade, GraderProcesses, grade_of, run_grader
from passhat.grading.noise import GraderCheck, Sample, TranscriptGrades, sample_graded

__all__ = [
    "GRADER_ERROR",
    "Grade",
    "GraderCheck",
    "GraderProcesses",
    "Sample",
    "TranscriptGrades",
    "grade_of",
    "run_grader",
    "sample_graded",
]
