"""Running a grader on a transcript, the one step `passhat trial` and `passhat regrade` share.

A grader is a shell command. It reads the transcript on stdin (its path is also in
`PASSHAT_TRANSCRIPT`) and says pass or fail either by printing a result JSON as its last
line of output (`{"outcome": "pass", "score": 0.9, "reason": "..."}`) or by its exit code:
0 pass, 1 fail, 75 infra error. Any other exit means the grader itself broke: an infra
error (reason `grader_error`), retried and never scored, because nothing was learned
about the agent.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from passhat.trials.outcomes import EXIT_CODE, REPORTED, RESULT, Outcome
from passhat.trials.result import parse_result

__all__ = ["GRADER_ERROR", "Grade", "run_grader"]

# infra_error: the grader crashed or printed nothing usable
GRADER_ERROR = "grader_error"


@dataclass(frozen=True)
class Grade:
    """What a grader said about one transcript."""

    outcome: Outcome
    reason: str
    score: float | None = None
    message: str = ""

    def as_result(self) -> dict[str, Any]:
        """The result JSON fields of this grade."""
        result: dict[str, Any] = {
            "outcome": str(self.outcome),
            "reason": self.message or self.reason,
        }
        if self.score is not None:
            result["score"] = self.score
        return result


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def run_grader(
    command: str,
    transcript: str,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Grade:
    """Grade the transcript file at `transcript` with the shell command `command`."""
    grader_env = dict(os.environ if env is None else env)
    grader_env["PASSHAT_TRANSCRIPT"] = transcript
    try:
        with open(transcript, "rb") as stdin:
            done = subprocess.run(
                ["/bin/sh", "-c", command],
                stdin=stdin,
                capture_output=True,
                env=grader_env,
                timeout=timeout,
                check=False,
            )
    except subprocess.TimeoutExpired:
        return Grade(Outcome.INFRA_ERROR, GRADER_ERROR, message="the grader timed out")
    except OSError as err:
        return Grade(Outcome.INFRA_ERROR, GRADER_ERROR, message=f"cannot run the grader: {err}")
    result = parse_result(_last_line(done.stdout.decode("utf-8", "replace")))
    if result is not None:
        outcome = Outcome(result["outcome"])
        score = result.get("score")
        return Grade(
            outcome,
            REPORTED if outcome is Outcome.INFRA_ERROR else RESULT,
            float(score) if score is not None else None,
            str(result.get("reason") or ""),
        )
    code = done.returncode
    if code == 0:
        return Grade(Outcome.PASS, EXIT_CODE)
    if code == 1:
        return Grade(Outcome.FAIL, EXIT_CODE)
    if code == 75:
        return Grade(Outcome.INFRA_ERROR, REPORTED, message="the grader exited 75")
    stderr = _last_line(done.stderr.decode("utf-8", "replace"))[:200]
    return Grade(
        Outcome.INFRA_ERROR, GRADER_ERROR, message=f"the grader exited {code}: {stderr}".rstrip()
    )
