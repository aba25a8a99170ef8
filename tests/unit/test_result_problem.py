"""Why a `$PASSHAT_RESULT` file is not a result JSON (`passhat.trials.result.result_problem`)."""

from __future__ import annotations

import pytest

from passhat.trials.result import result_problem


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b"all good\n", "not JSON"),
        (b'["pass"]', "not a JSON object (a list)"),
        (b'{"score": 1}', "no outcome (one of fail, infra_error, pass)"),
        (b'{"outcome": "passed"}', 'outcome: "passed" is not one of fail, infra_error, pass'),
        (b'{"outcome": "pass", "reason": 3}', "reason: not a string"),
        (b'{"outcome": "pass", "score": "high"}', 'score: "high" is not a finite number or null'),
        (b"\xff\xfe", "not JSON"),
    ],
)
def test_names_what_is_wrong(text: bytes, problem: str) -> None:
    assert result_problem(text) == problem


@pytest.mark.parametrize("text", [b"", b" \n", b'{"outcome": "fail", "score": 0.5}'])
def test_no_problem_for_a_valid_result_or_nothing(text: bytes) -> None:
    assert result_problem(text) is None
