"""The operator's HTTP side door: Prometheus `/metrics` and a `/healthz` liveness probe.

Prometheus scrapes the operator, and the kubelet restarts it when it stops answering; both
need a port that works whatever kopf is doing. This small threaded server lives beside
kopf's event loop: `/metrics` renders `passhat.metrics.REGISTRY`, and `/healthz` answers
200 only while the operator's asyncio loop still runs callbacks (a wedged loop is the
failure a liveness probe exists to catch). Port 0 picks a free port (tests).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from passhat.metrics import REGISTRY

__all__ = ["DEFAULT_METRICS_PORT", "Health", "OperatorServer"]

DEFAULT_METRICS_PORT = 8080

logger = logging.getLogger(__name__)


class Health:
    """Whether the operator is alive: its event loop is attached, running and responsive."""

    def __init__(self, *, timeout_s: float = 10.0) -> None:
        self._timeout_s = timeout_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped = False

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Watch `loop` (the one kopf runs in) from now on."""
        self._loop = loop
        self._stopped = False

    def stop(self) -> None:
        """Report unhealthy from now on (the operator is shutting down)."""
        self._stopped = True

    def check(self) -> tuple[bool, str]:
        """(healthy, one-line reason); never raises, never blocks longer than the timeout."""
        if self._stopped:
            return False, "operator stopped"
        loop = self._loop
        if loop is None:
            return True, "starting"
        if loop.is_closed() or not loop.is_running():
            return False, "event loop not running"
        answered = threading.Event()
        try:
            loop.call_soon_threadsafe(answered.set)
        except RuntimeError:
            return False, "event loop closed"
        if not answered.wait(self._timeout_s):
            return False, f"event loop did not answer within {self._timeout_s:g}s"
        return True, "ok"


def _handler(
    registry: CollectorRegistry, health: Callable[[], tuple[bool, str]]
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "passhat-operator"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
                self._reply(200, content_type, encoder(registry))
            elif path in ("/healthz", "/livez"):
                ok, reason = health()
                self._reply(200 if ok else 503, "text/plain; charset=utf-8", reason.encode())
            elif path == "/":
                self._reply(
                    200, "text/plain; charset=utf-8", b"passhat operator: /metrics /healthz\n"
                )
            else:
                self._reply(404, "text/plain; charset=utf-8", b"not found\n")

        def _reply(self, code: int, content_type: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            logger.debug("http: " + format, *args)

    return Handler


class OperatorServer:
    """`/metrics` and `/healthz` on one port, served from a daemon thread."""

    def __init__(
        self,
        *,
        port: int = DEFAULT_METRICS_PORT,
        host: str = "0.0.0.0",
        health: Health | None = None,
        registry: CollectorRegistry = REGISTRY,
    ) -> None:
        self.health = health if health is not None else Health()
        self._httpd = ThreadingHTTPServer((host, port), _handler(registry, self.health.check))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="passhat-metrics", daemon=True
        )

    @property
    def port(self) -> int:
        """The port actually bound (useful with port 0)."""
        return int(self._httpd.server_address[1])

    def start(self) -> OperatorServer:
        """Start serving in the background; returns self."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._thread.join(timeout=10)
        self._httpd.server_close()

    def __enter__(self) -> OperatorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
