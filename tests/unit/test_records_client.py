"""`RecordsClient`: the paths it asks for and the one-line errors it makes of each answer,
against a local HTTP server standing in for the kube-apiserver."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from passhat.api.errors import PasshatError
from passhat.operator.records_client import UNAVAILABLE, RecordsApiError, RecordsClient

# path (with query) -> (code, content type, body)
Routes = dict[str, tuple[int, str, bytes]]


def status(code: int, message: str, *, ours: bool = True, kind: str = "evals") -> bytes:
    details = {"group": "records.passhat.dev", "kind": kind} if ours else {}
    body = {"kind": "Status", "code": code, "message": message, "details": details}
    return json.dumps(body).encode()


class FakeApiServer:
    def __init__(self) -> None:
        self.routes: Routes = {}
        self.seen: list[tuple[str, str]] = []  # (path, authorization header)
        routes, seen = self.routes, self.seen

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append((self.path, self.headers.get("Authorization", "")))
                code, ctype, body = routes.get(
                    self.path, (404, "text/plain", b"404 page not found")
                )
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[tuple[FakeApiServer, RecordsClient]]:
    server = FakeApiServer()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {"server": f"http://127.0.0.1:{server.httpd.server_port}"},
                    }
                ],
                "users": [{"name": "alice", "user": {"token": "alice-token"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "alice"}}],
                "current-context": "c",
            }
        )
    )
    client = RecordsClient(str(kubeconfig))
    try:
        yield server, client
    finally:
        client.close()
        server.close()


BASE = "/apis/records.passhat.dev/v1alpha1/namespaces/team-a/evals/ev"


def test_records_reads_manifest_and_records_as_the_user(
    fake: tuple[FakeApiServer, RecordsClient],
) -> None:
    """GET .../evals/NAME/trials with the kubeconfig's credentials; (manifest, records)."""
    server, client = fake
    body = {
        "kind": "EvalTrials",
        "eval": {"name": "ev", "taskIds": ["a"]},
        "records": [{"task_id": "a", "trial": 0, "attempt": 0, "outcome": "pass"}],
    }
    server.routes[f"{BASE}/trials"] = (200, "application/json", json.dumps(body).encode())
    manifest, records = client.records("team-a", "ev")
    assert manifest == {"name": "ev", "taskIds": ["a"]}
    assert records == body["records"]
    assert server.seen == [(f"{BASE}/trials", "Bearer alice-token")]


def test_transcript_bytes_and_absent_transcript(
    fake: tuple[FakeApiServer, RecordsClient],
) -> None:
    """The transcript's bytes; None for the records API's 404 about the transcript."""
    server, client = fake
    path = f"{BASE}/transcript?task=x%2Fy&trial=1&attempt=0"
    server.routes[path] = (200, "text/plain", b"== agent ==\nhello\n")
    assert client.transcript("team-a", "ev", task_id="x/y", trial=1, attempt=0) == (
        b"== agent ==\nhello\n"
    )
    missing = f"{BASE}/transcript?task=x%2Fy&trial=2&attempt=0"
    server.routes[missing] = (404, "application/json", status(404, "no", kind="evals/transcript"))
    assert client.transcript("team-a", "ev", task_id="x/y", trial=2, attempt=0) is None


def test_forbidden_is_the_missing_right(fake: tuple[FakeApiServer, RecordsClient]) -> None:
    """403: the records API's message, one line, a PasshatError."""
    server, client = fake
    message = 'user "alice" cannot get pods/log in namespace "team-a"'
    server.routes[f"{BASE}/trials"] = (403, "application/json", status(403, message))
    with pytest.raises(PasshatError) as err:
        client.records("team-a", "ev")
    assert str(err.value) == message
    assert isinstance(err.value, RecordsApiError) and err.value.code == 403


@pytest.mark.parametrize(
    ("code", "body"),
    [
        (404, b"404 page not found"),
        (404, status(404, "the server could not find the requested resource", ours=False)),
        (503, b"service unavailable"),
    ],
)
def test_missing_api_service_says_the_api_is_not_available(
    fake: tuple[FakeApiServer, RecordsClient], code: int, body: bytes
) -> None:
    """No APIService (404) or no operator behind it (503): the one hint to install it."""
    server, client = fake
    server.routes[f"{BASE}/trials"] = (code, "application/json", body)
    with pytest.raises(RecordsApiError) as err:
        client.records("team-a", "ev")
    assert str(err.value).startswith(UNAVAILABLE)
    path = f"{BASE}/transcript?task=a&trial=0&attempt=0"
    server.routes[path] = (code, "application/json", body)
    with pytest.raises(RecordsApiError, match="records API is not available"):
        client.transcript("team-a", "ev", task_id="a", trial=0, attempt=0)


def test_eval_without_records_is_an_error_not_an_empty_list(
    fake: tuple[FakeApiServer, RecordsClient],
) -> None:
    """The records API's own 404 is passed on as it words it."""
    server, client = fake
    message = 'no records of consistencyeval "ev" in namespace "team-a"'
    server.routes[f"{BASE}/trials"] = (404, "application/json", status(404, message))
    with pytest.raises(RecordsApiError, match="no records of consistencyeval"):
        client.records("team-a", "ev")
    path = f"{BASE}/transcript?task=a&trial=0&attempt=0"
    server.routes[path] = (404, "application/json", status(404, message))
    with pytest.raises(RecordsApiError, match="no records of consistencyeval"):
        client.transcript("team-a", "ev", task_id="a", trial=0, attempt=0)


def test_uid_is_passed_on(fake: tuple[FakeApiServer, RecordsClient]) -> None:
    """`uid=` picks one of several archived evals of a name."""
    server, client = fake
    body = json.dumps({"eval": {}, "records": []}).encode()
    server.routes[f"{BASE}/trials?uid=u-1"] = (200, "application/json", body)
    assert client.records("team-a", "ev", uid="u-1") == ({}, [])


def test_unreachable_cluster_is_one_line(tmp_path: Path) -> None:
    """No API server at all: RecordsApiError with code 0 naming the host."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    client = RecordsClient(str(kubeconfig), timeout_s=5)
    with pytest.raises(RecordsApiError) as err:
        client.records("team-a", "ev")
    assert err.value.code == 0 and "127.0.0.1:1" in str(err.value)
