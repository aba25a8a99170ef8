"""The `passhat operator` and `passhat report` subcommands, for `passhat.cli`.

`passhat operator` runs the operator in this process (`passhat.operator.main`), the way
the Helm chart's Deployment starts it. `passhat report NAME` reads a live ConsistencyEval
back (`passhat.operator.live`) and renders it with the same report code as `passhat
score`, so the two print the same for the same trials; `--bundle DIR` also writes the
eval's archived attempts as a folder laid out like a run directory
(`passhat.operator.records_command`). Heavy imports (kopf, the kubernetes client) happen
only when a command runs.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import TYPE_CHECKING, Any, TypeAlias

from passhat.api.errors import UsageError
from passhat.report.commands import add_report_options

if TYPE_CHECKING:
    from passhat.api.spec import EvalSpec
    from passhat.operator.live import LiveEval

__all__ = ["add_operator_parser", "add_report_parser", "resolve_level"]

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0..65535 (0: any free port), got {value}")
    return value


def _lease(text: str) -> tuple[str, str]:
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME, got {text!r}")
    return namespace, name


def _operator(args: argparse.Namespace) -> int:
    from passhat.operator.leader import LeaseTimings
    from passhat.operator.main import OperatorOptions, config_with, run_drain, run_operator
    from passhat.operator.policy import TrialPolicy

    if args.allow_privileged_trials:
        raise UsageError(
            "--allow-privileged-trials was removed: it let every namespace's evals run "
            "privileged pods; grant namespaces one by one with --allow-privileged-trials-in NS "
            "(chart value operator.privilegedNamespaces)"
        )
    try:
        timings = LeaseTimings(
            lease_duration_s=args.lease_duration,
            renew_deadline_s=args.renew_deadline,
            retry_period_s=args.retry_period,
        )
    except ValueError as err:
        raise UsageError(f"--lease-duration / --renew-deadline / --retry-period: {err}") from None
    options = OperatorOptions(
        namespaces=tuple(dict.fromkeys(args.namespace)),
        metrics_port=args.metrics_port,
        trial_policy=TrialPolicy(
            privileged_namespaces=frozenset(args.allow_privileged_trials_in),
            priority_classes=frozenset(args.allow_priority_class),
            runtime_classes=frozenset(args.allow_runtime_class),
            tolerate_all=args.allow_tolerate_all,
        ),
        instance=args.instance,
        kubeconfig=args.kubeconfig,
        verbose=args.verbose,
        config=config_with(args.set),
        records_store=args.records_store,
        records_s3_endpoint=args.records_s3_endpoint,
        records_s3_region=args.records_s3_region,
        records_api_port=args.records_api_port,
        records_api_cert=args.records_api_cert,
        records_api_key=args.records_api_key,
        pod_key_file=args.pod_key_file,
        lease=args.lease,
        identity=args.identity,
        lease_timings=timings,
        rights_binding=args.rights_binding,
    )
    if args.action == "drain":
        print(run_drain(options, hold_s=args.hold))
        return 0
    run_operator(options)
    return 0


def add_operator_parser(subparsers: Subparsers) -> None:
    """Add `passhat operator [--namespace NS ...] [--metrics-port PORT] [...]`."""
    parser = subparsers.add_parser(
        "operator",
        help="run the Kubernetes operator for ConsistencyEval resources",
        description="Serve ConsistencyEval resources: one pod per trial attempt, status and "
        "Prometheus metrics kept exact. Uses --kubeconfig, $KUBECONFIG, ~/.kube/config or "
        "the in-cluster service account. Stops on SIGTERM / SIGINT.",
    )
    parser.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
        metavar="NS",
        help="serve only this namespace (repeatable; default: every namespace)",
    )
    parser.add_argument(
        "--metrics-port",
        type=_port,
        default=8080,
        metavar="PORT",
        help="port of /metrics and /healthz (default 8080; 0 picks a free one)",
    )
    parser.add_argument(
        "--allow-privileged-trials-in",
        action="append",
        default=[],
        metavar="NS",
        help="let trial templates of evals in namespace NS go beyond Pod Security "
        '"restricted" (privileged, root, host namespaces, hostPath, ...; refused with a '
        "ConfigError elsewhere); repeatable",
    )
    parser.add_argument(
        "--allow-priority-class",
        action="append",
        default=[],
        metavar="NAME",
        help="a PriorityClass trial templates may name (repeatable; default: none)",
    )
    parser.add_argument(
        "--allow-runtime-class",
        action="append",
        default=[],
        metavar="NAME",
        help="a RuntimeClass trial templates may name (repeatable; default: none)",
    )
    parser.add_argument(
        "--allow-tolerate-all",
        action="store_true",
        help="let trial templates tolerate every taint (operator Exists without a key)",
    )
    parser.add_argument(
        "--allow-privileged-trials",
        action="store_true",
        help="removed (it opened every namespace): use --allow-privileged-trials-in NS",
    )
    parser.add_argument(
        "--pod-key-file",
        metavar="PATH",
        help="the secret key of the mark the operator puts on every pod it creates, so that "
        "it counts and touches only its own pods (at least 32 bytes; the chart mounts one from "
        "a Secret). Default: $XDG_STATE_HOME/passhat/pod-key, made when absent",
    )
    parser.add_argument("--instance", metavar="ID", help="a name for this operator in its logs")
    parser.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file to use")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="tune one OperatorConfig field, e.g. resync_interval_s=1 (repeatable)",
    )
    parser.add_argument(
        "--records-api-port",
        type=_port,
        metavar="PORT",
        help="serve the records API (HTTPS, for the kube-apiserver's aggregation layer: "
        "APIService v1alpha1.records.passhat.dev) on this port; needs --records-api-cert, "
        "--records-api-key and a records store (default: not served)",
    )
    parser.add_argument(
        "--records-api-cert", metavar="PATH", help="the records API's serving certificate (PEM)"
    )
    parser.add_argument(
        "--records-api-key", metavar="PATH", help="the records API's serving key (PEM)"
    )
    parser.add_argument(
        "--records-store",
        metavar="URL",
        help="archive every trial attempt (record, logs, result JSON) before its pod is let "
        "go: file:///PATH or s3://BUCKET/PREFIX (S3 credentials from AWS_ACCESS_KEY_ID / "
        "AWS_SECRET_ACCESS_KEY); default: not archived (docs/records.md)",
    )
    parser.add_argument(
        "--records-s3-endpoint",
        metavar="URL",
        help="an S3-compatible server's endpoint, e.g. http://seaweedfs.storage:8333",
    )
    parser.add_argument(
        "--records-s3-region", metavar="REGION", help="the bucket's region (default us-east-1)"
    )
    parser.add_argument(
        "action",
        nargs="?",
        choices=("run", "drain"),
        default="run",
        help="run (default): serve evals until stopped; drain: stop every running eval in "
        "the served namespaces (Stopped, what was scored kept), let go of every finalizer the "
        "operator put on evals and pods, take --lease so no replica serves again, and exit "
        "(before uninstalling; the chart's pre-delete hook runs it)",
    )
    parser.add_argument(
        "--lease",
        type=_lease,
        metavar="NS/NAME",
        help="leader election on this coordination.k8s.io Lease: run as many replicas as you "
        "like, one serves evals, the others stand by; with --namespace, each namespace is "
        "also claimed for this release (Lease passhat-operator there) and refused when another "
        "release holds it (default: no election: run one replica only)",
    )
    parser.add_argument(
        "--identity",
        metavar="ID",
        help="this process's holder identity in the Lease (default: $POD_NAME, else the host "
        "name, and a random suffix: a restarted container is a new candidate)",
    )
    parser.add_argument(
        "--lease-duration",
        type=int,
        default=10,
        metavar="S",
        help="how long a standby waits for a silent leader before taking over (default 10)",
    )
    parser.add_argument(
        "--renew-deadline",
        type=float,
        default=7.0,
        metavar="S",
        help="a leader that could not renew for this long stops (default 7; shorter than the "
        "lease duration)",
    )
    parser.add_argument(
        "--retry-period",
        type=float,
        default=2.0,
        metavar="S",
        help="how often the leader renews and a standby tries (default 2)",
    )
    parser.add_argument(
        "--rights-binding",
        metavar="NAME",
        help="with --namespace and --lease: the RoleBinding in each served namespace that "
        "carries the finalizer passhat.dev/operator-rights; the leader removes it once a "
        "namespace being deleted holds nothing of the operator's, the drain removes it "
        "(the chart sets this)",
    )
    parser.add_argument(
        "--hold",
        type=int,
        default=3600,
        metavar="S",
        help="drain: how long the drain holds --lease, keeping every replica standing by "
        "(default 3600; delete the Lease to let them serve again)",
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="debug logging")
    parser.set_defaults(func=_operator)


_DURATION = re.compile(r"(\d+)([smh]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}
# How often `passhat report --wait` reads the eval again, and prints its progress at most.
WAIT_POLL_SECONDS = 2.0
WAIT_PROGRESS_SECONDS = 60.0


def _duration(text: str) -> float:
    """An argparse type: a timeout as kubectl writes it, `90`, `90s`, `30m` or `2h`."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"expected a duration like 90s, 30m or 2h, got {text!r}")
    return float(int(match[1]) * _UNIT_SECONDS[match[2]])


