"""The `passhat trial` and `passhat regrade` subcommands, for `passhat.cli` to mount.

`passhat trial` starts every trial of a pod, so nothing heavy is imported until needed.
"""

from __future__ import annotations

import argparse
import sys

from passhat.api.errors import UsageError

__all__ = ["add_regrade_parser", "add_trial_parser"]


def _trial(args: argparse.Namespace) -> int:
    from passhat.runner.trial import run_trial

    agent = list(args.agent)
    if agent and agent[0] == "--":
        agent = agent[1:]
    if not agent:
        raise UsageError("passhat trial: give the agent command after --")
    return run_trial(agent, grader=args.grader, transcript=args.transcript, result_path=args.result)


def _regrade(args: argparse.Namespace) -> int:
    from passhat.runner.regrade import regrade, render_regrade

    result = regrade(args.dir, args.grader, sample=args.sample, times=args.times, seed=args.seed)
    sys.stdout.write(render_regrade(result, args.format))
    return 0


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


def add_regrade_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `passhat regrade DIR --grader CMD --sample N --times R [--seed S]` to the CLI."""
    parser = subparsers.add_parser(
        "regrade",
        help="grade stored transcripts several times to measure grader noise",
        description="Grade a seeded sample of the transcripts of a passhat run directory R "
        "times each without rerunning the agent; report every transcript that got both a "
        "pass and a fail, and the noise rate.",
    )
    parser.add_argument("dir", metavar="DIR", help="run directory (with transcripts/)")
    parser.add_argument("--grader", metavar="CMD", required=True, help="grader shell command")
    parser.add_argument("--sample", metavar="N", type=int, help="transcripts to sample (all)")
    parser.add_argument("--times", metavar="R", type=int, default=3, help="gradings each (3)")
    parser.add_argument("--seed", metavar="S", type=int, default=0, help="sampling seed (0)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(func=_regrade)
