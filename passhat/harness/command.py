"""`passhat init inspect TASK_FILE[@task] > eval.yaml`: an Inspect task as a ConsistencyEval."""

from __future__ import annotations

import argparse
import os
import sys

from passhat.api.errors import UsageError

__all__ = ["add_init_parser"]

_HEADER = """\
# Made by `passhat init inspect`: the samples of the Inspect task `{name}`
# ({task}) as passhat tasks, each trial one `inspect eval` of one sample for one epoch, graded from
# the Inspect log it wrote (a sample error is an infra error, retried).
#   passhat run eval.yaml                       # locally (inspect and passhat on PATH)
#   kubectl -n evals apply -f eval.yaml         # on a cluster: the image must hold
#                                               # inspect-ai, passhat and the task file
# docs/harnesses.md says how to build that image.
"""


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _init_inspect(args: argparse.Namespace) -> int:
    import yaml

    from passhat.api.load import parse_eval
    from passhat.harness.inspect_task import eval_document, list_samples

    name, sample_ids = list_samples(args.task, inspect=args.inspect_command)
    file, _, task_name = args.task.partition("@")
    path = args.path_in_image or os.path.abspath(file)
    task = path + "@" + (task_name or name)
    if args.k and max(args.k) > args.trials:
        raise UsageError(f"--k {max(args.k)} is more than --trials {args.trials}")
    document = eval_document(
        task=task,
        name=args.name or name,
        sample_ids=sample_ids,
        trials=args.trials,
        ks=args.k,
        image=args.image,
        model=args.model,
        scorer=args.scorer,
        timeout_seconds=args.timeout,
        parallelism=args.parallelism,
    )
    text = _HEADER.format(task=args.task, name=name) + yaml.safe_dump(
        document, sort_keys=False, default_flow_style=None, width=100
    )
    parse_eval(text, "<passhat init inspect>")  # NB: what we print must load
    sys.stdout.write(text)
    return 0


def add_init_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `passhat init inspect TASK [--trials N] [--k K ...] [...]` to the CLI."""
    parser = subparsers.add_parser(
        "init",
        help="write a ConsistencyEval for an eval you already have (Inspect)",
        description="Print a ConsistencyEval (YAML) that runs an existing eval's tasks as "
        "passhat trials.",
    )
    harnesses = parser.add_subparsers(dest="harness", metavar="HARNESS", required=True)
    inspect = harnesses.add_parser(
        "inspect",
        help="an Inspect task: its samples are the tasks, a trial one inspect eval",
        description="Print a ConsistencyEval whose tasks are the samples of an Inspect task "
        "and whose trial runs `passhat trial --inspect TASK` (inspect eval of that sample, "
        "one epoch, graded from its log). Lists the samples with the Python of `inspect`.",
    )
    inspect.add_argument("task", metavar="TASK_FILE[@task]", help="the Inspect task")
    inspect.add_argument("--trials", type=_positive, default=4, help="trials per sample (4)")
    inspect.add_argument(
        "--k", type=_positive, action="append", metavar="K", help="k to report (repeatable)"
    )
    inspect.add_argument("--model", default="none", help="inspect eval --model (default: none)")
    inspect.add_argument("--scorer", metavar="NAME", help="the deciding scorer (default: first)")
    inspect.add_argument(
        "--image",
        default="your-registry/your-inspect-image:latest",
        help="the trial image on a cluster: inspect-ai, passhat and the task (ignored locally)",
    )
    inspect.add_argument(
        "--path-in-image",
        metavar="PATH",
        help="the task file's path inside the image (default: its absolute path here, "
        "right for a local run)",
    )
    inspect.add_argument("--name", help="metadata.name (default: the task's name)")
    inspect.add_argument("--timeout", type=_positive, default=600, help="seconds per trial (600)")
    inspect.add_argument("--parallelism", type=_positive, default=4, help="trials at once (4)")
    inspect.add_argument(
        "--inspect-command",
        default="inspect",
        metavar="PATH",
        help="the inspect command whose Python loads the task (default: inspect, on PATH)",
    )
    inspect.set_defaults(func=_init_inspect)
