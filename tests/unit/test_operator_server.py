"""passhat.operator.server: /metrics serves the registry, /healthz follows the event loop."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from passhat import metrics
from passhat.operator.server import Health, OperatorServer


def get(port: int, path: str) -> tuple[int, str]:
    """GET a path of the local server: (status, body)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture
def server() -> Iterator[OperatorServer]:
    """A server on a free loopback port, closed after the test."""
    srv = OperatorServer(port=0, host="127.0.0.1", health=Health(timeout_s=5.0)).start()
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An asyncio loop running in a background thread, like kopf's."""
    lp = asyncio.new_event_loop()
    thread = threading.Thread(target=lp.run_forever, daemon=True)
    thread.start()
    try:
        yield lp
    finally:
        lp.call_soon_threadsafe(lp.stop)
        thread.join(timeout=30)
        lp.close()


def test_metrics_endpoint_serves_passhat_series(server: OperatorServer) -> None:
    """/metrics renders the operator registry in the Prometheus text format."""
    metrics.observe_status("srv-ns", "srv-eval", {"progress": {"running": 4}})
    code, body = get(server.port, "/metrics")
    assert code == 200
    assert 'passhat_trials_running{eval="srv-eval",namespace="srv-ns"} 4.0' in body
    assert "# TYPE passhat_reconcile_duration_seconds histogram" in body
    metrics.forget_eval("srv-ns", "srv-eval")


def test_healthz_follows_the_event_loop(
    server: OperatorServer, loop: asyncio.AbstractEventLoop
) -> None:
    """/healthz is 200 while the attached loop answers and 503 once it is stuck or stopped."""
    assert get(server.port, "/healthz") == (200, "starting")
    server.health.attach(loop)
    assert get(server.port, "/healthz") == (200, "ok")
    release = threading.Event()
    loop.call_soon_threadsafe(release.wait, 60)  # NB: blocks the loop, like a wedged operator
    code, body = get(server.port, "/healthz")
    release.set()
    assert code == 503 and "did not answer" in body
    deadline = time.monotonic() + 30
    while get(server.port, "/healthz")[0] != 200:
        assert time.monotonic() < deadline, "loop never recovered"
        time.sleep(0.1)
    server.health.stop()
    assert get(server.port, "/healthz") == (503, "operator stopped")


def test_health_of_a_closed_loop() -> None:
    """A loop that is attached but not running is unhealthy."""
    health = Health(timeout_s=1.0)
    lp = asyncio.new_event_loop()
    health.attach(lp)
    assert health.check() == (False, "event loop not running")
    lp.close()
    assert health.check()[0] is False


def test_unknown_path_is_404(server: OperatorServer) -> None:
    """Only /metrics, /healthz (and /livez, /) exist."""
    assert get(server.port, "/nope")[0] == 404
    assert get(server.port, "/livez")[0] == 200
