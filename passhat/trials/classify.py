"""The process-side rows of the outcome table: how a finished trial process is graded.

Both executors end up here: the local executor with what it saw of a subprocess, the pod
classifier with what the kubelet reported of the first container. Keeping the rows in one
ordered table (most specific first) is what makes a local run and a cluster run of the
same spec count the same attempt the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from passhat.trials.outcomes import (
    EXIT_CODE,
    LOST,
    OOM_KILLED,
    REPORTED,
    RESULT,
    TIMEOUT,
    Outcome,
    Verdict,
    exit_reason,
)

if TYPE_CHECKING:
    # NB: annotations only; importing the pydantic models costs `passhat trial` ~0.3 s
    from passhat.api.spec import Grading

__all__ = ["EXIT_RULES", "ExitFacts", "Rule", "TimeoutIs", "classify_exit", "normalize_exit_code"]

TimeoutIs = Literal["infra_error", "fail"]
Facts = TypeVar("Facts")

# Result JSON reasons longer than this are cut in the verdict message.
_MAX_MESSAGE = 200


@dataclass(frozen=True)
class Rule(Generic[Facts]):
    """One row of a classification table: when it applies and what it decides."""

    name: str
    applies: Callable[[Facts], bool]
    verdict: Callable[[Facts], Verdict]


@dataclass(frozen=True)
class ExitFacts:
    """What was observed of a finished trial process."""

    exit_code: int | None
    grading: Grading
    result: Mapping[str, Any] | None
    oom_killed: bool
    timed_out: bool
    timeout_is: TimeoutIs


def normalize_exit_code(code: int) -> int:
    """Shell convention: a process killed by signal N (Python's -N) exited 128 + N."""
    return 128 - code if code < 0 else code


def _from_result(facts: ExitFacts) -> Verdict:
    assert facts.result is not None
    outcome = Outcome(facts.result["outcome"])
    message = str(facts.result.get("reason") or "")[:_MAX_MESSAGE]
    reason = REPORTED if outcome is Outcome.INFRA_ERROR else RESULT
    return Verdict(outcome, reason, message)


def _timeout(facts: ExitFacts) -> Verdict:
    outcome = Outcome.FAIL if facts.timeout_is == "fail" else Outcome.INFRA_ERROR
    return Verdict(outcome, TIMEOUT, "the trial ran past timeoutSeconds")


def _code(facts: ExitFacts) -> int:
    assert facts.exit_code is not None
    return normalize_exit_code(facts.exit_code)


def _listed(facts: ExitFacts, outcome: Outcome) -> Verdict:
    return Verdict(outcome, EXIT_CODE, f"exit code {_code(facts)}")


# The rows, most specific first; the first that applies decides.
EXIT_RULES: tuple[Rule[ExitFacts], ...] = (
    # NB: a result JSON can never turn an OOM kill into a pass; OOM wins over everything.
    Rule(
        "oom_killed",
        lambda f: f.oom_killed,
        lambda f: Verdict(Outcome.INFRA_ERROR, OOM_KILLED, "killed for exceeding its memory limit"),
    ),
    Rule("result_json", lambda f: f.result is not None, _from_result),
    Rule("timeout", lambda f: f.timed_out, _timeout),
    Rule(
        "exit_code_unknown",
        lambda f: f.exit_code is None,
        lambda f: Verdict(Outcome.INFRA_ERROR, LOST, "the exit code is unknown"),
    ),
    Rule(
        "exit_code_infra_error",
        lambda f: _code(f) in f.grading.exit_codes.infra_error,
        lambda f: Verdict(Outcome.INFRA_ERROR, REPORTED, f"exit code {_code(f)}"),
    ),
    Rule(
        "exit_code_pass",
        lambda f: _code(f) in f.grading.exit_codes.pass_,
        lambda f: _listed(f, Outcome.PASS),
    ),
    Rule(
        "exit_code_fail",
        lambda f: _code(f) in f.grading.exit_codes.fail,
        lambda f: _listed(f, Outcome.FAIL),
    ),
    Rule(
        "other_exit",
        lambda f: True,
        lambda f: Verdict(Outcome.FAIL, exit_reason(_code(f)), f"exit code {_code(f)}"),
    ),
)


def classify_exit(
    *,
    exit_code: int | None,
    grading: Grading,
    result: Mapping[str, Any] | None = None,
    oom_killed: bool = False,
    timed_out: bool = False,
    timeout_is: TimeoutIs = "infra_error",
) -> Verdict:
    """The verdict on a finished trial process.

    `exit_code` in shell convention (negative codes, Python's "killed by signal N", are
    read as 128 + N; None when unknown); `result` the parsed result JSON (see
    `passhat.trials.result.parse_result`) or None; `oom_killed` whether any process of the
    trial was OOM-killed; `timed_out` whether the wall-clock limit killed it.
    """
    facts = ExitFacts(exit_code, grading, result, oom_killed, timed_out, timeout_is)
    for rule in EXIT_RULES:
        if rule.applies(facts):
            return rule.verdict(facts)
    raise AssertionError("the last rule always applies")
