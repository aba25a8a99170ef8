"""The `passhat score`, `passhat compare` and `passhat power` subcommands, for `passhat.cli`.

They read trial files (any format `passhat.trials.readers` knows), compute with
`passhat.stats` and print with this package; a bad file or option is a PasshatError, which
the CLI prints as one line with exit code 2.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from passhat.api.errors import UsageError
from passhat.stats import KIntervals, TaskTally, default_ks

__all__ = [
    "add_compare_parser",
    "add_power_parser",
    "add_report_options",
    "add_score_parser",
    "finite_float",
    "fraction",
    "output_report",
    "plot_path",
    "positive_int",
    "report_intervals",
    "resample_count",
    "seed",
]

MAX_RESAMPLES = 1_000_000
MAX_SEED = 2**32 - 1
PLOT_SUFFIXES = (".png", ".svg", ".pdf")

if TYPE_CHECKING:
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


def _ks(requested: Sequence[int] | None, tallies: Sequence[TaskTally]) -> list[int]:
    if requested:
        return sorted(set(requested))
    most = max((t.graded for t in tallies), default=0)
    return default_ks(most) if most >= 1 else [1]


def _write(text: str, out: str | None) -> None:
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
    parser.add_argument("--format", default="text", choices=formats, help=help)
    parser.add_argument("--out", metavar="PATH", help="write the report here, not to stdout")


def _interval_options(parser: argparse.ArgumentParser) -> None:
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
        "--level", type=fraction, default=0.95, metavar="L", help="interval level (0.95)"
    )


def output_report(
    tallies: Sequence[TaskTally],
    ks: Sequence[int],
    args: argparse.Namespace,
    *,
    title: str,
    infra_by_reason: Mapping[str, int] | None = None,
) -> int:
    """Render the report of `tallies` as the options of add_report_options ask; exit code 0.

    Shared by `passhat score` and `passhat report`, so both print the same report for the
    same trials: intervals unless --format json or --no-intervals, --plot, --out; the
    infra errors by reason when the caller knows them.
    """
    from passhat.report import build_report, render_report, save_plot

    intervals = report_intervals(tallies, ks, args) if args.format != "json" else None
    report = build_report(
        tallies, ks, title=title, intervals=intervals, infra_by_reason=infra_by_reason
    )
    if args.plot:
        save_plot(report, args.plot)
    color = args.out is None and args.format == "text" and sys.stdout.isatty()
    _write(render_report(report, args.format, color=color), args.out)
    return 0


def report_intervals(
    tallies: Sequence[TaskTally], ks: Sequence[int], args: argparse.Namespace
) -> list[KIntervals] | None:
    """The bootstrap intervals the options of add_report_options ask for (None with
    --no-intervals)."""
    from passhat.stats import bootstrap

    if args.no_intervals:
        return None
    resamples = args.resamples or 2000
    return bootstrap(tallies, ks, resamples=resamples, seed=args.seed, level=args.level)


def add_report_options(parser: argparse.ArgumentParser, *, k_help: str, title_help: str) -> None:
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
    _interval_options(parser)


def _score(args: argparse.Namespace) -> int:
    from passhat.stats import tally
    from passhat.trials.outcomes import infra_reasons
    from passhat.trials.readers import read_rows

    rows = read_rows(args.files)
    tallies = tally((row.task_id, row.outcome.value) for row in rows)
    # NB: by reason only when the file says why: Inspect and tau-bench logs do not
    reasons = (
        infra_reasons((row.outcome.value, row.reason) for row in rows)
        if any(row.reason for row in rows)
        else None
    )
    ks = _ks(args.k, tallies)
    most = max((t.graded for t in tallies), default=0)
    for k in ks:
        if k > most:
            print(
                f"passhat: note: k={k} is more than any task's {most} graded trials: "
                "every task needs more trials for it",
                file=sys.stderr,
            )
    title = args.title if args.title is not None else ", ".join(Path(f).name for f in args.files)
    return output_report(tallies, ks, args, title=title, infra_by_reason=reasons)


def add_score_parser(subparsers: Subparsers) -> None:
    """Add `passhat score FILE ... [--k K ...] [--format F] [--out PATH] [--plot PNG]`."""
    parser = subparsers.add_parser(
        "score",
        help="score trial files: pass^k, pass@k, mean, flaky tasks, infra-error rate",
        description="Score per-trial outcomes you already have: JSON Lines or CSV with "
        "task_id and outcome (pass, fail, infra_error), Inspect JSON logs with epochs, "
        "tau-bench results. Several files are one run. Exit 2 on bad input.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="trial files")
    add_report_options(
        parser,
        k_help="k to report (repeatable; default 1, 3 and the most trials of a task)",
        title_help="report title (default: the file names)",
    )
    parser.set_defaults(func=_score)


def _compare(args: argparse.Namespace) -> int:
    from passhat.report.comparison import render_comparison
    from passhat.stats import WORSE, compare
    from passhat.trials.readers import read_tallies

    a = read_tallies([args.a])
    b = read_tallies([args.b])
    ks = _ks(args.k, [*a, *b])
    comparisons = compare(
        a, b, ks, resamples=args.resamples or 10000, seed=args.seed, level=args.level
    )
    title = f"{Path(args.b).name} (B) vs {Path(args.a).name} (A)"
    _write(render_comparison(comparisons, args.format, title=title), args.out)
    if args.fail_if_worse and any(c.pass_hat_k.verdict == WORSE for c in comparisons):
        return 1
    return 0


def add_compare_parser(subparsers: Subparsers) -> None:
    """Add `passhat compare A B [--k K ...] [--format F] [--fail-if-worse]`."""
    parser = subparsers.add_parser(
        "compare",
        help="compare two result sets on the same tasks (B against A)",
        description="Paired comparison over the tasks both files have: per-task differences "
        "of pass rate and pass^k, a bootstrap interval, a sign-flip p-value and a verdict "
        "(better / worse / within noise). Tasks in only one file are listed.",
    )
    parser.add_argument("a", metavar="A", help="baseline trial file")
    parser.add_argument("b", metavar="B", help="candidate trial file")
    _k_option(parser, "k (repeatable)")
    _output_options(parser, ("text", "json", "markdown"))
    parser.add_argument(
        "--fail-if-worse",
        action="store_true",
        help="exit 1 when B's pass^k is significantly worse at any k",
    )
    _interval_options(parser)
    parser.set_defaults(func=_compare)


def _power(args: argparse.Namespace) -> int:
    from passhat.report.comparison import render_power
    from passhat.stats import power
    from passhat.trials.readers import read_tallies

    pilot = read_tallies(args.pilot) if args.pilot else None
    try:
        plan = power(
            diff=args.diff,
            pilot=pilot,
            mean_rate=args.mean_rate,
            alpha=args.alpha,
            target_power=args.power,
            trials=args.trials or (1, 2, 4, 8, 16, 32),
            task_sd=args.task_sd,
        )
    except ValueError as err:
        raise UsageError(str(err)) from None
    _write(render_power(plan, args.format), args.out)
    return 0


def add_power_parser(subparsers: Subparsers) -> None:
    """Add `passhat power (--pilot FILE ... | --mean-rate P) --diff D [...]`."""
    parser = subparsers.add_parser(
        "power",
        help="how many tasks x trials to detect a change in mean pass rate",
        description="Plan a comparison: tasks needed, per trial count, for `passhat compare` "
        "to detect a change of --diff in mean pass rate with the given power, from a pilot "
        "result set or an assumed mean rate.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--pilot", nargs="+", metavar="FILE", help="pilot trial files")
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
    _output_options(parser, ("text", "json", "markdown"))
    parser.set_defaults(func=_power)
