"""Per-task changes between two runs of the same tasks: what regressed, what got fixed.

`compare` answers "is B better than A overall"; a reviewer then asks "which tasks did
it". Each task graded in both runs is put in one of four kinds by its state in A and B
(passing: every graded trial passed; failing: none did; flaky: some did):

| kind            | A → B                                                   |
|-----------------|---------------------------------------------------------|
| newly_flaky     | passing → flaky                                         |
| newly_passing   | failing or flaky → passing                              |
| regressed       | the pass rate fell, otherwise (→ failing, or a flaky task passing less) |
| improved        | the pass rate rose, otherwise (failing → flaky, a flaky task passing more) |

Tasks whose pass rate did not change are counted, not listed. Each change carries the
two-sided p-value of Fisher's exact test on the task's 2x2 table (passed / failed trials
in A and in B): how surprising the change is if the task's pass probability did not move.
Changes are ordered most significant first (smallest p, then the larger change, then
task id), so the regression a reviewer should read first is on top.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import comb
from typing import Any

from passhat.stats.summary import TaskTally

__all__ = [
    "IMPROVED",
    "KINDS",
    "NEWLY_FLAKY",
    "NEWLY_PASSING",
    "REGRESSED",
    "TaskChange",
    "fisher_exact_p",
    "task_changes",
]

REGRESSED = "regressed"
IMPROVED = "improved"
NEWLY_FLAKY = "newly_flaky"
NEWLY_PASSING = "newly_passing"
KINDS = (REGRESSED, NEWLY_FLAKY, IMPROVED, NEWLY_PASSING)


@dataclass(frozen=True)
class TaskChange:
    """One task whose pass rate differs between A and B."""

    task_id: str
    kind: str
    passed_a: int
    graded_a: int
    passed_b: int
    graded_b: int
    p_value: float

    @property
    def rate_a(self) -> float:
        """c/n in A."""
        return self.passed_a / self.graded_a

    @property
    def rate_b(self) -> float:
        """c/n in B."""
        return self.passed_b / self.graded_b

    @property
    def diff(self) -> float:
        """B's pass rate minus A's."""
        return self.rate_b - self.rate_a

    def as_json(self) -> dict[str, Any]:
        """The change as one JSON object."""
        return {
            "task_id": self.task_id,
            "change": self.kind,
            "a": {"passed": self.passed_a, "graded": self.graded_a, "pass_rate": self.rate_a},
            "b": {"passed": self.passed_b, "graded": self.graded_b, "pass_rate": self.rate_b},
            "diff": self.diff,
            "p_value": self.p_value,
        }


def fisher_exact_p(passed_a: int, graded_a: int, passed_b: int, graded_b: int) -> float:
    """Two-sided p-value of Fisher's exact test of the 2x2 table of passes and fails.

    The sum of the probabilities of every table with the same margins that is at most as
    likely as the observed one (the usual definition, as R's fisher.test and SciPy's).
    """
    passes = passed_a + passed_b
    total = graded_a + graded_b
    denominator = comb(total, passes)

    def probability(x: int) -> float:
        return comb(graded_a, x) * comb(graded_b, passes - x) / denominator

    observed = probability(passed_a)
    low, high = max(0, passes - graded_b), min(graded_a, passes)
    p = sum(q for x in range(low, high + 1) if (q := probability(x)) <= observed * (1 + 1e-9))
    return min(1.0, p)


def _state(passed: int, graded: int) -> str:
    return "passing" if passed == graded else "failing" if passed == 0 else "flaky"


def _kind(a: TaskTally, b: TaskTally) -> str:
    before, after = _state(a.passed, a.graded), _state(b.passed, b.graded)
    if before == "passing" and after == "flaky":
        return NEWLY_FLAKY
    if after == "passing":
        return NEWLY_PASSING
    return REGRESSED if b.passed * a.graded < a.passed * b.graded else IMPROVED


def task_changes(a: Sequence[TaskTally], b: Sequence[TaskTally]) -> list[TaskChange]:
    """The tasks graded in both A and B whose pass rate changed, most significant first."""
    by_id = {t.task_id: t for t in b}
    changes = []
    for before in a:
        after = by_id.get(before.task_id)
        if after is None or before.graded == 0 or after.graded == 0:
            continue
        if before.passed * after.graded == after.passed * before.graded:
            continue
        changes.append(
            TaskChange(
                task_id=before.task_id,
                kind=_kind(before, after),
                passed_a=before.passed,
                graded_a=before.graded,
                passed_b=after.passed,
                graded_b=after.graded,
                p_value=fisher_exact_p(before.passed, before.graded, after.passed, after.graded),
            )
        )
    changes.sort(key=lambda c: (c.p_value, -abs(c.diff), c.task_id))
    return changes