def _wait(args: argparse.Namespace, namespace: str) -> LiveEval:
    """Read the eval until its exit code is settled (or --wait's TIMEOUT passes).

    The first read's errors are the command's (no cluster, no such eval: exit 2); once
    the eval was read, an API error is retried until TIMEOUT, so an API server restart
    during a two-hour wait does not fail the pipeline. A progress line at most every
    WAIT_PROGRESS_SECONDS, when it changed, keeps a CI log alive.
    """
    from passhat.api.gate import settled
    from passhat.operator.live import read_live_eval

    deadline = None if args.wait is None else time.monotonic() + args.wait
    where = f"{namespace}/{args.name}"
    live: LiveEval | None = None
    said, said_at = "", 0.0
    while True:
        try:
            live = read_live_eval(args.name, namespace, kubeconfig=args.kubeconfig)
        except UsageError as err:
            if live is None:
                raise
            print(f"passhat: {err}; retrying", file=sys.stderr)
        else:
            if settled(
                live.status, generation=live.generation, has_gate=live.spec.gate is not None
            ):
                return live
            progress = live.status.get("progress") or {}
            slots = len(live.task_ids) * live.spec.trials
            line = (
                f"passhat: waiting for {where}: {progress.get('done', 0)}/{slots} trial "
                f"slots final, {progress.get('running', 0)} running"
            )
            now = time.monotonic()
            if line != said and (not said or now - said_at >= WAIT_PROGRESS_SECONDS):
                limit = "" if deadline is None else f" (at most {args.wait:g}s in all)"
                print(line + ("" if said else limit), file=sys.stderr)
                said, said_at = line, now
        if deadline is not None and time.monotonic() >= deadline:
            print(
                f"passhat: {where} did not finish within {args.wait:g}s; reporting it as it stands",
                file=sys.stderr,
            )
            assert live is not None
            return live
        pause = WAIT_POLL_SECONDS
        if deadline is not None:
            pause = max(0.0, min(pause, deadline - time.monotonic()))
        time.sleep(pause)


