"""`passhat compare A B`: two runs of the same tasks, wherever each ran.

A and B are each a trial file (any format `passhat score` reads), a local run directory or
bundle (its `trials.jsonl`, read strictly by `passhat.records.RunDirectory`), or a cluster
eval written `ceval/NAME` (in the kubeconfig context's namespace, or `-n NS`; its tallies
come from the ledger in its status, as `passhat report` reads them, so no record store is
needed). The command lives in the operator layer because that is the lowest layer that
can open all three; everything after `open_tallies` is source-blind.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from passhat.api.errors import UsageError
from passhat.stats import TaskTally

if TYPE_CHECKING:
    from passhat.report.commands import Subparsers
    from passhat.trials.readers import ReadOptions

__all__ = ["EVAL_PREFIXES", "add_compare_parser", "open_tallies"]

# How A or B names a cluster eval (kubectl's short name, and the kind's names).
EVAL_PREFIXES = ("ceval/", "consistencyeval/", "consistencyevals/")


def open_tallies(
    text: str,
    *,
    namespace: str | None,
    kubeconfig: str | None,
    options: ReadOptions | None = None,
) -> tuple[str, list[TaskTally]]:
    """(title, per-task tallies) of what A or B names; `options` for trial files."""
    from passhat.stats import tally

    for prefix in EVAL_PREFIXES:
        if text.startswith(prefix):
            from passhat.operator.live import current_namespace, read_live_eval

            name = text[len(prefix) :]
            if not name:
                raise UsageError(f"{text}: expected {prefix}NAME")
            ns = namespace or current_namespace(kubeconfig)
            live = read_live_eval(name, ns, kubeconfig=kubeconfig)
            return f"{ns}/{name}", live.tallies
    # NB: a directory with a results.json is tau2-bench's dir layout, for the readers
    if os.path.isdir(text) and not os.path.isfile(os.path.join(text, "results.json")):
        from passhat.records.source import RunDirectory

        records = RunDirectory(text).records()
        return Path(text).name or text, tally((r["task_id"], r["outcome"]) for r in records)
    from passhat.trials.readers import ReadOptions, read_tallies

    return Path(text).name, read_tallies([text], options=options or ReadOptions())


def _compare(args: argparse.Namespace) -> int:
    from passhat.report.commands import ks_for, reader_options, write_output
    from passhat.report.comparison import render_comparison
    from passhat.stats import WORSE, compare, task_changes

    where = {"namespace": args.namespace, "kubeconfig": args.kubeconfig}
    title_a, a = open_tallies(args.a, **where, options=reader_options(args))
    title_b, b = open_tallies(args.b, **where, options=reader_options(args))
    ks = ks_for(args.k, [*a, *b])
    comparisons = compare(
        a, b, ks, resamples=args.resamples or 10000, seed=args.seed, level=args.level
    )
    changes = task_changes(a, b)
    in_b = {t.task_id: t for t in b if t.graded}
    paired = sum(1 for t in a if t.graded and t.task_id in in_b)
    text = render_comparison(
        comparisons,
        args.format,
        title=f"{title_b} (B) vs {title_a} (A)",
        changes=changes,
        unchanged=paired - len(changes),
        sources=(title_a, title_b),
    )
    write_output(text, args.out)
    if args.fail_if_worse and any(c.pass_hat_k.verdict == WORSE for c in comparisons):
        return 1
    return 0


def add_compare_parser(subparsers: Subparsers) -> None:
    """Add `passhat compare A B [-n NS] [--k K ...] [--format F] [--fail-if-worse]`."""
    from passhat.report.commands import add_compare_options

    parser = subparsers.add_parser(
        "compare",
        help="compare two runs of the same tasks (B against A): verdict and changed tasks",
        description="Paired comparison over the tasks both runs have: per-task differences "
        "of pass rate and pass^k, a bootstrap interval, a sign-flip p-value and a verdict "
        "(better / worse / within noise), then every task whose pass rate changed "
        "(regressed, newly flaky, improved, newly passing), most significant first. A and B "
        "are trial files, run directories, bundles or cluster evals (ceval/NAME).",
    )
    parser.add_argument(
        "a", metavar="A", help="baseline: a trial file, run directory, bundle or ceval/NAME"
    )
    parser.add_argument("b", metavar="B", help="candidate: the same kinds as A")
    parser.add_argument(
        "--namespace",
        "-n",
        metavar="NS",
        help="the namespace of ceval/NAME (default: the context's)",
    )
    parser.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file to use")
    add_compare_options(parser)
    parser.set_defaults(func=_compare)
