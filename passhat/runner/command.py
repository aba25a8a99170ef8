"""The `passhat trial` subcommand, for `passhat.cli` to mount (`passhat regrade` reads any
source, so it lives with `passhat.operator.records_command`).

`passhat trial` starts every trial of a pod, so nothing heavy is imported until needed.
"""

from __future__ import annotations

import argparse

from passhat.api.errors import UsageError

__all__ = ["add_trial_parser"]


def _trial(args: argparse.Namespace) -> int:
    from passhat.runner.trial import run_trial

    agent = list(args.agent)
    if agent and agent[0] == "--":
        agent = agent[1:]
    if not agent:
        raise UsageError("passhat trial: give the agent command after --")
    return run_trial(agent, grader=args.grader, transcript=args.transcript, result_path=args.result)


def add_trial_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `passhat trial [--grader CMD] -- AGENT ...` to the CLI."""
    parser = subparsers.add_parser(
        "trial",
        help="run one trial: the agent, then the grader on its transcript",
        description="Run AGENT (its output copied to stdout and to a transcript file), grade "
        "the transcript with --grader (stdin, or the path in $PASSHAT_TRANSCRIPT; it prints "
        "a result JSON or exits 0 pass / 1 fail / 75 infra error), write the result JSON "
        "to $PASSHAT_RESULT and exit 0 pass, 1 fail, 75 infra error.",
    )
    parser.add_argument("--grader", metavar="CMD", help="shell command grading the transcript")
    parser.add_argument("--transcript", metavar="PATH", help="where to keep the transcript")
    parser.add_argument(
        "--result", metavar="PATH", help="result JSON path (default $PASSHAT_RESULT)"
    )
    parser.add_argument("agent", nargs=argparse.REMAINDER, metavar="-- AGENT ...")
    parser.set_defaults(func=_trial)
