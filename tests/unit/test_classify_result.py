"""parse_result accepts only valid result JSON and never raises."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from passhat.trials import parse_result


@pytest.mark.parametrize(
    "text",
    [
        '{"outcome": "pass"}',
        '{"outcome": "fail", "score": 0.25, "reason": "wrong refund", "transcript": "t.txt"}',
        b'{"outcome": "infra_error", "score": null}',
        '  {"outcome": "pass"}\n',
    ],
)
def test_valid(text: str | bytes) -> None:
    """A JSON object with a known outcome (and well-typed reason/score) is a result."""
    result = parse_result(text)
    assert result is not None and result["outcome"] in {"pass", "fail", "infra_error"}


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "pass",
        "[]",
        '{"outcome": "PASS"}',
        '{"outcome": "passed"}',
        '{"status": "pass"}',
        '{"outcome": "pass", "reason": 3}',
        '{"outcome": "pass", "score": "high"}',
        '{"outcome": "pass", "score": true}',
        '{"outcome": "pass", "score": NaN}',
        '{"outcome": "pass", "score": ' + "9" * 400 + "}",
        '{"outcome": "fail", "score": -' + "1" * 400 + "}",
        b"\xff\xfe",
        '{"outcome": "pass"',
        "Traceback (most recent call last):\n  ...",
    ],
)
def test_invalid(text: str | bytes | None) -> None:
    """Anything else (logs, truncated JSON, wrong types) is None."""
    assert parse_result(text) is None


@settings(deadline=None, derandomize=True)
@given(st.one_of(st.text(), st.binary()))
def test_never_raises(text: str | bytes) -> None:
    """Arbitrary termination-message text never makes the parser raise."""
    parse_result(text)
