"""`passhat operator`: kopf, the /metrics + /healthz server and the config, in one process.

The operator is started as a module (never by file path, see docs/design.md) through this
one function, by the CLI locally and by the Helm chart's Deployment in a pod: it imports
the handlers (which register on kopf's default registry), starts the HTTP side door, and
runs kopf in standalone mode until SIGTERM / SIGINT. With `--lease NS/NAME` (the chart's
replicas) it first waits, serving /healthz and /metrics, until it leads on that Lease
(`leader.py`; it then claims its namespaces, and serves none another release claimed:
only those, never the others); only then does kopf start, and the
process exits the moment it stops leading (client-go's `OnStoppedLeading`), so a former
leader never drives an eval. On SIGTERM kopf stops first, then the Lease is released, and
a standby takes over at once. `run_drain` is `passhat operator drain` (`drain.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import kopf

from passhat.api.errors import UsageError
from passhat.operator.config import OperatorConfig
from passhat.operator.drain import DRAIN_HOLD_S, drain
from passhat.operator.kube import ApiError, Kube, load_client_config
from passhat.operator.leader import LeaseApi, LeaseElector, LeaseTimings, NamespaceClaims
from passhat.operator.live import client_config
from passhat.operator.ownership import load_pod_key
from passhat.operator.policy import TrialPolicy
from passhat.operator.records_api import RecordsApiServer, open_records_api
from passhat.operator.rights import RightsApi, settle_rights
from passhat.operator.server import DEFAULT_METRICS_PORT, OperatorServer
from passhat.records import RecordStore, open_store

__all__ = [
    "API_MAX_JSON_DEPTH",
    "OperatorOptions",
    "allow_api_depth",
    "config_with",
    "run_drain",
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
    # Leader election (leader.py): the Lease (namespace, name) the replicas elect on, this
    # candidate's identity (None: $POD_NAME, else the host name) and the timings. None:
    # standalone, as a single replica.
    lease: tuple[str, str] | None = None
    identity: str | None = None
    lease_timings: LeaseTimings = field(default_factory=LeaseTimings)
    # Namespaced mode: the RoleBinding in each served namespace whose finalizer the leader
    # removes once the namespace is being deleted and holds nothing of ours (rights.py).
    rights_binding: str | None = None


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


# mallopt(3)'s M_ARENA_MAX.
_M_ARENA_MAX = -8


def _glibc(name: str) -> Any | None:
    """The C library's function `name`; None where there is none (not glibc)."""
    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None


