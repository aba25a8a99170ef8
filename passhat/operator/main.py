"""`passhat operator`: kopf, the /metrics + /healthz server and the config, in one process.

The operator is started as a module (never by file path, see docs/design.md) through this
one function, by the CLI locally and by the Helm chart's Deployment in a pod: it imports
the handlers (which register on kopf's default registry), starts the HTTP side door, and
runs kopf in standalone mode (no peering: one operator per set of namespaces, like a
Deployment with one replica) until SIGTERM / SIGINT.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import kopf

from passhat.api.errors import UsageError
from passhat.operator.config import OperatorConfig
from passhat.operator.server import DEFAULT_METRICS_PORT, OperatorServer

__all__ = ["OperatorOptions", "run_operator"]

logger = logging.getLogger(__name__)

HANDLERS_MODULE = "passhat.operator.handlers"


@dataclass(frozen=True)
class OperatorOptions:
    """What `passhat operator` was asked for on its command line."""

    namespaces: Sequence[str] = ()
    metrics_port: int = DEFAULT_METRICS_PORT
    metrics_host: str = "0.0.0.0"
    allow_privileged_trials: bool = False
    instance: str | None = None
    verbose: bool = False
    config: OperatorConfig = field(default_factory=OperatorConfig)


def run_operator(options: OperatorOptions) -> None:
    """Serve ConsistencyEvals until a signal stops the operator (blocks).

    Raises UsageError for a port that cannot be bound.
    """
    if not 0 <= options.metrics_port <= 65535:
        raise UsageError(f"--metrics-port {options.metrics_port}: must be 0..65535")
    config = OperatorConfig(
        **{**vars(options.config), "allow_privileged_trials": options.allow_privileged_trials}
    )
    kopf.configure(verbose=options.verbose)
    handlers = importlib.import_module(HANDLERS_MODULE)
    try:
        server = OperatorServer(port=options.metrics_port, host=options.metrics_host)
    except OSError as err:
        raise UsageError(
            f"--metrics-port {options.metrics_port}: cannot listen ({err.strerror or err})"
        ) from None
    scope = ", ".join(options.namespaces) if options.namespaces else "all namespaces"
    logger.info(
        "passhat operator%s: serving %s; /metrics and /healthz on port %d%s",
        f" {options.instance}" if options.instance else "",
        scope,
        server.port,
        "; privileged trial templates allowed" if config.allow_privileged_trials else "",
    )
    with server:
        asyncio.run(_serve(options, config, handlers, server))


async def _serve(
    options: OperatorOptions, config: OperatorConfig, handlers: object, server: OperatorServer
) -> None:
    server.health.attach(asyncio.get_running_loop())
    try:
        await kopf.operator(
            standalone=True,
            clusterwide=not options.namespaces,
            namespaces=list(options.namespaces),
            memo=kopf.Memo(config=config, instance=options.instance),
        )
    finally:
        server.health.stop()
