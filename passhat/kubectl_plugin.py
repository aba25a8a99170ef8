"""`kubectl passhat ...`: passhat's cluster commands as a kubectl plugin.

kubectl runs an executable named `kubectl-passhat` found on PATH for `kubectl passhat`,
with the remaining arguments unchanged and its own environment (KUBECONFIG included): the
plugin mechanism krew builds on, no index needed
(https://kubernetes.io/docs/tasks/extend-kubectl/kubectl-plugins/). The package installs
that executable (a console script), so `kubectl passhat report NAME`, `kubectl passhat
trials NAME`, `kubectl passhat transcripts NAME --task T` and `kubectl passhat regrade
NAME` read the eval of the current kubeconfig context and namespace, as `kubectl get`
does (and `kubectl passhat history SUITE` the evals of a suite there). They are the
`passhat` subcommands of the same names (one parser each, mounted here too), so the two
spellings can never drift apart. kubectl hands a plugin no flags of
its own, so the usual ones are taken before the subcommand as well as after it:
`kubectl passhat -n evals report NAME`, and `--context NAME` anywhere: the plugin asks
kubectl (which ran it, so is on PATH) for that context alone (`kubectl config view
--minify --flatten --raw --context NAME`, KUBECONFIG's merged files included) and reads
the cluster through that, as kubectl would.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from typing import NoReturn

from passhat.api.errors import UsageError
from passhat.cli import AddParser, build_parser, console_main, main
from passhat.operator.command import add_report_parser
from passhat.operator.history_command import add_history_parser
from passhat.operator.records_command import (
    add_regrade_parser,
    add_transcripts_parser,
    add_trials_parser,
)

__all__ = ["PLUGIN_SUBCOMMANDS", "PROG", "plugin_console_main", "plugin_main"]

PROG = "kubectl passhat"

# The subcommands that read an eval on the cluster.
PLUGIN_SUBCOMMANDS: tuple[AddParser, ...] = (
    add_report_parser,
    add_trials_parser,
    add_transcripts_parser,
    add_regrade_parser,
    add_history_parser,
)

# kubectl's flags a user may put before the subcommand: (spellings, takes a value).
_LEADING = {"-n": True, "--namespace": True, "--kubeconfig": True, "--context": True}


def _move_leading_flags(argv: Sequence[str]) -> list[str]:
    """`-n NS report NAME` as `report NAME -n NS` (also `--namespace=NS`, `--kubeconfig`)."""
    leading: list[str] = []
    rest = list(argv)
    while rest:
        head = rest[0]
        flag = head.split("=", 1)[0]
        if flag not in _LEADING:
            break
        if "=" in head or len(rest) < 2:
            leading.append(rest.pop(0))
        else:
            leading += [rest.pop(0), rest.pop(0)]
    if not rest or not leading:
        return leading + rest
    return [rest[0], *leading, *rest[1:]]


def _take(args: list[str], flag: str) -> str | None:
    """Remove `flag VALUE` / `flag=VALUE` from `args` (before any `--`); its last value."""
    value = None
    index = 0
    while index < len(args) and args[index] != "--":
        if args[index] == flag and index + 1 < len(args):
            value = args[index + 1]
            del args[index : index + 2]
        elif args[index].startswith(flag + "="):
            value = args[index].split("=", 1)[1]
            del args[index]
        else:
            index += 1
    return value


@contextlib.contextmanager
def _context_kubeconfig(args: list[str]) -> Iterator[list[str]]:
    """`args` with `--context NAME` replaced by `--kubeconfig FILE`, FILE holding that
    context alone (as its current one) for as long as the command runs."""
    context = _take(args, "--context")
    if context is None:
        yield args
        return
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise UsageError("--context needs kubectl on PATH (it reads the kubeconfig's contexts)")
    kubeconfig = _take(args, "--kubeconfig")
    view = [kubectl, "config", "view", "--raw", "--minify", "--flatten", f"--context={context}"]
    if kubeconfig is not None:
        view.append(f"--kubeconfig={kubeconfig}")
    done = subprocess.run(view, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise UsageError(f"--context {context}: {done.stderr.strip() or 'no such context'}")
    with tempfile.TemporaryDirectory(prefix="kubectl-passhat-") as folder:
        path = os.path.join(folder, "kubeconfig")
        # NB: the file holds credentials: readable by this user only, gone afterwards
        with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
            handle.write(done.stdout)
        end = args.index("--") if "--" in args else len(args)
        yield [*args[:end], "--kubeconfig", path, *args[end:]]


def plugin_main(argv: Sequence[str] | None = None) -> int:
    """Run `kubectl passhat` with `argv` (default: the process arguments); the exit code."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(
        prog=PROG,
        subcommands=PLUGIN_SUBCOMMANDS,
        description="passhat's cluster commands for kubectl: report, trials, transcripts "
        "and regrade of a ConsistencyEval, and the history of a suite, in the current "
        "context's namespace (-n NS for "
        "another, --context NAME for another context, before or after the command).",
    )
    moved = _move_leading_flags(args)
    try:
        with _context_kubeconfig(moved) as final:
            return main(final, parser=parser)
    except UsageError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2


def plugin_console_main() -> NoReturn:
    """The `kubectl-passhat` executable (console script)."""
    console_main(plugin_main)


if __name__ == "__main__":
    plugin_console_main()