def _verdict_line(live: LiveEval) -> str | None:
    """`passhat: gate passed: <the GatePassed message>` once the gate is decided."""
    from passhat.api.conditions import GATE_PASSED, find_condition

    conditions = [c for c in live.status.get("conditions") or [] if isinstance(c, dict)]
    found = find_condition(conditions, GATE_PASSED)
    if found is None or found.get("status") not in ("True", "False"):
        return None
    result = "passed" if found["status"] == "True" else "FAILED"
    return f"passhat: gate {result}: {found.get('message', '')}"


def resolve_level(args: argparse.Namespace, spec: EvalSpec) -> None:
    """`--level` defaults to the gate's confidence (0.95 without a gate): the report then
    prints the interval whose low end a lowerBound gate compared, as the status has it."""
    if args.level is None:
        args.level = spec.gate.confidence if spec.gate is not None else 0.95


def _report(args: argparse.Namespace) -> int:
    from passhat.api.gate import exit_code_of
    from passhat.operator.live import EvalNotFound, current_namespace, read_live_eval
    from passhat.report.commands import output_report

    if args.bundle is not None:
        from passhat.records.bundle import prepare_bundle_dir

        # NB: before anything is printed: a refused --bundle is the one line of output
        prepare_bundle_dir(args.bundle)
    namespace = args.namespace or current_namespace(args.kubeconfig)
    try:
        if args.wait is not False:
            live = _wait(args, namespace)
        else:
            live = read_live_eval(args.name, namespace, kubeconfig=args.kubeconfig)
    except EvalNotFound:
        if args.bundle is None:
            raise
        from passhat.operator.records_command import report_archived_eval

        # NB: records outlive their eval: a deleted eval is bundled from its archive
        return report_archived_eval(args.bundle, name=args.name, namespace=namespace, args=args)
    resolve_level(args, live.spec)
    ks = sorted(set(args.k or live.spec.report_ks))
    too_big = [k for k in ks if k > live.spec.trials]
    if too_big:
        raise UsageError(f"--k {too_big[0]}: larger than the eval's trials={live.spec.trials}")
    progress = live.status.get("progress") or {}
    slots = len(live.task_ids) * live.spec.trials
    verdict = _verdict_line(live)
    title = args.title or (
        f"{namespace}/{args.name}: {live.status.get('phase') or 'Pending'}, "
        f"{progress.get('done', 0)}/{slots} trials final"
        # NB: the verdict in the title too: a markdown report posted as a PR comment says it
        + (f"; {verdict.removeprefix('passhat: ')}" if verdict is not None else "")
    )
    check = live.status.get("graderCheck")
    if isinstance(check, dict) and not args.title:
        title += "; " + _grader_note(check)
    summary = live.status.get("summary") or {}
    by_reason = summary.get("infraErrorsByReason") if isinstance(summary, dict) else None
    from passhat.trials.usage import UsageSummary

    output_report(
        live.tallies,
        ks,
        args,
        title=title,
        infra_by_reason=by_reason if isinstance(by_reason, dict) else None,
        strips=live.strips,
        usage=UsageSummary.from_status(live.status.get("usage")),
    )
    if verdict is not None:
        print(verdict, file=sys.stderr)
    code = exit_code_of(
        live.status, generation=live.generation, has_gate=live.spec.gate is not None
    )
    if args.bundle is not None:
        from passhat.operator.records_command import write_report_bundle
        from passhat.operator.records_source import cluster_source

        write_report_bundle(
            args.bundle,
            source=cluster_source(args.name, namespace=namespace, kubeconfig=args.kubeconfig),
            ks=ks,
            args=args,
            ledger_attempts=sum(t.attempts for t in live.tallies),
        )
    return code


