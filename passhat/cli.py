"""The `passhat` command: one argparse parser, each subcommand mounted by a small function.

Subcommands live with the layer they drive (`passhat.report.commands`,
`passhat.local.command`, `passhat.runner.command`, ...) and expose
`add_<name>_parser(subparsers)`, which sets `func(args) -> int`. To add one, import its
function and append it to SUBCOMMANDS. Those modules import nothing heavy at import time,
so `passhat trial` in a pod starts fast.

Errors a user can cause (`PasshatError`: bad file, spec or option) print one line,
`passhat: error: <what and where>`, and exit 2 (`passhat.api.gate` holds the exit codes
every gating command shares). argparse's own errors (a bad or missing
option) are one line too, `passhat <command>: error: <option>: ...`, also exit 2.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import NoReturn, cast

from passhat import __version__
from passhat.api.errors import PasshatError
from passhat.api.gate import EXIT_USAGE
from passhat.harness.command import add_init_parser
from passhat.local.command import add_run_parser
from passhat.operator.command import add_operator_parser, add_report_parser
from passhat.operator.compare_command import add_compare_parser
from passhat.operator.history_command import add_history_parser
from passhat.operator.records_command import (
    add_regrade_parser,
    add_transcripts_parser,
    add_trials_parser,
)
from passhat.report.commands import add_power_parser, add_score_parser
from passhat.runner.command import add_trial_parser

__all__ = ["SUBCOMMANDS", "build_parser", "console_main", "main"]

EXIT_INTERRUPTED = 130

AddParser = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

SUBCOMMANDS: tuple[AddParser, ...] = (
    add_init_parser,
    add_run_parser,
    add_score_parser,
    add_compare_parser,
    add_history_parser,
    add_power_parser,
    add_trial_parser,
    add_regrade_parser,
    add_operator_parser,
    add_report_parser,
    add_trials_parser,
    add_transcripts_parser,
)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (subcommand parsers inherit it)."""

    def error(self, message: str) -> NoReturn:
        """Print `<prog>: error: <message>` and a pointer to --help on one line; exit 2."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(
    *,
    prog: str = "passhat",
    subcommands: Sequence[AddParser] = SUBCOMMANDS,
    description: str = "Run every task of an agent eval n times and report how consistently "
    "it passes: pass^k, pass@k, mean pass rate, flaky tasks, infra-error rate.",
) -> argparse.ArgumentParser:
    """The `passhat` parser with every subcommand mounted (or those of `subcommands`)."""
    parser = _Parser(prog=prog, description=description)
    parser.add_argument("--version", action="version", version=f"passhat {__version__}")
    # NB: argparse builds the subcommand parsers with the parent's class, so _Parser too
    subparsers = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", metavar="COMMAND"),
    )
    for add in subcommands:
        add(subparsers)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """`parser.parse_args(argv)`, but an unknown flag is reported by its subcommand's parser.

    argparse hands every unrecognized argument back to the top-level parser, whose error
    would say `passhat: error: ... (see passhat --help)`, and the top-level help lists no
    subcommand's flags; `passhat run: error: ... (see passhat run --help)` points at them.
    """
    args, extras = parser.parse_known_args(argv)
    if extras:
        sub = _subcommand_parser(parser, getattr(args, "command", None))
        (sub or parser).error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def _subcommand_parser(
    parser: argparse.ArgumentParser, command: str | None
) -> argparse.ArgumentParser | None:
    """The parser of subcommand `command` of `parser` (None: no such subcommand)."""
    for action in parser._actions:  # NB: argparse keeps its subparsers only there
        if isinstance(action, argparse._SubParsersAction) and command is not None:
            found = action.choices.get(command)
            return found if isinstance(found, argparse.ArgumentParser) else None
    return None


def main(
    argv: Sequence[str] | None = None, *, parser: argparse.ArgumentParser | None = None
) -> int:
    """Run `passhat` with `argv` (default: the process arguments); returns the exit code.
    `parser`: another build_parser() (the kubectl plugin's)."""
    parser = parser or build_parser()
    try:
        args = _parse(parser, argv)
    except SystemExit as stop:  # NB: argparse exits 2 on bad usage, 0 for --help
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.func(args))
    except PasshatError as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("passhat: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def console_main(run: Callable[[], int] = main) -> NoReturn:
    """The `passhat` command (console script, `python -m passhat`): `main()`, then exit.

    Tearing down an interpreter that imported pydantic, yaml and rich (freeing every object,
    module by module) costs about 0.1 s of CPU, more than a thousand trivial trials'
    bookkeeping, and nothing a user can see. So, like mypy (`mypy.util.hard_exit`), the
    command skips it: it runs what a normal exit runs that has visible effects (the atexit
    handlers, logging's flush among them; flushing stdout and stderr) and then `os._exit`.
    When another thread is still alive (a normal exit would wait for it), it exits normally.
    """
    code = run()
    if threading.active_count() > 1:
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # NB: a closed pipe (passhat ... | head) loses nothing of ours
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    console_main()
