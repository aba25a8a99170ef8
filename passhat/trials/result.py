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

__all__ = ["MAX_RESULT_BYTES", "OUTCOMES", "parse_result"]

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


def _finite(number: int | float) -> bool:
    # NB: an integer too large for a float (JSON allows any number of digits) is invalid
    try:
        return math.isfinite(number)
    except OverflowError:
        return False
