"""`passhat operator`: kopf, the /metrics + /healthz server and the config, in one process.

The operator is started as a module (never by file path, see docs/design.md) through this
one function, by the CLI locally and by the Helm chart's Deployment in a pod: it imports
the handlers (which register on kopf's default registry), starts the HTTP side door, and
runs kopf in standalone mode (no peering: one operator per set of namespaces, like a
Deployment with one replica) until SIGTERM / SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import kopf

from passhat.api.errors import UsageError
from passhat.operator.config import OperatorConfig
from passhat.operator.live import client_config
from passhat.operator.ownership import load_pod_key
from passhat.operator.policy import TrialPolicy
from passhat.operator.records_api import RecordsApiServer, open_records_api
from passhat.operator.server import DEFAULT_METRICS_PORT, OperatorServer
from passhat.records import RecordStore, open_store

__all__ = [
    "API_MAX_JSON_DEPTH",
    "OperatorOptions",
    "allow_api_depth",
    "config_with",
    "run_operator",
]

logger = logging.getLogger(__name__)

# The API server accepts objects nested up to 10,000 levels deep (sigs.k8s.io/json's
# maxNestingDepth), e.g. in a task's free-form `params`: any user who may create evals can
# store one. Python's json stops at the recursion limit (1,000 by default) with a
# RecursionError, which in kopf's watcher stopped the whole operator, for every namespace,
# for as long as such an eval existed. (Within a few levels of its limit, the API server
# itself can no longer list the resource: docs/operator.md.)
API_MAX_JSON_DEPTH = 10_000
# The depth, the list or watch event around it, and the Python code that walks a body
# (copies, diffs: up to two frames a level), with room to spare.
_RECURSION_LIMIT = 2 * API_MAX_JSON_DEPTH + 5_000
# The json codec recurses in C, about 150 bytes of stack a level (10,000 levels fail in a
# 1 MiB thread stack); the main thread has the process's 8 MiB.
_THREAD_STACK_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class OperatorOptions:
    """What `passhat operator` was asked for on its command line."""

    namespaces: Sequence[str] = ()
    metrics_port: int = DEFAULT_METRICS_PORT
    metrics_host: str = "0.0.0.0"
    # The cluster admin's grants to trial templates (privileged namespaces, classes, ...).
    trial_policy: TrialPolicy = field(default_factory=TrialPolicy)
    instance: str | None = None
    kubeconfig: str | None = None
    verbose: bool = False
    config: OperatorConfig = field(default_factory=OperatorConfig)
    # Where every attempt is archived (passhat.records.open_store): file:///PATH or
    # s3://BUCKET/PREFIX (+ endpoint, region; credentials from AWS_* variables). None: off.
    records_store: str | None = None
    records_s3_endpoint: str | None = None
    records_s3_region: str | None = None
    # The records API (passhat.operator.records_api): served when a port is given.
    records_api_port: int | None = None
    records_api_host: str = "0.0.0.0"
    records_api_cert: str | None = None
    records_api_key: str | None = None
    # The file holding the key of the operator's creation mark on its pods (ownership.py);
    # None: ownership.default_key_file(), made when absent.
    pod_key_file: str | None = None


def config_with(settings: Sequence[str], base: OperatorConfig | None = None) -> OperatorConfig:
    """`base` with `NAME=VALUE` settings applied (`--set resync_interval_s=1`).

    Raises UsageError naming the setting for an unknown name or a value of the wrong type.
    """
    config = base if base is not None else OperatorConfig()
    # NB: the trial policy is set by its own flags (--allow-privileged-trials-in, ...)
    fields = {
        f.name: f
        for f in dataclasses.fields(OperatorConfig)
        if isinstance(getattr(config, f.name), bool | int | float | str)
    }
    changes: dict[str, object] = {}
    for setting in settings:
        name, sep, text = setting.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in fields:
            known = ", ".join(sorted(fields))
            raise UsageError(f"--set {setting}: expected NAME=VALUE with NAME one of {known}")
        kind = type(getattr(config, name))
        try:
            if kind is bool:
                if text.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(text)
                changes[name] = text.lower() in ("true", "1")
            else:
                changes[name] = kind(text)
        except ValueError:
            raise UsageError(f"--set {setting}: {text!r} is not a valid {kind.__name__}") from None
    return dataclasses.replace(config, **changes)  # type: ignore[arg-type]


def _open_store(options: OperatorOptions) -> RecordStore | None:
    """The record store the options name (None: attempts are not archived)."""
    if options.records_store is None:
        return None
    try:
        store = open_store(
            options.records_store,
            endpoint=options.records_s3_endpoint,
            region=options.records_s3_region,
        )
    except ValueError as err:
        raise UsageError(f"--records-store: {err}") from None
    logger.info("archiving every trial attempt to %s", store.describe())
    return store


def _records_api(options: OperatorOptions, store: RecordStore | None) -> RecordsApiServer | None:
    """The records API server (not started) when `--records-api-port` asks for it."""
    if options.records_api_port is None:
        return None
    server = open_records_api(
        store=store,
        configuration=client_config(options.kubeconfig),
        port=options.records_api_port,
        cert_file=options.records_api_cert,
        key_file=options.records_api_key,
        host=options.records_api_host,
    )
    logger.info("records API (records.passhat.dev/v1alpha1) on port %d", server.port)
    return server


def allow_api_depth() -> None:
    """Let this process decode and walk any object the API server returns (see
    API_MAX_JSON_DEPTH): a higher recursion limit, and larger stacks for threads started
    from now on. Never lowers either."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), _RECURSION_LIMIT))
    threading.stack_size(max(threading.stack_size(), _THREAD_STACK_BYTES))