def bound_malloc_arenas(arenas: int) -> bool:
    """Cap glibc's malloc arenas at `arenas` for threads that start from now on (mallopt
    M_ARENA_MAX). False when nothing was set: `arenas` is 0, $MALLOC_ARENA_MAX is set (it
    wins), or the C library is not glibc (musl, macOS: no such option)."""
    mallopt = None if arenas <= 0 or "MALLOC_ARENA_MAX" in os.environ else _glibc("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, arenas) == 1)


_trimmer: threading.Thread | None = None


def trim_malloc_every(interval_s: float) -> threading.Thread | None:
    """Hand glibc's free heap pages back to the kernel every `interval_s` seconds
    (malloc_trim(3) with no pad, from a daemon thread; one per process, the first
    interval wins): glibc returns only the top of a heap by itself, and the free pages
    between live chunks stay in the RSS. None when off (`interval_s` 0) or not glibc.
    A trim holds the arenas' locks, so a thread that allocates meanwhile waits: 15-30 ms
    a trim on a synthetic 300 MB fragmented heap, the operator's heap is ~20 MiB."""
    global _trimmer
    if interval_s <= 0:
        return None
    if _trimmer is not None:
        return _trimmer
    trim = _glibc("malloc_trim")
    if trim is None:
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int

    def run() -> None:
        while True:
            time.sleep(interval_s)
            trim(0)  # NB: ctypes lets go of the GIL for the call

    _trimmer = threading.Thread(target=run, name="malloc-trim", daemon=True)
    _trimmer.start()
    return _trimmer


def run_operator(options: OperatorOptions) -> None:
    """Serve ConsistencyEvals until a signal stops the operator (blocks).

    Raises UsageError for a port that cannot be bound or missing cluster credentials.
    """
    if not 0 <= options.metrics_port <= 65535:
        raise UsageError(f"--metrics-port {options.metrics_port}: must be 0..65535")
    # NB: first, before the threads whose arenas it caps
    bound_malloc_arenas(options.config.malloc_arena_max)
    trim_malloc_every(options.config.malloc_trim_interval_s)
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
        asyncio.run(_serve(options, server, config))


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


async def _serve(options: OperatorOptions, server: OperatorServer, config: OperatorConfig) -> None:
    server.health.attach(asyncio.get_running_loop())
    election = _Election(options, config) if options.lease is not None else None
    try:
        if election is not None and not await election.lead():
            return  # NB: stopped (SIGTERM) while standing by
        await kopf.operator(
            standalone=True,
            clusterwide=not options.namespaces,
            namespaces=list(options.namespaces),
        )
    except kopf.LoginError as err:
        raise UsageError(f"cannot log in to the cluster: {err}") from None
    finally:
        server.health.stop()
        if election is not None:
            election.stop()


def _identity(options: OperatorOptions) -> str:
    """`--identity`, else `$POD_NAME` (or the host name) and a random suffix: a restarted
    container is a new candidate, not the holder it replaced (client-go's users add a
    uuid the same way)."""
    if options.identity:
        return options.identity
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class ElectionApi(LeaseApi, RightsApi, Protocol):
    """What the election calls: the Lease calls and the RoleBinding's (`Kube`)."""


class _Election:
    """Stand by until this process leads; then renew in a thread, and exit the process
    the moment leadership is lost.

    The namespace claims are renewed beside the Lease, but a refused claim is never a
    reason to stand by or to exit: it stops the evals of that namespace only
    (`handlers.runtime.refusal`). A claim is a Lease in a tenant's namespace; when a
    refusal stopped the operator, a tenant who may write Leases in their own namespace
    took it away from every other namespace (docs/security.md)."""

    def __init__(
        self, options: OperatorOptions, config: OperatorConfig, api: ElectionApi | None = None
    ) -> None:
        assert options.lease is not None
        timings = options.lease_timings
        if api is None:
            # NB: a call that takes longer than a retry period is a failed renew, not a wait
            quick = dataclasses.replace(
                config,
                request_timeout_s=timings.retry_period_s,
                request_retries=0,
                write_threads=1,
            )
            api = Kube(load_client_config(options.kubeconfig), quick)
        namespace, name = options.lease
        self.timings = timings
        self.elector = LeaseElector(
            api, namespace=namespace, name=name, identity=_identity(options), timings=timings
        )
        # NB: namespaced mode claims its namespaces before serving; cluster-wide mode each
        # namespace as its first eval there is served (handlers.run_eval asks `claim`)
        self.claims = NamespaceClaims(
            api, namespaces=options.namespaces, release=f"{namespace}/{name}", timings=timings
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._api = api
        self._namespaces = list(options.namespaces)
        self._rights_binding = options.rights_binding
        self._pod_key = config.pod_key
        self._refused_logged = float("-inf")

    async def lead(self) -> bool:
        """Wait until leading (the claims tried once: refusals are logged); False when
        stopped first."""
        loop = asyncio.get_running_loop()
        stopped = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stopped.set)
        logger.info(
            "standing by for Lease %s/%s as %s (lease %ds, renew deadline %gs, retry %gs)",
            self.elector.namespace,
            self.elector.name,
            self.elector.identity,
            self.timings.lease_duration_s,
            self.timings.renew_deadline_s,
            self.timings.retry_period_s,
        )
        while not stopped.is_set():
            if await asyncio.to_thread(self._try):
                await asyncio.to_thread(self._claim)
                break
            wait = self.timings.retry_period_s
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopped.wait(), wait)
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
        if stopped.is_set():
            self.elector.release()
            return False
        logger.info("leading: serving evals")
        from passhat.operator import handlers

        # NB: each eval's daemon asks before it serves and before each pass (both modes)
        handlers.runtime.claim = self.claims.claim
        handlers.runtime.refusal = self.claims.refusal
        self._thread = threading.Thread(target=self._renew, name="passhat-lease", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        """Stop renewing and release the Lease (a standby takes over at its next try)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timings.retry_period_s * 2)
        if self.elector.release():
            logger.info("released Lease %s/%s", self.elector.namespace, self.elector.name)

    def _try(self) -> bool:
        # NB: a leader that sees another holder (the drain) stops leading at once
        return self.elector.step()

    def _claim(self) -> list[str]:
        """Claim (or renew) every namespace; the refusals are logged, at most once a
        minute, and only stop the evals of their namespaces."""
        refusals = self.claims.acquire()
        if refusals and time.monotonic() - self._refused_logged > 60:
            self._refused_logged = time.monotonic()
            for refusal in refusals:
                logger.error(refusal)
        return refusals

    def _renew(self) -> None:
        """Renew every retry period; exit the process once the renew deadline passed
        without a renew (checked twice a retry period, also while a call hangs)."""
        renewer = threading.Thread(target=self._renew_loop, name="passhat-renew", daemon=True)
        renewer.start()
        while not self._stop.wait(self.timings.retry_period_s / 2):
            if self.elector.lost():
                _exit_lost(self.elector)

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.timings.retry_period_s):
            self._try()
            self._claim()
            self._settle_rights()

    def _settle_rights(self) -> None:
        """Let go of the RoleBinding of each served namespace being deleted that holds
        nothing of ours any more (rights.py)."""
        if self._rights_binding is None or not self.elector.leading():
            return
        for namespace in self._namespaces:
            try:
                settle_rights(self._api, namespace, self._rights_binding, pod_key=self._pod_key)
            except ApiError as err:
                logger.warning("namespace %s: cannot settle its RoleBinding: %s", namespace, err)


def _exit_lost(elector: LeaseElector) -> None:
    """Exit now: another candidate may lead soon, and a former leader must not write.
    (client-go's users exit in OnStoppedLeading too; the kubelet restarts the container,
    which stands by.)"""
    logger.error(
        "lost the Lease %s/%s (holder now: %s): exiting",
        elector.namespace,
        elector.name,
        elector.holder or "none",
    )
    logging.shutdown()
    os._exit(3)


def run_drain(options: OperatorOptions, *, hold_s: int | None = None) -> str:
    """`passhat operator drain`: stop the evals and let go of every finalizer (drain.py);
    returns the one-line summary."""
    try:
        pod_key = load_pod_key(options.pod_key_file)
    except (OSError, ValueError) as err:
        raise UsageError(f"--pod-key-file: {err}") from None
    config = dataclasses.replace(options.config, pod_key=pod_key)
    store = _open_store(options)
    from passhat.operator.archive import Archiver  # NB: with the store only

    api = Kube(load_client_config(options.kubeconfig), config)
    archiver = (
        Archiver(
            store,
            api,
            log_limit=config.archive_log_limit_bytes,
            log_grace_s=config.archive_log_grace_s,
        )
        if store is not None
        else None
    )
    try:
        report = drain(
            api,
            namespaces=options.namespaces,
            config=config,
            lease=options.lease,
            archiver=archiver,
            timings=options.lease_timings,
            rights_binding=options.rights_binding,
            hold_s=hold_s if hold_s is not None else DRAIN_HOLD_S,
        )
    finally:
        api.close()
    return report.summary()
