"""Per-task changes between two runs: kinds, Fisher's exact p, most significant first."""

from __future__ import annotations

import pytest

from passhat.stats import TaskTally, task_changes
from passhat.stats.changes import fisher_exact_p


def t(task_id: str, passed: int, failed: int, infra: int = 0) -> TaskTally:
    """A tally."""
    return TaskTally(task_id, passed, failed, infra)


def test_fisher_exact_matches_published_values() -> None:
    """Two-sided p as R's fisher.test: 5/5 vs 0/5 is 2/252; 3/10 vs 7/10 is 0.1789."""
    assert fisher_exact_p(5, 5, 0, 5) == pytest.approx(2 / 252)
    assert fisher_exact_p(3, 10, 7, 10) == pytest.approx(0.1789, abs=1e-4)
    assert fisher_exact_p(2, 4, 2, 4) == pytest.approx(1.0)


def test_kinds_and_order() -> None:
    """Each kind by the tasks' states in A and B; the most significant change first;
    unchanged, one-sided and ungraded tasks are not listed."""
    a = [
        t("broke", 8, 0),
        t("wobbles", 8, 0),
        t("fixed", 0, 8),
        t("better", 0, 8),
        t("worse", 6, 2),
        t("same", 4, 4),
        t("gone", 8, 0),
        t("infra", 0, 0, 8),
    ]
    b = [
        t("broke", 0, 8),
        t("wobbles", 7, 1),
        t("fixed", 8, 0),
        t("better", 2, 6),
        t("worse", 3, 5),
        t("same", 2, 2),
        t("new", 0, 8),
        t("infra", 0, 8),
    ]
    changes = task_changes(a, b)
    kinds = {c.task_id: c.kind for c in changes}
    assert kinds == {
        "broke": "regressed",
        "wobbles": "newly_flaky",
        "fixed": "newly_passing",
        "better": "improved",
        "worse": "regressed",
    }
    assert [c.task_id for c in changes][:2] == ["broke", "fixed"]  # p = 1/12870 * 2, tied
    assert changes[-1].task_id == "wobbles" and changes[-1].p_value == 1.0
    assert [c.p_value for c in changes] == sorted(c.p_value for c in changes)
    assert changes[0].as_json()["a"] == {"passed": 8, "graded": 8, "pass_rate": 1.0}