def run_operator(options: OperatorOptions) -> None:
    """Serve ConsistencyEvals until a signal stops the operator (blocks).

    Raises UsageError for a port that cannot be bound or missing cluster credentials.
    """
    if not 0 <= options.metrics_port <= 65535:
        raise UsageError(f"--metrics-port {options.metrics_port}: must be 0..65535")
    try:
        pod_key = load_pod_key(options.pod_key_file)
    except (OSError, ValueError) as err:
        raise UsageError(f"--pod-key-file: {err}") from None
    config = dataclasses.replace(options.config, trial_policy=options.trial_policy, pod_key=pod_key)
    if options.kubeconfig is not None:
        # NB: kopf logs in through the kubernetes client, which reads $KUBECONFIG.
        os.environ["KUBECONFIG"] = options.kubeconfig
    client_config(options.kubeconfig)
    store = _open_store(options)
    try:
        server = OperatorServer(port=options.metrics_port, host=options.metrics_host)
    except OSError as err:
        raise UsageError(
            f"--metrics-port {options.metrics_port}: cannot listen ({err.strerror or err})"
        ) from None
    records_api = _records_api(options, store)
    # NB: process-wide, so only once nothing can refuse to start any more; before the
    # threads that read evals (passes, pod watches, API pools) and kopf's watchers
    allow_api_depth()
    kopf.configure(verbose=options.verbose)
    from passhat.operator import handlers  # NB: importing registers the kopf handlers

    handlers.configure(
        config, kubeconfig=options.kubeconfig, namespaces=options.namespaces, store=store
    )
    scope = ", ".join(options.namespaces) if options.namespaces else "all namespaces"
    logger.info(
        "passhat operator%s: serving %s; /metrics and /healthz on port %d%s",
        f" {options.instance}" if options.instance else "",
        scope,
        server.port,
        _grants(config.trial_policy),
    )
    with server, records_api or contextlib.nullcontext():
        asyncio.run(_serve(options, server))


def _grants(policy: TrialPolicy) -> str:
    """The cluster admin's grants to trial templates, for the start-up log line."""
    parts = [
        f"{what}: {', '.join(sorted(names))}"
        for what, names in (
            ("privileged trials in", policy.privileged_namespaces),
            ("priority classes", policy.priority_classes),
            ("runtime classes", policy.runtime_classes),
        )
        if names
    ]
    if policy.tolerate_all:
        parts.append("tolerations of every taint")
    return "; allowed " + "; ".join(parts) if parts else ""


async def _serve(options: OperatorOptions, server: OperatorServer) -> None:
    server.health.attach(asyncio.get_running_loop())
    try:
        await kopf.operator(
            standalone=True,
            clusterwide=not options.namespaces,
            namespaces=list(options.namespaces),
        )
    except kopf.LoginError as err:
        raise UsageError(f"cannot log in to the cluster: {err}") from None
    finally:
        server.health.stop()