def _grader_note(check: dict[str, Any]) -> str:
    """status.graderCheck in a few words, for the report's title."""
    if check.get("phase") != "Done":
        return (
            f"grader stability check running ({check.get('doneGradings', 0)}/"
            f"{check.get('gradings', 0)} gradings)"
        )
    verdict = "stable" if check.get("stable") else "NOT stable"
    return (
        f"grader noise rate {float(check.get('noiseRate') or 0.0):.3f}, max "
        f"{float(check.get('maxNoiseRate') or 0.0):g}: {verdict} ({check.get('noisyTotal', 0)} "
        f"of {check.get('judged', 0)} regraded transcripts noisy, status.graderCheck)"
    )


def add_report_parser(subparsers: Subparsers) -> None:
    """Add `passhat report NAME [-n NS] [--format F] [--out PATH] [...]`."""
    parser = subparsers.add_parser(
        "report",
        help="report a live ConsistencyEval from the cluster (same report as passhat score)",
        description="Read a ConsistencyEval and its trial ledger from the cluster and print "
        "the full report (every flaky task, not only the few listed in status), exactly as "
        "`passhat score` prints it for the same trials. Works while the eval still runs. "
        "Exit 0 finished and the gate passed (or no gate), 1 gate failed, 2 usage or input "
        "error, 3 not finished (docs/scoring.md#exit-codes).",
    )
    parser.add_argument("name", metavar="NAME", help="the ConsistencyEval's name")
    parser.add_argument(
        "--namespace", "-n", metavar="NS", help="its namespace (default: the context's)"
    )
    add_report_options(
        parser,
        k_help="k to report (default: the eval's ks)",
        title_help="report title (default: the eval and its progress)",
        level_help="(default: the gate's confidence, else 0.95)",
    )
    parser.set_defaults(level=None)
    parser.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file to use")
    parser.add_argument(
        "--wait",
        nargs="?",
        type=_duration,
        const=None,
        default=False,
        metavar="TIMEOUT",
        help="first wait until the eval has a verdict (Complete, GatePassed=False, a "
        "ConfigError that stops it, or Failed), at most TIMEOUT (90s, 30m, 2h; default: no "
        "limit); exit 3 if it has none by then",
    )
    parser.add_argument(
        "--bundle",
        metavar="DIR",
        help="also write every archived attempt to DIR, laid out like a passhat run "
        "directory (trials.jsonl, transcripts/, results/, spec.yaml, report.html linking "
        "the flaky tasks' transcripts); DIR must be new, empty or an earlier bundle. Works "
        "on a deleted eval too (its archived records)",
    )
    parser.set_defaults(func=_report)
