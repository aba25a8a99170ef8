"""The records API's HTTPS server: mutual TLS with the front proxy, over real sockets."""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import json
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from passhat.operator.records_api import RecordsApi, RecordsApiServer, RequestHeaderConfig
from passhat.records import FileStore, StoreLayout
from tests.unit.test_records_api import FakeAccess

Pem = tuple[bytes, bytes]  # (cert, key)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_ca(name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A self-signed CA."""
    key = _key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def issue(
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey], cn: str, *, server: bool = False
) -> Pem:
    """A leaf cert (client, or server for 127.0.0.1) signed by `ca`, as PEM."""
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
        .issuer_name(ca[0].subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    cert = builder.sign(ca[1], hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def write(tmp: Path, name: str, pem: Pem) -> tuple[str, str]:
    cert, key = tmp / f"{name}.crt", tmp / f"{name}.key"
    cert.write_bytes(pem[0])
    key.write_bytes(pem[1])
    return str(cert), str(key)


class Setup:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.proxy_ca = make_ca("front-proxy-ca")
        self.serving_ca = make_ca("serving-ca")
        self.serving_ca_file = tmp / "serving-ca.crt"
        self.serving_ca_file.write_bytes(
            self.serving_ca[0].public_bytes(serialization.Encoding.PEM)
        )


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Setup, RecordsApiServer]]:
    s = Setup(tmp_path)
    store = FileStore(str(tmp_path / "records"))
    layout = StoreLayout("team-a", "ev", "u1")
    manifest = {"name": "ev", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z"}
    store.put(layout.eval_key, json.dumps({**manifest, "taskIds": ["a"]}).encode())
    store.put(layout.record_key(0, 0, 0), b'{"task_id": "a", "trial": 0, "attempt": 0}')
    ca_pem = s.proxy_ca[0].public_bytes(serialization.Encoding.PEM).decode()
    config = RequestHeaderConfig(client_ca=ca_pem, allowed_names=("front-proxy-client",))
    api = RecordsApi(store=store, access=FakeAccess({("alice", "team-a")}), config=config)
    cert, key = write(tmp_path, "serving", issue(s.serving_ca, "records", server=True))
    with RecordsApiServer(api, cert_file=cert, key_file=key, port=0, host="127.0.0.1") as server:
        yield s, server


def request(
    setup: tuple[Setup, RecordsApiServer], path: str, client_cert: tuple[str, str] | None
) -> tuple[int, dict[str, object]]:
    s, server = setup
    ctx = ssl.create_default_context(cafile=str(s.serving_ca_file))
    if client_cert is not None:
        ctx.load_cert_chain(*client_cert)
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
    try:
        conn.request("GET", path, headers={"X-Remote-User": "alice"})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


TRIALS = "/apis/records.passhat.dev/v1alpha1/namespaces/team-a/evals/ev/trials"


def test_front_proxy_cert_is_served(setup: tuple[Setup, RecordsApiServer], tmp_path: Path) -> None:
    """The front proxy's cert (request-header CA, allowed CN) gets the records."""
    proxy = write(tmp_path, "proxy", issue(setup[0].proxy_ca, "front-proxy-client"))
    code, body = request(setup, TRIALS, proxy)
    assert code == 200, body
    assert body["kind"] == "EvalTrials"


def test_no_client_cert_is_unauthorized(setup: tuple[Setup, RecordsApiServer]) -> None:
    """Headers alone prove nothing: 401 without a client cert (probes still answer)."""
    code, body = request(setup, TRIALS, None)
    assert code == 401 and body["reason"] == "Unauthorized"


def test_wrong_common_name_is_unauthorized(
    setup: tuple[Setup, RecordsApiServer], tmp_path: Path
) -> None:
    """A cert of the request-header CA with another CN is not the front proxy."""
    other = write(tmp_path, "other", issue(setup[0].proxy_ca, "someone-else"))
    code, _ = request(setup, TRIALS, other)
    assert code == 401


def test_cert_of_another_ca_fails_the_handshake(
    setup: tuple[Setup, RecordsApiServer], tmp_path: Path
) -> None:
    """A client cert the request-header CA did not sign never gets a TLS session; the
    server keeps serving afterwards."""
    forged = write(tmp_path, "forged", issue(make_ca("evil-ca"), "front-proxy-client"))
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
        request(setup, TRIALS, forged)
    proxy = write(tmp_path, "proxy", issue(setup[0].proxy_ca, "front-proxy-client"))
    assert request(setup, TRIALS, proxy)[0] == 200
