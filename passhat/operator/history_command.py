"""`passhat history`: a suite's runs over time, from the cluster or from run directories.

`passhat history SUITE -n NS` reads every ConsistencyEval in the namespace that is a run of
SUITE (`passhat.api.suite.suite_of`: `spec.suite`, else the `passhat.dev/suite` label),
each from the ledger in its status as `passhat report` reads it (no record store needed);
`passhat history DIR...` reads local run directories and bundles
(`passhat.history.rundirs`). This module is the one place that tells the two apart (it
lives in the operator layer, the lowest that can list evals); from the `SuiteRun`s on,
`passhat.history` does the rest the same way for both.

Only evals that exist are listed: a deleted eval's attempts stay in the record store,
and its bundle (`passhat report NAME --bundle DIR`) joins a history as a directory.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from passhat.api.errors import PasshatError, UsageError
from passhat.api.suite import is_suite_name, suite_of

if TYPE_CHECKING:
    from passhat.history.model import SuiteRun
    from passhat.report.commands import Subparsers

__all__ = ["add_history_parser", "cluster_runs", "eval_run", "is_cluster_suite"]


def eval_run(obj: Mapping[str, Any], config_maps: Mapping[str, Mapping[str, str]]) -> SuiteRun:
    """One eval object as a run of its suite (SpecError/InputError when unreadable)."""
    from passhat.api.conditions import COMPLETE
    from passhat.history.model import COMPLETE as DONE
    from passhat.history.model import FAILED, RUNNING, SuiteRun
    from passhat.operator.live import tallies_of
    from passhat.operator.status import condition_status, is_terminal
    from passhat.trials.classify_pod import parse_timestamp

    _, _, tallies = tallies_of(obj, config_maps)
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    if condition_status(status, COMPLETE) == "True":
        state = DONE
    else:
        state = FAILED if is_terminal(status) else RUNNING
    return SuiteRun(
        title=str(meta.get("name")),
        suite=suite_of(obj),
        tallies=tallies,
        started=parse_timestamp(meta.get("creationTimestamp")),
        completed=parse_timestamp(status.get("completionTime")),
        state=state,
    )


def cluster_runs(suite: str, *, namespace: str, kubeconfig: str | None) -> list[SuiteRun]:
    """The evals of `suite` in `namespace` as runs; an eval that cannot be read is left
    out with a note on stderr (UsageError when there is none, or no cluster)."""
    from passhat.operator.kube import ApiError, Kube
    from passhat.operator.live import client_config, read_config_maps

    kube = Kube(client_config(kubeconfig))
    try:
        evals = [obj for obj in kube.list_evals(namespace) if suite_of(obj) == suite]
        config_maps = read_config_maps(kube, namespace, evals)
    except ApiError as err:
        raise UsageError(f"cannot list consistencyevals in {namespace}: {err}") from None
    finally:
        kube.close()
    if not evals:
        raise UsageError(
            f'no consistencyeval of suite "{suite}" in namespace "{namespace}" (spec.suite or '
            "the passhat.dev/suite label)"
        )
    runs = []
    for obj in evals:
        try:
            runs.append(eval_run(obj, config_maps))
        except PasshatError as err:
            print(f"passhat: note: left out: {err}", file=sys.stderr)
    return runs


def is_cluster_suite(sources: list[str]) -> bool:
    """Whether SOURCE... names a suite on the cluster: one name that is no directory."""
    return len(sources) == 1 and is_suite_name(sources[0]) and not os.path.exists(sources[0])


def _svg_path(text: str) -> str:
    if not text.lower().endswith(".svg") or os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a file name ending in .svg")
    return text


def _history(args: argparse.Namespace) -> int:
    from passhat.history import build_history, local_runs, render_history, select_suite
    from passhat.history.svg import trend_svg
    from passhat.records.bundle import write_file
    from passhat.report.commands import ks_for, write_output

    if is_cluster_suite(args.sources):
        if args.suite is not None:
            raise UsageError(f"--suite: {args.sources[0]} already names the suite")
        from passhat.operator.live import current_namespace

        suite: str | None = args.sources[0]
        namespace = args.namespace or current_namespace(args.kubeconfig)
        try:
            runs = cluster_runs(args.sources[0], namespace=namespace, kubeconfig=args.kubeconfig)
        except UsageError as err:
            # NB: a mistyped run directory reads as a suite's name: say both
            raise UsageError(
                f"{suite}: no such directory; as a suite on the cluster: {err}"
            ) from None
    else:

        def note(text: str) -> None:
            print(f"passhat: note: {text}", file=sys.stderr)

        suite, runs = select_suite(local_runs(args.sources), args.suite, note=note)
    ks = ks_for(args.k, [t for run in runs for t in run.tallies])
    history = build_history(runs, ks, suite=suite)
    if args.plot:
        write_file(args.plot, trend_svg(history).encode())
        print(f"passhat: wrote {args.plot}", file=sys.stderr)
    write_output(render_history(history, args.format), args.out)
    return 0


def add_history_parser(subparsers: Subparsers) -> None:
    """Add `passhat history (SUITE [-n NS] | DIR... [--suite S]) [--k K] [--format F]`."""
    from passhat.history import HISTORY_FORMATS
    from passhat.report.commands import positive_int

    parser = subparsers.add_parser(
        "history",
        help="a suite's runs over time: pass^k, mean, flaky, infra rate, and what changed",
        description="The runs of a suite, oldest first: pass^k per k, the mean pass rate, "
        "the flaky count and the infra-error rate of each, and the tasks that changed "
        "between consecutive runs (regressed, newly flaky, improved, newly passing), as "
        "passhat compare lists them. SUITE: the evals of that suite (spec.suite or the "
        "passhat.dev/suite label) in the namespace; DIR: run directories, bundles, or "
        "directories of them (passhat-runs/).",
    )
    parser.add_argument(
        "sources",
        nargs="+",
        metavar="SUITE|DIR",
        help="a suite's name (its evals on the cluster), or run directories and bundles",
    )
    parser.add_argument(
        "--suite", metavar="NAME", help="DIR...: keep the runs of this suite (others are named)"
    )
    parser.add_argument(
        "--namespace", "-n", metavar="NS", help="SUITE: the evals' namespace (the context's)"
    )
    parser.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file to use")
    parser.add_argument(
        "--k",
        type=positive_int,
        action="append",
        metavar="K",
        help="k (repeatable; default 1, 3 and the most trials of a task)",
    )
    parser.add_argument(
        "--format", default="text", choices=HISTORY_FORMATS, help="history format (text)"
    )
    parser.add_argument("--out", metavar="PATH", help="write the history here, not to stdout")
    parser.add_argument(
        "--plot", type=_svg_path, metavar="SVG", help="also write the trend chart (an .svg file)"
    )
    parser.set_defaults(func=_history)
