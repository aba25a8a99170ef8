"""Running a grader on a transcript, the one step `passhat trial` and `passhat regrade` share.

A grader is a shell command. It reads the transcript on stdin (its path is also in
`PASSHAT_TRANSCRIPT`) and says pass or fail either by printing a result JSON as its last
line of output (`{"outcome": "pass", "score": 0.9, "reason": "..."}`) or by its exit code:
0 pass, 1 fail, 75 infra error. Any other exit means the grader itself broke: an infra
error (reason `grader_error`), retried and never scored, because nothing was learned
about the agent.

With a `timeout` (regrading always gives one) the grader runs in its own session and a
grader that outlives it is killed with everything it started (`sh -c 'sleep 9; ...'`
leaves `sleep` holding the output pipe otherwise): a hanging grader is a grader error
after `timeout` seconds, never a wait without end. `GraderProcesses` lets a caller kill
every grader still running (an interrupted regrade leaves none behind).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from passhat.trials.outcomes import EXIT_CODE, REPORTED, RESULT, Outcome
from passhat.trials.result import parse_result

__all__ = ["GRADER_ERROR", "Grade", "GraderProcesses", "grade_of", "run_grader"]

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


class GraderProcesses:
    """The grader sessions running now, so that a stopped regrade can kill them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: set[int] = set()
        self._stopped = False

    def add(self, pid: int) -> bool:
        """Track the session led by `pid`; False once `kill_all` was called."""
        with self._lock:
            if not self._stopped:
                self._sessions.add(pid)
            return not self._stopped

    def discard(self, pid: int) -> None:
        """Forget the session led by `pid` (it was reaped)."""
        with self._lock:
            self._sessions.discard(pid)

    def kill_all(self) -> None:
        """Kill every tracked session; graders started after this are killed at once."""
        with self._lock:
            self._stopped = True
            sessions = list(self._sessions)
        for pid in sessions:
            _kill_session(pid)


def _kill_session(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


# How long the output pipes may stay open after the grader's session was killed (a
# grandchild that left the session can hold them; its output is then dropped).
_DRAIN_S = 5.0


def _run(
    command: str,
    transcript: str,
    env: dict[str, str],
    timeout: float | None,
    processes: GraderProcesses | None,
) -> tuple[int, bytes, bytes] | None:
    """(exit code, stdout, stderr) of the grader, None when it timed out (and was killed)."""
    with open(transcript, "rb") as stdin:
        process = subprocess.Popen(
            ["/bin/sh", "-c", command],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=timeout is not None,
        )
    # NB: without a timeout (passhat trial) the grader stays in the trial's process group,
    # so whatever stops the trial (a local timeout, SIGKILL of the group) stops it too
    tracked = processes if timeout is not None else None
    try:
        if tracked is not None and not tracked.add(process.pid):
            _kill_session(process.pid)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_session(process.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.communicate(timeout=_DRAIN_S)
            return None
        return process.returncode, out, err
    except BaseException:
        if timeout is not None:
            _kill_session(process.pid)
        process.kill()
        raise
    finally:
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
        process.wait()
        if tracked is not None:
            tracked.discard(process.pid)


def run_grader(
    command: str,
    transcript: str,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    processes: GraderProcesses | None = None,
) -> Grade:
    """Grade the transcript file at `transcript` with the shell command `command`.

    `timeout`: seconds before the grader (and all it started) is killed, a grader error;
    `processes`: where to track the grader's session while it runs (needs a timeout)."""
    grader_env = dict(os.environ if env is None else env)
    grader_env["PASSHAT_TRANSCRIPT"] = transcript
    try:
        done = _run(command, transcript, grader_env, timeout, processes)
    except OSError as err:
        return Grade(Outcome.INFRA_ERROR, GRADER_ERROR, message=f"cannot run the grader: {err}")
    if done is None:
        return Grade(
            Outcome.INFRA_ERROR,
            GRADER_ERROR,
            message=f"the grader timed out after {timeout:g} s (killed)",
        )
    code, stdout, stderr = done
    return grade_of(
        code, stdout.decode("utf-8", "replace"), stderr=stderr.decode("utf-8", "replace")
    )


def grade_of(code: int, output: str, *, stderr: str | None = None) -> Grade:
    """What a grader that exited `code` after printing `output` said: its last output
    line's result JSON, else its exit code (0 pass, 1 fail, 75 infra error, any other a
    grader error quoting the last line of `stderr`, or of `output` when there is none:
    a grader pod's log holds both). Negative codes are signals (a killed process)."""
    result = parse_result(_last_line(output))
    if result is not None:
        outcome = Outcome(result["outcome"])
        score = result.get("score")
        return Grade(
            outcome,
            REPORTED if outcome is Outcome.INFRA_ERROR else RESULT,
            float(score) if score is not None else None,
            str(result.get("reason") or ""),
        )
    if code == 0:
        return Grade(Outcome.PASS, EXIT_CODE)
    if code == 1:
        return Grade(Outcome.FAIL, EXIT_CODE)
    if code == 75:
        return Grade(Outcome.INFRA_ERROR, REPORTED, message="the grader exited 75")
    last = _last_line(output if stderr is None else stderr)[:200]
    how = f"was killed by signal {-code}" if code < 0 else f"exited {code}"
    return Grade(Outcome.INFRA_ERROR, GRADER_ERROR, message=f"the grader {how}: {last}".rstrip())
