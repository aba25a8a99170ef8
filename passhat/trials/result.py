"""The optional result JSON a trial writes to `$PASSHAT_RESULT`.

A trial may decide its own outcome (a grader ran inside it) instead of relying on its exit
code. In a pod the file is the termination message, so the text may be anything the
kubelet put there (logs on error, truncated text); parsing therefore never raises, it
returns None for anything that is not a valid result.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["MAX_RESULT_BYTES", "OUTCOMES", "parse_result", "result_problem"]

# The kubelet truncates termination messages at 4096 bytes.
MAX_RESULT_BYTES = 4096
OUTCOMES = frozenset({"pass", "fail", "infra_error"})


def parse_result(text: str | bytes | None) -> dict[str, Any] | None:
    """The result object when `text` is a valid result JSON, else None.

    Valid means: a JSON object whose `outcome` is "pass", "fail" or "infra_error";
    `reason`, when present, a string; `score`, when present, a finite number (one a float
    can hold: a JSON integer of hundreds of digits is not) or null.
    Other keys (e.g. `transcript`) are kept as they are.
    """
    if text is None:
        return None
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("outcome") not in OUTCOMES:
        return None
    if "reason" in data and not isinstance(data["reason"], str):
        return None
    score = data.get("score")
    if score is not None and (
        isinstance(score, bool) or not isinstance(score, int | float) or not _finite(score)
    ):
        return None
    return data


def result_problem(text: bytes) -> str | None:
    """Why the bytes an attempt left in its own `$PASSHAT_RESULT` are not a valid result
    JSON (None when they are one, or are only whitespace).

    `passhat run` still ignores such a file, as documented (the exit code decides), but a
    user whose agent wrote `{"outcome": "passed"}` must not read a silent pass: the
    journal and stderr say why the file was ignored. (A pod's termination message may be
    logs, so the cluster path keeps ignoring it quietly.)
    """
    if not text.strip() or parse_result(text) is not None:
        return None
    try:
        data = json.loads(text.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return "not JSON"
    if not isinstance(data, dict):
        return f"not a JSON object (a {type(data).__name__})"
    choices = ", ".join(sorted(OUTCOMES))
    if "outcome" not in data:
        return f"no outcome (one of {choices})"
    if data["outcome"] not in OUTCOMES:
        return f"outcome: {json.dumps(data['outcome'])[:80]} is not one of {choices}"
    if "reason" in data and not isinstance(data["reason"], str):
        return "reason: not a string"
    return f"score: {json.dumps(data.get('score'))[:80]} is not a finite number or null"


def _finite(number: int | float) -> bool:
    # NB: an integer too large for a float (JSON allows any number of digits) is invalid
    try:
        return math.isfinite(number)
    except OverflowError:
        return False
