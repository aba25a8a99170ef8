"""Each task's trials as one short string of marks, in trial order.

A flaky task reads differently from a task that passes half the time in a block: the
reports show each task's trial outcomes side by side (pass, fail, infra error, not final
yet) so flakiness is visible at a glance. The marks are one character per trial, so a
10,000-task report carries them cheaply; renderers draw them as coloured cells (HTML) or
as the characters themselves (text).
"""

from __future__ import annotations

from collections.abc import Iterable

from passhat.trials.outcomes import Outcome

__all__ = ["FAIL_MARK", "INFRA_MARK", "MARKS", "PASS_MARK", "PENDING_MARK", "strips_of"]

# A graded pass, a graded fail, an infra error (retries used up, or an unretried
# attempt row), and a trial not final yet (a live eval).
PASS_MARK = "+"
FAIL_MARK = "-"
INFRA_MARK = "!"
PENDING_MARK = "."
MARKS = {
    PASS_MARK: "pass",
    FAIL_MARK: "fail",
    INFRA_MARK: "infra error",
    PENDING_MARK: "not final",
}
_MARK = {
    Outcome.PASS.value: PASS_MARK,
    Outcome.FAIL.value: FAIL_MARK,
    Outcome.INFRA_ERROR.value: INFRA_MARK,
}


def strips_of(rows: Iterable[tuple[str, int | None, str]]) -> dict[str, str]:
    """task id -> its marks in trial order, from (task id, trial, outcome) attempt rows in
    the order they happened.

    A trial's last row is its outcome (the infra-error attempts retried before it are not
    marks of their own); rows without a trial number are one trial each, in row order.
    """
    trials: dict[str, dict[int, str]] = {}
    loose: dict[str, list[str]] = {}
    for task_id, trial, outcome in rows:
        mark = _MARK.get(outcome, INFRA_MARK)
        if trial is None:
            loose.setdefault(task_id, []).append(mark)
            trials.setdefault(task_id, {})
        else:
            trials.setdefault(task_id, {})[trial] = mark
            loose.setdefault(task_id, [])
    return {
        task_id: "".join(by_trial[t] for t in sorted(by_trial)) + "".join(loose[task_id])
        for task_id, by_trial in trials.items()
    }
