"""`passhat trial [--grader CMD] -- AGENT ...`: the wrapper a trial image runs.

An agent eval usually has two halves, the agent run and its grading; passhat needs one
process with one answer. This wrapper runs the agent (its output copied to our stdout, so
`kubectl logs` and the local transcript keep it, and to a transcript file), runs the
grader on that transcript, writes the result JSON to `$PASSHAT_RESULT` (kept under 4 KiB:
in a pod it is the termination message) and exits with the mapped code: pass 0, fail 1,
infra error 75. An agent that exits 75 reports an infra error itself and is not graded.
SIGTERM and SIGINT are passed on to the agent (in a pod only PID 1 gets them).

What the trial spent travels in the same result JSON: the agent gets a `$PASSHAT_RESULT`
of its own, and the `usage`, `cost_usd` and `metrics` it writes there are copied into the
result as written (passhat checks them when it records the attempt: a bad value is
reported naming the field, never dropped silently here). In a pod the wrapper adds what
the container used (`resources`, from its cgroup: `passhat.runner.resources`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import IO, Any, BinaryIO

from passhat.grading.grader import Grade, run_grader
from passhat.runner.resources import container_resources, in_pod
from passhat.trials.outcomes import EXIT_CODE, REPORTED, Outcome, exit_reason
from passhat.trials.result import MAX_RESULT_BYTES

__all__ = ["EXIT_FOR", "result_json", "run_trial"]

EXIT_FOR = {Outcome.PASS: 0, Outcome.FAIL: 1, Outcome.INFRA_ERROR: 75}
_INFRA = 75


def _agent_grade(code: int) -> Grade:
    if code == 0:
        return Grade(Outcome.PASS, EXIT_CODE)
    if code == 1:
        return Grade(Outcome.FAIL, EXIT_CODE)
    if code == _INFRA:
        return Grade(Outcome.INFRA_ERROR, REPORTED, message="the agent exited 75")
    return Grade(Outcome.FAIL, exit_reason(code), message=f"the agent exited {code}")


# The keys of the agent's own result JSON that the wrapper's result carries, and the most
# room they may take of the result's 4 KiB.
SPEND_KEYS = ("usage", "cost_usd", "metrics")
MAX_SPEND_BYTES = 2048


def result_json(
    grade: Grade,
    *,
    agent_exit_code: int,
    transcript: bytes,
    extra: dict[str, Any] | None = None,
) -> str:
    """The result JSON for `grade` (plus `extra`: what the trial spent and used), with as
    much of the transcript's end as fits in 4 KiB."""
    result: dict[str, Any] = grade.as_result()
    result["agent_exit_code"] = agent_exit_code
    result.update(extra or {})
    budget = MAX_RESULT_BYTES - len(json.dumps(result)) - len(', "transcript": ""') - 16
    excerpt = transcript[-max(0, budget) :].decode("utf-8", "replace") if budget > 0 else ""
    while True:
        text = json.dumps({**result, "transcript": excerpt})
        if len(text.encode()) < MAX_RESULT_BYTES:
            return text
        excerpt = excerpt[len(excerpt) // 8 + 1 :]


def _tail(path: str, size: int = MAX_RESULT_BYTES) -> bytes:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - size))
            return handle.read()
    except OSError:
        return b""


def agent_spend(path: str) -> dict[str, Any]:
    """The spend keys of the JSON object the agent wrote to `path` (none: no object)."""
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read(MAX_RESULT_BYTES * 4))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    spend = {key: data[key] for key in SPEND_KEYS if key in data}
    size = len(json.dumps(spend))
    if size > MAX_SPEND_BYTES:
        # NB: passed on as a value passhat refuses, naming the problem, not dropped silently
        return {
            "metrics": f"the agent's usage, cost_usd and metrics take {size} bytes, "
            f"more than {MAX_SPEND_BYTES}"
        }
    return spend


def _copy(source: IO[bytes], targets: list[BinaryIO]) -> None:
    while chunk := os.read(source.fileno(), 65536):
        for target in targets:
            with contextlib.suppress(OSError):
                target.write(chunk)
                target.flush()


def run_trial(
    agent: list[str],
    *,
    grader: str | None = None,
    transcript: str | None = None,
    result_path: str | None = None,
    echo: BinaryIO | None = None,
    judge: Callable[[int], Grade] | None = None,
) -> int:
    """Run `agent`, grade its transcript, write the result JSON; the exit code (0, 1, 75).

    `judge`, given the agent's exit code, grades instead of the exit code and the grader:
    a built-in result adapter (`passhat trial --inspect` reads the Inspect log).
    """
    transcript = transcript or os.path.join(
        tempfile.gettempdir(), f"passhat-transcript-{os.getpid()}.log"
    )
    result_path = result_path or os.environ.get("PASSHAT_RESULT")
    echo = echo if echo is not None else sys.stdout.buffer
    # NB: the agent's own result JSON, for what it spent (never its outcome: graded here)
    own_result = f"{transcript}.result.json"
    with contextlib.suppress(OSError):
        os.unlink(own_result)
    env = {**os.environ, "PASSHAT_RESULT": own_result}
    try:
        with open(transcript, "wb") as log:
            try:
                process = subprocess.Popen(
                    agent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
                )
            except OSError as err:
                # NB: else a typo in the agent command is a silent exit 75
                print(
                    f"passhat trial: cannot run the agent {agent[0]!r}: {err.strerror or err}",
                    file=sys.stderr,
                )
                raise
            previous = {
                sig: signal.signal(sig, lambda signum, _: process.send_signal(signum))
                for sig in (signal.SIGTERM, signal.SIGINT)
            }
            try:
                assert process.stdout is not None
                _copy(process.stdout, [log, echo])
                code = process.wait()
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
    except OSError as err:
        if err.filename != agent[0]:  # NB: not the agent: the transcript file
            print(
                f"passhat trial: cannot write the transcript {transcript}: {err}", file=sys.stderr
            )
        grade = Grade(Outcome.INFRA_ERROR, REPORTED, message=f"cannot run the agent: {err}")
        code = 127
    else:
        code = 128 - code if code < 0 else code
        grade = _agent_grade(code)
        if judge is not None:
            grade = judge(code)
        elif grader is not None and code != _INFRA:
            grade = run_grader(grader, transcript)
    if result_path:
        extra = agent_spend(own_result)
        used = container_resources() if in_pod() else None
        if used is not None:
            extra["resources"] = used.as_record()
        text = result_json(grade, agent_exit_code=code, transcript=_tail(transcript), extra=extra)
        with contextlib.suppress(OSError), open(result_path, "w") as handle:
            handle.write(text)
    return EXIT_FOR[grade.outcome]
