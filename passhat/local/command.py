"""The `passhat run` subcommand: its options, for `passhat.cli` to mount.

Imports nothing heavy until the command runs, so other subcommands start fast.
"""

from __future__ import annotations

import argparse

__all__ = ["add_run_parser"]

FORMATS = ("text", "json", "json-full", "markdown", "html")


def _main(args: argparse.Namespace) -> int:
    from passhat.local.driver import RunOptions, run

    return run(
        RunOptions(
            eval_path=args.eval,
            out=args.out,
            resume=args.resume,
            format=args.format,
            metrics_textfile=args.metrics_textfile,
            quiet=args.quiet,
        )
    )


def add_run_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `passhat run` to the CLI; the parser's `func` returns the exit code."""
    parser = subparsers.add_parser(
        "run",
        help="run a ConsistencyEval locally as isolated subprocesses",
        description="Run every task of the eval `trials` times on this machine (no cluster), "
        "each attempt sandboxed, and report pass^k, pass@k, mean pass rate, flaky tasks and "
        "the infra-error rate. Exit 0 done (gate passed or no gate), 1 gate failed (also "
        "stopped at spec.budget with a gate), 2 bad spec or usage, 3 not finished (stopped "
        "at spec.activeDeadlineSeconds, or at spec.budget without a gate), 130 interrupted "
        "(continue with --resume; docs/scoring.md#exit-codes).",
    )
    parser.add_argument("eval", metavar="EVAL.yaml", help="the ConsistencyEval file")
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="run directory: trials.jsonl, spec.yaml, transcripts/ (default: a new "
        "./passhat-runs/<metadata.name>/<UTC start time> for every run); must not hold a "
        "run unless --resume",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out (default: the latest run of this eval): run only "
        "the attempts trials.jsonl does not have",
    )
    parser.add_argument(
        "--format", choices=FORMATS, default="text", help="report format on stdout (text)"
    )
    parser.add_argument(
        "--metrics-textfile",
        metavar="PATH",
        help="also write the Prometheus metrics (namespace=local) to this textfile",
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    parser.set_defaults(func=_main)
