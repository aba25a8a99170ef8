"""The `passhat trials`, `passhat transcripts` and `passhat regrade` subcommands, for
`passhat.cli`.

All three read SOURCE through `passhat.records.source.Source` (`open_source` tells a run
directory or bundle from a cluster eval's name), so they work alike on a laptop and on a
cluster. They live here, beside `passhat report`, because this is the lowest layer that
can open every kind of source; a local run directory never imports a Kubernetes client.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from passhat.api.errors import UsageError
from passhat.records.layout import RESULTS, transcript_relpath
from passhat.records.record import AttemptRecord, infra_errors_by_reason

if TYPE_CHECKING:
    from passhat.api.spec import EvalSpec
    from passhat.grading.noise import GraderCheck
    from passhat.operator.records_source import ClusterSource
    from passhat.records.source import Source
    from passhat.stats import TaskTally

__all__ = [
    "add_regrade_parser",
    "add_source_options",
    "add_transcripts_parser",
    "add_trials_parser",
    "report_archived_eval",
    "summary_line",
    "write_report_bundle",
]

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_source_options(parser: argparse.ArgumentParser) -> None:
    """SOURCE, -n/--namespace and --kubeconfig: what open_source reads."""
    parser.add_argument(
        "source",
        metavar="SOURCE",
        help="a run directory of passhat run, a bundle (passhat report --bundle), or the "
        "name of a ConsistencyEval on the cluster",
    )
    parser.add_argument(
        "--namespace",
        "-n",
        metavar="NS",
        help="the eval's namespace (default: the kubeconfig context's)",
    )
    parser.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file to use")
    parser.add_argument(
        "--uid",
        metavar="UID",
        help="which eval of that name (one deleted and created again keeps its records "
        "under each uid; default: the live one, else the newest archived)",
    )


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


@contextlib.contextmanager
def _reader_may_leave() -> Iterator[None]:
    """Stop writing quietly when stdout's reader has gone (`| head`, a pager quit): the
    rest of stdout goes to /dev/null, as a shell tool would simply stop."""
    try:
        yield
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _to_stdout(text: str) -> None:
    """Write `text` to stdout, quietly stopping when its reader has gone."""
    with _reader_may_leave():
        sys.stdout.write(text)
        sys.stdout.flush()


def summary_line(title: str, records: Sequence[AttemptRecord]) -> str:
    """`passhat: 40 attempts of 5 tasks in DIR; infra errors by reason: oom_killed 1`."""
    from passhat.report.numbers import by_reason

    tasks = len({r["task_id"] for r in records})
    reasons = infra_errors_by_reason(records)
    infra = by_reason(reasons) if reasons else "no infra errors"
    return f"passhat: {len(records)} attempts of {tasks} tasks in {title}; {infra}"


def _trials(args: argparse.Namespace) -> int:
    from passhat.operator.records_source import open_source
    from passhat.records.bundle import jsonl, write_file

    source = open_source(
        args.source, namespace=args.namespace, kubeconfig=args.kubeconfig, uid=args.uid
    )
    records = source.records()
    text = jsonl(records)
    if args.out is None:
        _to_stdout(text)
    else:
        write_file(args.out, text.encode())
    print(summary_line(source.title, records), file=sys.stderr)
    if args.out is not None:
        print(f"passhat: wrote {args.out}", file=sys.stderr)
    return 0


def add_trials_parser(subparsers: Subparsers) -> None:
    """Add `passhat trials SOURCE [-n NS] [--kubeconfig P] [--out FILE]`."""
    parser = subparsers.add_parser(
        "trials",
        help="every attempt of a run directory, bundle or cluster eval, as trials.jsonl",
        description="Print every finished attempt of SOURCE as JSON Lines in the trials.jsonl "
        "schema (task_id, trial, attempt, outcome, reason, exit_code, duration_s, final; "
        "message when the classifier said more; on a cluster also pod, node, started_at, "
        "finished_at, log_bytes, log_truncated, result). passhat score, compare and power "
        "read the output as they read a local run's trials.jsonl. A summary with the infra "
        "errors by reason goes to stderr.",
    )
    add_source_options(parser)
    parser.add_argument("--out", metavar="FILE", help="write the JSON Lines here, not to stdout")
    parser.set_defaults(func=_trials)


def _header(record: AttemptRecord, relpath: str) -> str:
    reason = f", {record.get('reason')}" if record.get("reason") else ""
    return (
        f"==> {relpath} (task {record['task_id']}, trial {record['trial']}, attempt "
        f"{record['attempt']}: {record['outcome']}{reason}) <==\n"
    )


def _print_attempts(source: Source, records: Sequence[AttemptRecord]) -> int:
    """Each attempt's transcript (and result JSON) under a header on stdout; the number of
    attempts that had no transcript (never archived, or the file is gone)."""
    out = sys.stdout.buffer
    missing = 0
    for record in records:
        task_id, trial, attempt = record["task_id"], record["trial"], record["attempt"]
        transcript = source.transcript(record)
        out.write(_header(record, transcript_relpath(task_id, trial, attempt)).encode())
        if transcript is None:
            missing += 1
            out.write(b"(no transcript)\n")
        else:
            out.write(transcript if transcript.endswith(b"\n") else transcript + b"\n")
        result = source.result(record)
        if result is not None:
            relpath = transcript_relpath(task_id, trial, attempt, kind=RESULTS)
            out.write(f"==> {relpath} <==\n".encode())
            out.write(result if result.endswith(b"\n") else result + b"\n")
    out.flush()
    return missing


def _transcripts(args: argparse.Namespace) -> int:
    from passhat.operator.records_source import open_source
    from passhat.records.bundle import write_attempts
    from passhat.records.source import select_attempts

    source = open_source(
        args.source, namespace=args.namespace, kubeconfig=args.kubeconfig, uid=args.uid
    )
    chosen = select_attempts(
        source.records(),
        task_id=args.task,
        trial=args.trial,
        attempt=args.attempt,
        where=source.title,
    )
    if args.out is None:
        missing = 0
        with _reader_may_leave():
            sys.stdout.flush()
            missing = _print_attempts(source, chosen)
    else:
        written = write_attempts(source, chosen, args.out)
        missing = len(written.missing)
        print(
            f"passhat: wrote {len(written.transcripts)} transcripts and "
            f"{len(written.results)} result files to {args.out}",
            file=sys.stderr,
        )
    if missing:
        print(
            f"passhat: note: {missing} of {len(chosen)} attempts have no transcript in "
            f"{source.title}",
            file=sys.stderr,
        )
    return 0


def add_transcripts_parser(subparsers: Subparsers) -> None:
    """Add `passhat transcripts SOURCE --task ID [--trial N] [--attempt A] [--out DIR]`."""
    parser = subparsers.add_parser(
        "transcripts",
        help="the transcripts (and result JSON) of a task's attempts, local or on a cluster",
        description="Print the transcript and result JSON of every attempt of --task "
        "(narrowed by --trial and --attempt) in SOURCE, each under a `==> PATH (...) <==` "
        "header; with --out DIR write them in the run-directory layout instead "
        "(DIR/transcripts/<task>/<trial>-<attempt>.log, DIR/results/...json).",
    )
    add_source_options(parser)
    parser.add_argument("--task", required=True, metavar="ID", help="the task's id")
    parser.add_argument("--trial", type=_non_negative, metavar="N", help="only this trial")
    parser.add_argument(
        "--attempt", type=_non_negative, metavar="A", help="only this attempt (0: the first)"
    )
    parser.add_argument("--out", metavar="DIR", help="write the files under DIR, not to stdout")
    parser.set_defaults(func=_transcripts)


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def _times(text: str) -> int:
    """--times: one grading per transcript cannot disagree with itself, so at least 2
    (the same word as passhat.grading.regrade's check, whichever sees 0 or 1 first)."""
    value = _non_negative(text)
    if value < 2:
        raise argparse.ArgumentTypeError(
            f"must be at least 2 (noise needs two gradings), got {value}"
        )
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def _regrade(args: argparse.Namespace) -> int:
    from passhat.grading.regrade import regrade, spec_grader
    from passhat.grading.render import render_regrade
    from passhat.operator.records_source import is_eval_name, open_source

    if args.pods and not is_eval_name(args.source):
        raise UsageError(
            f"--pods: {args.source} is a directory; --pods regrades a cluster eval "
            "(NAME -n NS) in pods of its namespace"
        )
    source = open_source(
        args.source, namespace=args.namespace, kubeconfig=args.kubeconfig, uid=args.uid
    )
    if args.pods:
        check, records = _regrade_in_pods(args, source)
    else:
        grader = args.grader or spec_grader(source)
        if grader is None:
            raise UsageError(
                f"--grader: not given, and the eval of {source.title} declares no "
                "spec.grading.grader (give the grader command)"
            )
        records = source.records()
        check = regrade(
            source,
            grader,
            records=records,
            sample=args.sample,
            times=args.times,
            seed=args.seed,
            parallelism=args.parallelism,
            timeout=args.timeout,
        )
    text = render_regrade(check, args.format, records=records, title=source.title)
    _to_stdout(text)
    return 0


def _regrade_in_pods(
    args: argparse.Namespace, source: Any
) -> tuple[GraderCheck, list[AttemptRecord]]:
    """`regrade NAME --pods`: each grading a pod of the eval's grader in its namespace,
    made with the caller's rights (`passhat.operator.regrade_pods`)."""
    import math

    from passhat.api.load import parse_eval
    from passhat.grading.regrade import regrade
    from passhat.operator.kube import Kube
    from passhat.operator.live import client_config
    from passhat.operator.records_source import ClusterSource
    from passhat.operator.regrade_pods import PodGrader

    assert isinstance(source, ClusterSource)  # NB: an eval name opens one (_regrade)
    if args.grader:
        raise UsageError(
            "--pods runs the eval's spec.grading.grader (image, command, env) in pods; "
            "--grader CMD is a command for this machine: give one or the other"
        )
    records = source.records()
    text = source.spec_text()
    if text is None:
        raise UsageError(f"--pods: the records of {source.title} keep no spec")
    spec = parse_eval(text, f"{source.title} (spec)").spec
    kube = Kube(client_config(args.kubeconfig))
    grader = PodGrader(
        kube,
        namespace=source.namespace,
        name=source.name,
        uid=source.uid or "",
        spec=spec,
        timeout_s=max(1, math.ceil(args.timeout)),
    )
    try:
        check = regrade(
            source,
            f"pods of {spec.grading.grader.image if spec.grading.grader else '?'}",
            records=records,
            sample=args.sample,
            times=args.times,
            seed=args.seed,
            parallelism=args.parallelism,
            timeout=args.timeout,
            grade=grader,
        )
    finally:
        grader.cleanup()
        kube.close()
    return check, records


def add_regrade_parser(subparsers: Subparsers) -> None:
    """Add `passhat regrade SOURCE [--grader CMD] [--sample N] [--times R] ...`."""
    from passhat.grading.regrade import DEFAULT_PARALLELISM, DEFAULT_TIMEOUT_S

    parser = subparsers.add_parser(
        "regrade",
        help="grade stored transcripts several times to measure grader noise",
        description="Grade a seeded sample of the graded attempts of SOURCE (infra attempts "
        "were never graded: skipped and counted apart) R times each, without rerunning the "
        "agent, P gradings at a time, each within --timeout. Reports the noise rate (the "
        "share of transcripts that got both a pass and a fail) with its 95% interval, the "
        "share whose majority regrade differs from the recorded verdict, each noisy "
        "transcript under its flaky task, and the grader errors (a grader that crashed, "
        "hung or exited 75: never a pass or a fail). The grader has the contract of "
        "passhat trial --grader; without --grader the eval's spec.grading.grader is used.",
    )
    add_source_options(parser)
    parser.add_argument(
        "--grader", metavar="CMD", help="grader shell command (default: spec.grading.grader)"
    )
    parser.add_argument(
        "--pods",
        action="store_true",
        help="cluster evals: grade in pods of spec.grading.grader's image in the eval's "
        "namespace, made with your rights (create/get/delete pods, get pods/log), so a "
        "judge gets the cluster's network and its Secrets (grader.env); deleted as each ends",
    )
    parser.add_argument(
        "--sample", metavar="N", type=_positive, help="graded attempts to sample (default: all)"
    )
    parser.add_argument(
        "--times", metavar="R", type=_times, default=3, help="gradings of each, 2 or more (3)"
    )
    parser.add_argument("--seed", metavar="S", type=int, default=0, help="sampling seed (0)")
    parser.add_argument(
        "--parallelism",
        metavar="P",
        type=_positive,
        default=DEFAULT_PARALLELISM,
        help=f"gradings at a time ({DEFAULT_PARALLELISM})",
    )
    parser.add_argument(
        "--timeout",
        metavar="S",
        type=_seconds,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds one grading may take before it is killed, a grader error "
        f"({DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="report format (text)"
    )
    parser.set_defaults(func=_regrade)


def write_report_bundle(
    dest: str,
    *,
    source: ClusterSource,
    ks: Sequence[int],
    args: argparse.Namespace,
    ledger_attempts: int | None,
) -> None:
    """`passhat report NAME --bundle DIR`: the eval's archived attempts as a folder laid out
    like a run directory, with a report.html whose flaky tasks link to their transcripts.
    `ledger_attempts`: what the live eval counted (None for a deleted eval)."""
    import dataclasses

    from passhat.records.bundle import transcript_links, write_bundle
    from passhat.report import build_report, render_report
    from passhat.report.commands import report_intervals
    from passhat.stats import tally
    from passhat.trials.strips import strips_of
    from passhat.trials.usage import summarize_usage

    def render_html(records: Sequence[AttemptRecord], present: Collection[str]) -> str:
        tallies = tally((r["task_id"], r["outcome"]) for r in records)
        report = build_report(
            tallies,
            ks,
            title=args.title or source.title,
            intervals=report_intervals(tallies, ks, args),
            infra_by_reason=infra_errors_by_reason(records),
            strips=strips_of((r["task_id"], r["trial"], r["outcome"]) for r in records),
            usage=summarize_usage(records),
        )
        flaky = {row.task_id for row in report.flaky}
        links = transcript_links(records, tasks=flaky, present=present)
        return render_report(dataclasses.replace(report, transcripts=links), "html")

    written = write_bundle(source, dest, render_html=render_html)
    archived = len(written.transcripts) + len(written.missing)
    print(
        f"passhat: wrote bundle {dest}: {archived} attempts, {len(written.transcripts)} "
        f"transcripts, {len(written.results)} result files",
        file=sys.stderr,
    )
    if ledger_attempts is not None and archived < ledger_attempts:
        print(
            f"passhat: note: the archive holds {archived} of the {ledger_attempts} attempts "
            "the eval has counted (the rest are archived as their pods finish; bundle again "
            "later)",
            file=sys.stderr,
        )
    if written.missing:
        print(
            f"passhat: note: {len(written.missing)} attempts have no transcript in the archive",
            file=sys.stderr,
        )


def report_archived_eval(dest: str, *, name: str, namespace: str, args: argparse.Namespace) -> int:
    """`passhat report NAME --bundle DIR` of an eval that is gone: the report and the
    bundle of its archived records (the newest incarnation's)."""
    from passhat.api.load import parse_spec
    from passhat.operator.command import resolve_level
    from passhat.operator.records_source import cluster_source
    from passhat.report.commands import output_report
    from passhat.stats import tally
    from passhat.trials.strips import strips_of

    source = cluster_source(name, namespace=namespace, kubeconfig=args.kubeconfig)
    records = source.records()
    spec = parse_spec(source.manifest.get("spec"))
    resolve_level(args, spec)
    ks = sorted(set(args.k or spec.report_ks))
    too_big = [k for k in ks if k > spec.trials]
    if too_big:
        raise UsageError(f"--k {too_big[0]}: larger than the eval's trials={spec.trials}")
    print(
        f"passhat: note: consistencyeval {source.title} is gone; reporting its archived "
        f"records (uid {source.uid})",
        file=sys.stderr,
    )
    title = args.title or f"{source.title}: deleted, {len(records)} archived attempts"
    tallies = tally((r["task_id"], r["outcome"]) for r in records)
    output_report(
        tallies,
        ks,
        args,
        title=title,
        infra_by_reason=infra_errors_by_reason(records),
        strips=strips_of((r["task_id"], r["trial"], r["outcome"]) for r in records),
    )
    write_report_bundle(dest, source=source, ks=ks, args=args, ledger_attempts=None)
    return _archived_exit_code(spec, source.manifest, records, tallies)


def _archived_exit_code(
    spec: EvalSpec,
    manifest: Mapping[str, Any],
    records: Sequence[AttemptRecord],
    tallies: Sequence[TaskTally],
) -> int:
    """A deleted eval has no conditions left: its code comes from its archived records,
    as the operator would have decided it. Every slot (the manifest's task ids x trials)
    settled by a final record: the gate on the records (0/1, 0 without a gate); else 3."""
    from passhat.api.gate import EXIT_GATE_FAILED, EXIT_NOT_FINISHED, EXIT_PASSED, evaluate_gate

    task_ids = manifest.get("taskIds") or []
    settled = {(r["task_id"], r["trial"]) for r in records if r.get("final")}
    if not task_ids or len(settled) < len(task_ids) * spec.trials:
        return EXIT_NOT_FINISHED
    if spec.gate is None:
        return EXIT_PASSED
    verdict = evaluate_gate(spec.gate, tallies)
    print(
        f"passhat: gate {'passed' if verdict.passed else 'FAILED'}: {verdict.describe()}",
        file=sys.stderr,
    )
    return EXIT_PASSED if verdict.passed else EXIT_GATE_FAILED
