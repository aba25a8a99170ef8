"""The `passhat score` and `passhat power` subcommands (and `compare`'s options), for the CLI.

They read trial files (any format `passhat.trials.readers` knows), compute with
`passhat.stats` and print with this package; a bad file or option is a PasshatError, which
the CLI prints as one line with exit code 2.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from passhat.api.errors import UsageError
from passhat.stats import KIntervals, TaskTally, default_ks
from passhat.stats.bootstrap import DEFAULT_RESAMPLES

__all__ = [
    "add_compare_options",
    "add_power_parser",
    "add_reader_options",
    "add_report_options",
    "add_score_parser",
    "finite_float",
    "fraction",
    "ks_for",
    "output_report",
    "plot_path",
    "positive_int",
    "reader_options",
    "report_intervals",
    "resample_count",
    "seed",
    "write_output",
]

MAX_RESAMPLES = 1_000_000
MAX_SEED = 2**32 - 1
PLOT_SUFFIXES = (".png", ".svg", ".pdf")

if TYPE_CHECKING:
    from passhat.trials.readers import ReadOptions
    from passhat.trials.usage import UsageSummary

    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1 (`--k 0` is a usage error)."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def resample_count(text: str) -> int:
    """An argparse type: resamples, 1..MAX_RESAMPLES (a billion would exhaust memory)."""
    value = positive_int(text)
    if value > MAX_RESAMPLES:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_RESAMPLES}, got {value}")
    return value


def seed(text: str) -> int:
    """An argparse type: a random seed, 0..2^32-1 (numpy refuses negative seeds)."""
    value = _integer(text)
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be between 0 and {MAX_SEED}, got {value}")
    return value


def finite_float(text: str) -> float:
    """An argparse type: a finite number (`inf` and `nan` are usage errors)."""
    value = _number(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def plot_path(text: str) -> str:
    """An argparse type: where --plot writes, a file ending in .png, .svg or .pdf.

    matplotlib appends `.png` to a name without a suffix (`--plot /tmp` wrote `/tmp.png`),
    so the suffix is required: the file written is the one named.
    """
    if text.endswith("/") or Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory, expected a file name")
    if Path(text).suffix.lower() not in PLOT_SUFFIXES:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a file name ending in {', '.join(PLOT_SUFFIXES)}"
        )
    return text


def fraction(text: str) -> float:
    """An argparse type: a number strictly between 0 and 1 (a level, alpha, power)."""
    value = _number(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


def ks_for(requested: Sequence[int] | None, tallies: Sequence[TaskTally]) -> list[int]:
    """The --k values asked for, else the default ks of the most graded trials of a task."""
    if requested:
        return sorted(set(requested))
    most = max((t.graded for t in tallies), default=0)
    return default_ks(most) if most >= 1 else [1]


def write_output(text: str, out: str | None) -> None:
    """Write a report to stdout, or to `out` (UsageError when it cannot be written)."""
    if out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(out).write_text(text, encoding="utf-8")
    except OSError as err:
        raise UsageError(f"--out {out}: cannot write: {err.strerror}") from None
    print(f"passhat: wrote {out}", file=sys.stderr)


def _k_option(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--k", type=positive_int, action="append", metavar="K", help=help)


def _output_options(
    parser: argparse.ArgumentParser, formats: Sequence[str], help: str | None = None
) -> None:
    parser.add_argument(
        "--format", default="text", choices=formats, help=help or "report format (text)"
    )
    parser.add_argument("--out", metavar="PATH", help="write the report here, not to stdout")


def _interval_options(parser: argparse.ArgumentParser, *, level_help: str = "(0.95)") -> None:
    parser.add_argument(
        "--seed", type=seed, default=0, metavar="S", help="seed of the resampling (0)"
    )
    parser.add_argument(
        "--resamples",
        type=resample_count,
        metavar="N",
        help=f"bootstrap / permutation resamples (at most {MAX_RESAMPLES})",
    )
    parser.add_argument(
        "--level", type=fraction, default=0.95, metavar="L", help=f"interval level {level_help}"
    )


def output_report(
    tallies: Sequence[TaskTally],
    ks: Sequence[int],
    args: argparse.Namespace,
    *,
    title: str,
    infra_by_reason: Mapping[str, int] | None = None,
    intervals: Sequence[KIntervals] | None = None,
    strips: Mapping[str, str] | None = None,
    usage: UsageSummary | None = None,
) -> int:
    """Render the report of `tallies` as the options of add_report_options ask; exit code 0.

    Shared by `passhat score` and `passhat report`, so both print the same report for the
    same trials: intervals unless --format json or --no-intervals, --plot, --out; the
    infra errors by reason when the caller knows them. `intervals`: already computed
    (`passhat score --gate` shares its draw with the gate), else computed here.
    Each task's trial marks (`strips`) and what the attempts spent (`usage`) when the
    caller knows them.
    """
    from passhat.report import build_report, render_report, save_plot

    if args.format == "json":
        intervals = None
    elif intervals is None:
        intervals = report_intervals(tallies, ks, args)
    report = build_report(
        tallies,
        ks,
        title=title,
        intervals=intervals,
        infra_by_reason=infra_by_reason,
        strips=strips,
        usage=usage,
    )
    if args.plot:
        save_plot(report, args.plot)
    color = args.out is None and args.format == "text" and sys.stdout.isatty()
    write_output(render_report(report, args.format, color=color), args.out)
    return 0


def report_intervals(
    tallies: Sequence[TaskTally], ks: Sequence[int], args: argparse.Namespace
) -> list[KIntervals] | None:
    """The bootstrap intervals the options of add_report_options ask for (None with
    --no-intervals)."""
    from passhat.stats import bootstrap

    if args.no_intervals:
        return None
    resamples = args.resamples or DEFAULT_RESAMPLES
    return bootstrap(tallies, ks, resamples=resamples, seed=args.seed, level=args.level)


def add_report_options(
    parser: argparse.ArgumentParser, *, k_help: str, title_help: str, level_help: str = "(0.95)"
) -> None:
    """The options output_report reads: --k, --format, --out, --plot, --title, intervals."""
    from passhat.report import FORMATS

    _k_option(parser, k_help)
    _output_options(
        parser, FORMATS, "text (default), json (one 8-key object per k), json-full, markdown, html"
    )
    parser.add_argument(
        "--plot",
        type=plot_path,
        metavar="PNG",
        help="also draw the pass^k / pass@k curve (a .png, .svg or .pdf file)",
    )
    parser.add_argument("--title", help=title_help)
    parser.add_argument("--no-intervals", action="store_true", help="skip the bootstrap intervals")
    _interval_options(parser, level_help=level_help)


def add_reader_options(parser: argparse.ArgumentParser) -> None:
    """--scorer and --harness-errors: how harness files become outcomes (reader_options)."""
    parser.add_argument(
        "--scorer",
        metavar="NAME",
        help="Inspect logs: the scorer that decides pass or fail (default: the log's first)",
    )
    parser.add_argument(
        "--harness-errors",
        choices=("scored", "infra"),
        default="scored",
        help="errors a harness recorded in its results (tau-bench's caught exceptions, "
        "tau2-bench's user_error and unexpected_error): scored as the harness scores them "
        "(default) or infra errors, out of n and c",
    )


def reader_options(args: argparse.Namespace) -> ReadOptions:
    """The ReadOptions of the options add_reader_options added."""
    from passhat.trials.readers import ReadOptions

    return ReadOptions(scorer=args.scorer, harness_errors=args.harness_errors)


# NB: passhat.records.layout.TRIALS; report sits below records (docs/design.md, layers)
TRIALS = "trials.jsonl"


def run_files(paths: Sequence[str]) -> list[str]:
    """`paths` with each run directory or bundle (a directory holding `trials.jsonl`) as its
    `trials.jsonl`: its records carry the reasons and the cost. Any other directory (a
    tau2-bench dir layout) stays as it is, for the readers to recognise or refuse.

    `passhat run` prints its run directory as its last line; `compare`, `history`,
    `trials` and `transcripts` take that directory, so `score` and `power --pilot` do too.
    """
    return [
        os.path.join(path, TRIALS) if os.path.isfile(os.path.join(path, TRIALS)) else path
        for path in paths
    ]


def _score(args: argparse.Namespace) -> int:
    from passhat.stats import tally
    from passhat.trials.outcomes import infra_reasons
    from passhat.trials.readers import read_rows
    from passhat.trials.strips import strips_of
    from passhat.trials.usage import usage_of_files

    files = run_files(args.files)
    rows = read_rows(files, options=reader_options(args))
    tallies = tally((row.task_id, row.outcome.value) for row in rows)
    # NB: by reason only when the file says why: Inspect and tau-bench logs do not
    reasons = (
        infra_reasons((row.outcome.value, row.reason) for row in rows)
        if any(row.reason for row in rows)
        else None
    )
    ks = ks_for(args.k, tallies)
    most = max((t.graded for t in tallies), default=0)
    for k in ks:
        if k > most:
            print(
                f"passhat: note: k={k} is more than any task's {most} graded trials: "
                "every task needs more trials for it",
                file=sys.stderr,
            )
    title = args.title if args.title is not None else ", ".join(Path(f).name for f in args.files)
    strips = strips_of((row.task_id, row.trial, row.outcome.value) for row in rows)
    usage = usage_of_files(files)
    if args.gate is None:
        return output_report(
            tallies, ks, args, title=title, infra_by_reason=reasons, strips=strips, usage=usage
        )
    return _score_gated(
        tallies, ks, args, title=title, infra_by_reason=reasons, strips=strips, usage=usage
    )


def _score_gated(
    tallies: Sequence[TaskTally],
    ks: Sequence[int],
    args: argparse.Namespace,
    *,
    title: str,
    infra_by_reason: Mapping[str, int] | None,
    strips: Mapping[str, str] | None = None,
    usage: UsageSummary | None = None,
) -> int:
    """`passhat score --gate`: the report, then the gate's verdict as the exit code (0/1).

    The gate's interval is the report's (the same --seed, --resamples, --level), so a
    lowerBound gate compares the low end the report prints.
    """
    from passhat.api.gate import EXIT_GATE_FAILED, EXIT_PASSED, evaluate_gate, parse_gate
    from passhat.stats import bootstrap

    gate = parse_gate(args.gate, statistic=args.gate_statistic, confidence=args.level)
    resamples = args.resamples or DEFAULT_RESAMPLES
    wanted = sorted({*ks, gate.k})
    intervals = None
    if not args.no_intervals or gate.statistic == "lowerBound":
        intervals = bootstrap(
            tallies, wanted, resamples=resamples, seed=args.seed, level=args.level
        )
    verdict = evaluate_gate(gate, tallies, intervals=intervals, seed=args.seed, resamples=resamples)
    shown = None if args.no_intervals or intervals is None else [i for i in intervals if i.k in ks]
    output_report(
        tallies,
        ks,
        args,
        title=title,
        infra_by_reason=infra_by_reason,
        intervals=shown,
        strips=strips,
        usage=usage,
    )
    result = "passed" if verdict.passed else "FAILED"
    print(f"passhat: gate {result}: {verdict.describe()}", file=sys.stderr)
    return EXIT_PASSED if verdict.passed else EXIT_GATE_FAILED


def add_score_parser(subparsers: Subparsers) -> None:
    """Add `passhat score FILE ... [--k K ...] [--format F] [--out PATH] [--plot PNG]`."""
    parser = subparsers.add_parser(
        "score",
        help="score trial files: pass^k, pass@k, mean, flaky tasks, infra-error rate",
        description="Score per-trial outcomes you already have: JSON Lines or CSV with "
        "task_id and outcome (pass, fail, infra_error), Inspect logs with epochs (.eval or "
        "JSON), tau-bench results, tau2-bench results (a file or its directory), a run "
        "directory or bundle of passhat (its trials.jsonl). Several files are one run. "
        "Exit 0 (gate passed, or no --gate), 1 gate failed, 2 bad input, "
        "option or gate (docs/scoring.md#exit-codes).",
    )
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="trial files, run directories or bundles"
    )
    add_reader_options(parser)
    parser.add_argument(
        "--gate",
        metavar="EXPR",
        help="gate the files like a spec's gate: METRIC@K>=MIN, e.g. 'passHatK@2>=0.9' "
        "(METRIC: passHatK, passAtK, meanPassRate); exit 1 when it fails",
    )
    parser.add_argument(
        "--gate-statistic",
        choices=("estimate", "lowerBound"),
        default="estimate",
        help="what must reach MIN: the estimate (default) or the low end of its --level "
        "bootstrap interval",
    )
    add_report_options(
        parser,
        k_help="k to report (repeatable; default 1, 3 and the most trials of a task)",
        title_help="report title (default: the file names)",
    )
    parser.set_defaults(func=_score)


def add_compare_options(parser: argparse.ArgumentParser) -> None:
    """The options of `passhat compare` after its sources (mounted by
    `passhat.operator.compare_command`, which can open cluster evals)."""
    _k_option(parser, "k (repeatable)")
    add_reader_options(parser)
    _output_options(parser, ("text", "json", "markdown"))
    parser.add_argument(
        "--fail-if-worse",
        action="store_true",
        help="exit 1 when B's pass^k is significantly worse at any k",
    )
    _interval_options(parser)


def _power(args: argparse.Namespace) -> int:
    from passhat.report.comparison import render_power
    from passhat.stats import power
    from passhat.trials.readers import read_tallies

    files = run_files(args.pilot or [])
    pilot = read_tallies(files, options=reader_options(args)) if files else None
    cost = args.cost_per_trial
    if cost is None and pilot is not None:
        cost = _pilot_cost_per_trial(files, pilot)
    try:
        plan = power(
            diff=args.diff,
            pilot=pilot,
            mean_rate=args.mean_rate,
            alpha=args.alpha,
            target_power=args.power,
            trials=args.trials or (1, 2, 4, 8, 16, 32),
            task_sd=args.task_sd,
            k=args.k,
            cost_per_trial=cost,
        )
    except ValueError as err:
        raise UsageError(_power_flags(str(err))) from None
    write_output(render_power(plan, args.format), args.out)
    return 0


# passhat.stats.power names its parameters; a user typed the flags.
_POWER_FLAGS = (
    ("diff=", "--diff "),
    ("alpha=", "--alpha "),
    ("power=", "--power "),
    ("task_sd=", "--task-sd "),
    ("k=", "--k "),
    ("mean rate ", "--mean-rate "),
    ("cost per trial ", "--cost-per-trial "),
)


def _power_flags(message: str) -> str:
    """`message` of passhat.stats.power with its leading parameter named as the flag
    (`--diff 2.0 must keep ...`, not `diff=2.0 must keep ...`)."""
    for name, flag in _POWER_FLAGS:
        if message.startswith(name):
            return flag + message[len(name) :]
    return message


def _pilot_cost_per_trial(paths: Sequence[str], pilot: Sequence[TaskTally]) -> float | None:
    """Dollars per graded trial the pilot's trial files report (every attempt's cost,
    infra-error retries included, over the graded trials); None when they report none."""
    from passhat.trials.usage import usage_of_files

    usage = usage_of_files(paths)
    graded = sum(t.graded for t in pilot)
    if usage is None or not usage.total.reported or not graded:
        return None
    return usage.total.cost_usd / graded


def add_power_parser(subparsers: Subparsers) -> None:
    """Add `passhat power (--pilot FILE ... | --mean-rate P) --diff D [...]`."""
    parser = subparsers.add_parser(
        "power",
        help="how many tasks x trials to detect a change in mean pass rate or pass^k",
        description="Plan a comparison: tasks needed, per trial count, for `passhat compare` "
        "to detect a change of --diff in mean pass rate (or in pass^k with --k K) with the "
        "given power, from a pilot result set or an assumed mean rate, and what each plan "
        "costs in trials and, when the pilot's trials reported cost_usd (a passhat run "
        "directory or trials.jsonl) or --cost-per-trial is given, in dollars.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--pilot", nargs="+", metavar="FILE", help="pilot trial files or run directories"
    )
    add_reader_options(parser)
    source.add_argument(
        "--mean-rate", type=finite_float, metavar="P", help="assumed mean pass rate"
    )
    parser.add_argument(
        "--diff", type=finite_float, required=True, metavar="D", help="change to detect, e.g. 0.05"
    )
    parser.add_argument("--alpha", type=fraction, default=0.05, help="significance (0.05)")
    parser.add_argument("--power", type=fraction, default=0.8, help="power (0.8)")
    parser.add_argument(
        "--trials", type=positive_int, action="append", metavar="N", help="trial counts to plan"
    )
    parser.add_argument(
        "--task-sd",
        type=finite_float,
        default=0.0,
        metavar="SD",
        help="how much the true change varies between tasks (0)",
    )
    parser.add_argument(
        "--k",
        type=positive_int,
        default=1,
        metavar="K",
        help="plan for a change in pass^K (default 1: the mean pass rate); trial counts "
        "below K are left out",
    )
    parser.add_argument(
        "--cost-per-trial",
        type=finite_float,
        metavar="USD",
        help="dollars one graded trial costs (default: the pilot's reported cost_usd over "
        "its graded trials, when its files report one)",
    )
    _output_options(parser, ("text", "json", "markdown"))
    parser.set_defaults(func=_power)
