"""classify_exit: the process-side rows of the outcome table, most specific first."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from passhat.api.spec import ExitCodes, Grading
from passhat.trials import Outcome, Verdict, classify_exit
from passhat.trials.classify import EXIT_RULES

GRADING = Grading()
PASS, FAIL, INFRA = Outcome.PASS, Outcome.FAIL, Outcome.INFRA_ERROR


def verdict(**facts: Any) -> tuple[Outcome, str]:
    found = classify_exit(grading=facts.pop("grading", GRADING), **facts)
    return found.outcome, found.reason


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        ({"exit_code": 0}, (PASS, "exit_code")),
        ({"exit_code": 1}, (FAIL, "exit_code")),
        ({"exit_code": 75}, (INFRA, "reported")),
        ({"exit_code": 2}, (FAIL, "exit_2")),
        ({"exit_code": 139}, (FAIL, "exit_139")),
        ({"exit_code": -9}, (FAIL, "exit_137")),
        ({"exit_code": None}, (INFRA, "lost")),
        ({"exit_code": 0, "oom_killed": True}, (INFRA, "oom_killed")),
        ({"exit_code": 137, "oom_killed": True, "timed_out": True}, (INFRA, "oom_killed")),
        (
            {"exit_code": 0, "oom_killed": True, "result": {"outcome": "pass"}},
            (INFRA, "oom_killed"),
        ),
        ({"exit_code": 1, "result": {"outcome": "pass"}}, (PASS, "result")),
        ({"exit_code": 0, "result": {"outcome": "fail"}}, (FAIL, "result")),
        ({"exit_code": 0, "result": {"outcome": "infra_error"}}, (INFRA, "reported")),
        ({"exit_code": 143, "timed_out": True}, (INFRA, "timeout")),
        ({"exit_code": 143, "timed_out": True, "timeout_is": "fail"}, (FAIL, "timeout")),
        ({"exit_code": None, "timed_out": True}, (INFRA, "timeout")),
        ({"exit_code": 143, "timed_out": True, "result": {"outcome": "pass"}}, (PASS, "result")),
    ],
)
def test_rows(facts: dict[str, Any], expected: tuple[Outcome, str]) -> None:
    """Each observation maps to the outcome and reason of its table row."""
    assert verdict(**facts) == expected


def test_custom_exit_codes() -> None:
    """grading.exitCodes decides which codes pass, fail and are infra errors."""
    grading = Grading(exit_codes=ExitCodes(pass_=[0, 10], fail=[20], infra_error=[3, 75]))
    assert verdict(exit_code=10, grading=grading) == (PASS, "exit_code")
    assert verdict(exit_code=20, grading=grading) == (FAIL, "exit_code")
    assert verdict(exit_code=3, grading=grading) == (INFRA, "reported")
    assert verdict(exit_code=1, grading=grading) == (FAIL, "exit_1")


def test_result_reason_becomes_the_message() -> None:
    """The result JSON's own reason is kept as the message (reasons stay a fixed set)."""
    found = classify_exit(exit_code=0, grading=GRADING, result={"outcome": "fail", "reason": "x"})
    assert found == Verdict(FAIL, "result", "x")


def test_table_rows_are_named_and_unique() -> None:
    """The table is a list of named rows, OOM first and the catch-all last."""
    names = [rule.name for rule in EXIT_RULES]
    assert len(names) == len(set(names))
    assert names[0] == "oom_killed" and names[-1] == "other_exit"


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    exit_code=st.none() | st.integers(-64, 255),
    result=st.none() | st.sampled_from(["pass", "fail", "infra_error"]),
    oom_killed=st.booleans(),
    timed_out=st.booleans(),
    timeout_is=st.sampled_from(["infra_error", "fail"]),
)
def test_invariants(
    exit_code: int | None, result: str | None, oom_killed: bool, timed_out: bool, timeout_is: Any
) -> None:
    """OOM always wins; else a result decides; a pass only ever comes from a result or code 0."""
    found = classify_exit(
        exit_code=exit_code,
        grading=GRADING,
        result=None if result is None else {"outcome": result},
        oom_killed=oom_killed,
        timed_out=timed_out,
        timeout_is=timeout_is,
    )
    if oom_killed:
        assert (found.outcome, found.reason) == (INFRA, "oom_killed")
    elif result is not None:
        assert found.outcome == Outcome(result)
    elif timed_out:
        assert found.reason == "timeout"
    if found.outcome is PASS:
        assert result == "pass" or (exit_code == 0 and not timed_out and not oom_killed)
