"""The records API's port is open to every pod: a peer without the front proxy's
certificate gets one answer and the connection closes, and at most `max_connections`
connections (threads) are open at once, one more being closed on accept. Before, every
connection was a thread of the operator's process kept 120 s while idle, so any tenant's
pod could open thousands of them."""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
import time

import pytest

from passhat.operator import records_api
from tests.unit.test_records_api_tls import TRIALS, Served, request, served

__all__ = ["served"]  # NB: the fixture, used by name


def raw(served: Served) -> socket.socket:
    """A TCP connection to the server that says nothing (no TLS handshake)."""
    return socket.create_connection(("127.0.0.1", served.server.port), timeout=10)


def closed_by_server(sock: socket.socket, within_s: float) -> bool:
    sock.settimeout(within_s)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_without_the_proxy_cert_one_answer_then_closed(served: Served) -> None:
    """No client certificate: 401, `Connection: close`, and the server closes."""
    ctx = ssl.create_default_context(cafile=str(served.serving_ca_file))
    conn = http.client.HTTPSConnection("127.0.0.1", served.server.port, context=ctx, timeout=10)
    try:
        conn.request("GET", TRIALS)
        response = conn.getresponse()
        response.read()
        assert response.status == 401
        assert response.getheader("Connection") == "close"
        assert conn.sock is None or closed_by_server(conn.sock, 5)
    finally:
        conn.close()


@pytest.fixture
def small_cap(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(records_api._TLSServer, "max_connections", 4)
    monkeypatch.setattr(records_api._TLSServer, "handshake_timeout_s", 30.0)
    return 4


def closed_within(socks: list[socket.socket], seconds: float) -> int:
    """How many of `socks` the server closed within `seconds`."""
    closed: set[socket.socket] = set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and len(closed) < len(socks):
        readable, _, _ = select.select([s for s in socks if s not in closed], [], [], 0.1)
        closed.update(s for s in readable if closed_by_server(s, 0.1))
    return len(closed)


def test_connections_beyond_the_cap_are_closed_on_accept(small_cap: int, served: Served) -> None:
    """20 silent connections on a cap of 4: the server holds 4 threads for them and closes
    the 16 others at once; when the silent ones go, the front proxy is served again."""
    before = threading.active_count()
    socks = [raw(served) for _ in range(20)]
    try:
        assert closed_within(socks, 2) == 20 - small_cap
        assert threading.active_count() - before <= small_cap
    finally:
        for sock in socks:
            sock.close()
    deadline = time.monotonic() + 10
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.1)
    proxy = served.proxy_ca.issue_files(served.tmp, "proxy", "front-proxy-client")
    code, body = request(served, TRIALS, proxy)
    assert code == 200, body
