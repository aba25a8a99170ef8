"""The `passhat trial` subcommand, for `passhat.cli` to mount (`passhat regrade` reads any
source, so it lives with `passhat.operator.records_command`).

`passhat trial` starts every trial of a pod, so nothing heavy is imported until needed.
"""

from __future__ import annotations

import argparse

from passhat.api.errors import UsageError

__all__ = ["add_trial_parser"]


def _inspect_trial(args: argparse.Namespace, extra: list[str]) -> int:
    import os
    import tempfile
    from pathlib import Path

    from passhat.harness.inspect_task import grade_log, inspect_command
    from passhat.runner.trial import run_trial

    if args.grader:
        raise UsageError("passhat trial: --inspect grades from the Inspect log, not --grader")
    sample_id = os.environ.get("PASSHAT_TASK_ID")
    if not sample_id:
        raise UsageError("passhat trial --inspect: PASSHAT_TASK_ID (the sample id) is not set")
    with tempfile.TemporaryDirectory(prefix="passhat-inspect-") as log_dir:
        command = inspect_command(
            args.inspect,
            sample_id=sample_id,
            log_dir=log_dir,
            model=args.model,
            extra=extra,
            inspect=args.inspect_command,
        )
        return run_trial(
            command,
            transcript=args.transcript,
            result_path=args.result,
            judge=lambda _: grade_log(Path(log_dir), sample_id=sample_id, scorer=args.scorer),
        )


def _trial(args: argparse.Namespace) -> int:
    from passhat.runner.trial import run_trial

    agent = list(args.agent)
    if agent and agent[0] == "--":
        agent = agent[1:]
    if args.inspect:
        return _inspect_trial(args, agent)
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
    inspect = parser.add_argument_group(
        "Inspect",
        "--inspect TASK runs `inspect eval TASK` for the sample $PASSHAT_TASK_ID, one epoch, "
        "and grades from its log (a sample error is an infra error); what follows -- is "
        "passed to inspect eval",
    )
    inspect.add_argument("--inspect", metavar="TASK", help="an Inspect task, FILE[@name]")
    inspect.add_argument(
        "--model", default="none", help="the --model of inspect eval (default: none)"
    )
    inspect.add_argument("--scorer", metavar="NAME", help="the deciding scorer (default: first)")
    inspect.add_argument(
        "--inspect-command",
        default="inspect",
        metavar="PATH",
        help="the inspect command (default: inspect, on PATH)",
    )
    parser.add_argument("agent", nargs=argparse.REMAINDER, metavar="-- AGENT ...")
    parser.set_defaults(func=_trial)
