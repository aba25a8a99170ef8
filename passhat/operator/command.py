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
from typing import TypeAlias

from passhat.api.errors import UsageError
from passhat.report.commands import add_report_options

__all__ = ["add_operator_parser", "add_report_parser"]

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0..65535 (0: any free port), got {value}")
    return value


def _operator(args: argparse.Namespace) -> int:
    from passhat.operator.main import OperatorOptions, config_with, run_operator
    from passhat.operator.policy import TrialPolicy

    if args.allow_privileged_trials:
        raise UsageError(
            "--allow-privileged-trials was removed: it let every namespace's evals run "
            "privileged pods; grant namespaces one by one with --allow-privileged-trials-in NS "
            "(chart value operator.privilegedNamespaces)"
        )
    run_operator(
        OperatorOptions(
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
        )
    )
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
    parser.add_argument("--verbose", "-v", action="store_true", help="debug logging")
    parser.set_defaults(func=_operator)


def _report(args: argparse.Namespace) -> int:
    from passhat.operator.live import EvalNotFound, current_namespace, read_live_eval
    from passhat.report.commands import output_report

    if args.bundle is not None:
        from passhat.records.bundle import prepare_bundle_dir

        # NB: before anything is printed: a refused --bundle is the one line of output
        prepare_bundle_dir(args.bundle)
    namespace = args.namespace or current_namespace(args.kubeconfig)
    try:
        live = read_live_eval(args.name, namespace, kubeconfig=args.kubeconfig)
    except EvalNotFound:
        if args.bundle is None:
            raise
        from passhat.operator.records_command import report_archived_eval

        # NB: records outlive their eval: a deleted eval is bundled from its archive
        return report_archived_eval(args.bundle, name=args.name, namespace=namespace, args=args)
    ks = sorted(set(args.k or live.spec.report_ks))
    too_big = [k for k in ks if k > live.spec.trials]
    if too_big:
        raise UsageError(f"--k {too_big[0]}: larger than the eval's trials={live.spec.trials}")
    progress = live.status.get("progress") or {}
    slots = len(live.task_ids) * live.spec.trials
    title = args.title or (
        f"{namespace}/{args.name}: {live.status.get('phase') or 'Pending'}, "
        f"{progress.get('done', 0)}/{slots} trials final"
    )
    summary = live.status.get("summary") or {}
    by_reason = summary.get("infraErrorsByReason") if isinstance(summary, dict) else None
    code = output_report(
        live.tallies,
        ks,
        args,
        title=title,
        infra_by_reason=by_reason if isinstance(by_reason, dict) else None,
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


def add_report_parser(subparsers: Subparsers) -> None:
    """Add `passhat report NAME [-n NS] [--format F] [--out PATH] [...]`."""
    parser = subparsers.add_parser(
        "report",
        help="report a live ConsistencyEval from the cluster (same report as passhat score)",
        description="Read a ConsistencyEval and its trial ledger from the cluster and print "
        "the full report (every flaky task, not only the few listed in status), exactly as "
        "`passhat score` prints it for the same trials. Works while the eval still runs.",
    )
    parser.add_argument("name", metavar="NAME", help="the ConsistencyEval's name")
    parser.add_argument(
        "--namespace", "-n", metavar="NS", help="its namespace (default: the context's)"
    )
    add_report_options(
        parser,
        k_help="k to report (default: the eval's ks)",
        title_help="report title (default: the eval and its progress)",
    )
    parser.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file to use")
    parser.add_argument(
        "--bundle",
        metavar="DIR",
        help="also write every archived attempt to DIR, laid out like a passhat run "
        "directory (trials.jsonl, transcripts/, results/, spec.yaml, report.html linking "
        "the flaky tasks' transcripts); DIR must be new, empty or an earlier bundle. Works "
        "on a deleted eval too (its archived records)",
    )
    parser.set_defaults(func=_report)
