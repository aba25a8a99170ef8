"""The records API's HTTPS server: mutual TLS with the front proxy, over real sockets."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from passhat.operator.records_api import RecordsApi, RecordsApiServer, RequestHeaderConfig
from passhat.records import FileStore, StoreLayout
from tests.tls_helpers import Ca, make_ca
from tests.unit.test_records_api import FakeAccess

TRIALS = "/apis/records.passhat.dev/v1alpha1/namespaces/team-a/evals/ev/trials"


@dataclass
class Served:
    tmp: Path
    proxy_ca: Ca
    serving_ca_file: Path
    server: RecordsApiServer


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """The server on 127.0.0.1 trusting a front-proxy CA, one eval archived."""
    proxy_ca, serving_ca = make_ca("front-proxy-ca"), make_ca("serving-ca")
    serving_ca_file = tmp_path / "serving-ca.crt"
    serving_ca_file.write_bytes(serving_ca.pem)
    store = FileStore(str(tmp_path / "records"))
    layout = StoreLayout("team-a", "ev", "u1")
    manifest = {"name": "ev", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z"}
    store.put(layout.eval_key, json.dumps({**manifest, "taskIds": ["a"]}).encode())
    store.put(layout.record_key(0, 0, 0), b'{"task_id": "a", "trial": 0, "attempt": 0}')
    config = RequestHeaderConfig(
        client_ca=proxy_ca.pem.decode(), allowed_names=("front-proxy-client",)
    )
    api = RecordsApi(store=store, access=FakeAccess({("alice", "team-a")}), config=config)
    cert, key = serving_ca.issue_files(
        tmp_path, "serving", "records", ips=["127.0.0.1"], server=True
    )
    with RecordsApiServer(api, cert_file=cert, key_file=key, port=0, host="127.0.0.1") as server:
        yield Served(tmp_path, proxy_ca, serving_ca_file, server)


def request(
    served: Served, path: str, client_cert: tuple[str, str] | None
) -> tuple[int, dict[str, object]]:
    """GET `path` as user alice, with `client_cert` (or none)."""
    ctx = ssl.create_default_context(cafile=str(served.serving_ca_file))
    if client_cert is not None:
        ctx.load_cert_chain(*client_cert)
    conn = http.client.HTTPSConnection("127.0.0.1", served.server.port, context=ctx, timeout=10)
    try:
        conn.request("GET", path, headers={"X-Remote-User": "alice"})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def test_front_proxy_cert_is_served(served: Served) -> None:
    """The front proxy's cert (request-header CA, allowed CN) gets the records."""
    proxy = served.proxy_ca.issue_files(served.tmp, "proxy", "front-proxy-client")
    code, body = request(served, TRIALS, proxy)
    assert code == 200, body
    assert body["kind"] == "EvalTrials"


def test_no_client_cert_is_unauthorized(served: Served) -> None:
    """Headers alone prove nothing: 401 without a client cert."""
    code, body = request(served, TRIALS, None)
    assert code == 401 and body["reason"] == "Unauthorized"


def test_wrong_common_name_is_unauthorized(served: Served) -> None:
    """A cert of the request-header CA with another CN is not the front proxy."""
    other = served.proxy_ca.issue_files(served.tmp, "other", "someone-else")
    assert request(served, TRIALS, other)[0] == 401


def test_cert_of_another_ca_fails_the_handshake(served: Served) -> None:
    """A client cert the request-header CA did not sign never gets a TLS session; the
    server keeps serving afterwards."""
    forged = make_ca("evil-ca").issue_files(served.tmp, "forged", "front-proxy-client")
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
        request(served, TRIALS, forged)
    proxy = served.proxy_ca.issue_files(served.tmp, "proxy", "front-proxy-client")
    assert request(served, TRIALS, proxy)[0] == 200
