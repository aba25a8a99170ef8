"""passhat's own S3 client on the wire, against a small S3 server that checks every
signature with botocore (tests/unit/s3_fake.py): the store's contract, retries,
error messages, credentials from each source, TLS with a custom CA, and boto3 kept out
of the operator's imports."""

from __future__ import annotations

import base64
import hashlib
import json
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from passhat.records import awscreds
from passhat.records.s3 import S3Store
from passhat.records.sigv4 import Credentials
from passhat.records.store import RecordStore, StoreError
from tests.records_contract import CONTRACT
from tests.tls_helpers import make_ca
from tests.unit.s3_fake import FakeS3, fake_s3

SECRET = "sEcReT/never+in-a-message"
AWS_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_SESSION_NAME",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL_STS",
    "AWS_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
)


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Static keys from the environment, nothing else AWS-related, no backoff waits."""
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setattr("passhat.records.s3client.random.uniform", lambda low, high: 0.0)


@pytest.fixture
def server() -> Iterator[FakeS3]:
    state = FakeS3(keys={"AKIDTEST": SECRET}, buckets={"records": {}})
    with fake_s3(state) as running:
        yield running


def test_contract_on_the_wire(server: FakeS3) -> None:
    """Every check of the RecordStore contract passes through the client, each request
    signed as botocore signs it (listings in pages of two, keys URL-encoded)."""
    for check in CONTRACT:
        server.buckets["records"].clear()

        def make(name: str) -> RecordStore:
            return S3Store(bucket="records", prefix=f"c/{name}", endpoint=server.endpoint)

        check(make)
    statuses = {request.method for request in server.seen}
    assert statuses == {"PUT", "GET", "HEAD"}


def test_requests_carry_md5_sha256_and_path_style_keys(server: FakeS3) -> None:
    """A PUT is `/bucket/prefix/key`, with Content-MD5 and the payload's SHA-256."""
    store = S3Store(bucket="records", prefix="p", endpoint=server.endpoint)
    data = b"x" * 102_400
    store.put("ns/ev/uid/transcripts/0/0-1.log", data)
    put = server.seen[-1]
    assert (put.method, put.path) == ("PUT", "/records/p/ns/ev/uid/transcripts/0/0-1.log")
    assert put.headers["content-md5"] == base64.b64encode(hashlib.md5(data).digest()).decode()
    assert put.headers["x-amz-content-sha256"] == hashlib.sha256(data).hexdigest()
    assert "x-amz-security-token" not in put.headers


def test_session_token_is_sent_and_signed(server: FakeS3, monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS_SESSION_TOKEN goes out as X-Amz-Security-Token, among the signed headers."""
    monkeypatch.setenv("AWS_SESSION_TOKEN", "the-session-token")
    store = S3Store(bucket="records", endpoint=server.endpoint)
    store.put("a/b.json", b"{}")
    request = server.seen[-1]
    assert request.headers["x-amz-security-token"] == "the-session-token"
    assert "x-amz-security-token" in request.headers["authorization"]


def test_transient_errors_are_tried_again(server: FakeS3) -> None:
    """503 SlowDown and 500 InternalError are retried: the third attempt succeeds."""
    store = S3Store(bucket="records", endpoint=server.endpoint)
    server.fail_next[:] = [(503, "SlowDown"), (500, "InternalError")]
    store.put("a/b.json", b"{}")
    assert len(server.seen) == 3
    assert store.get("a/b.json") == b"{}"


def test_a_server_failing_every_attempt_is_a_store_error(server: FakeS3) -> None:
    """Three 500s: StoreError naming the store, the key, the code and the attempts."""
    store = S3Store(bucket="records", prefix="p", endpoint=server.endpoint)
    server.fail_next[:] = [(500, "InternalError")] * 3
    with pytest.raises(StoreError) as caught:
        store.put("a/b.json", b"{}")
    assert str(caught.value) == (
        f"s3://records/p/ at {server.endpoint}: cannot write a/b.json: "
        "InternalError: canned InternalError (3 attempts)"
    )
    assert len(server.seen) == 3


def test_refusals_are_not_retried_and_show_no_secret(
    server: FakeS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrong secret: one request, StoreError with the server's code, no credential."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
    store = S3Store(bucket="records", endpoint=server.endpoint)
    for operation in (
        lambda: store.put("a/b.json", b"{}"),
        lambda: store.get("a/b.json"),
        lambda: store.exists("a/b.json"),
        lambda: list(store.list("")),
    ):
        before = len(server.seen)
        with pytest.raises(StoreError) as caught:
            operation()
        assert len(server.seen) == before + 1
        message = str(caught.value)
        assert "SignatureDoesNotMatch" in message or "403" in message, message
        assert "wrong-secret" not in message and SECRET not in message


def test_missing_bucket_is_named(server: FakeS3) -> None:
    """NoSuchBucket reads as `no bucket NAME`; ensure_bucket() makes it, twice over."""
    store = S3Store(bucket="other", endpoint=server.endpoint)
    with pytest.raises(StoreError, match=r"cannot read a/b\.json: no bucket other$"):
        store.get("a/b.json")
    assert not store.exists("a/b.json")
    store.ensure_bucket()
    store.ensure_bucket()
    store.put("a/b.json", b"1")
    assert list(store.list("")) == ["a/b.json"]


def test_a_prefix_is_listed_page_by_page(server: FakeS3) -> None:
    """Seven keys in pages of two: four requests, every key once, in order."""
    store = S3Store(bucket="records", endpoint=server.endpoint)
    keys = [f"ns/ev/uid/attempts/{i}/0-1.json" for i in range(7)]
    for key in keys:
        store.put(key, b"{}")
    before = len(server.seen)
    assert list(store.list("ns/ev/")) == sorted(keys)
    assert len(server.seen) - before == 4


def _serve_json(answer: Callable[[BaseHTTPRequestHandler, bytes], tuple[int, bytes]]) -> Any:
    @contextmanager
    def serving() -> Iterator[tuple[str, list[tuple[dict[str, str], bytes]]]]:
        seen: list[tuple[dict[str, str], bytes]] = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                seen.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status, data = answer(self, body)
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _any

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}", seen
        finally:
            server.shutdown()
            server.server_close()

    return serving()


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def test_web_identity_credentials_sign_requests(
    server: FakeS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """IRSA: the token file and role go to STS AssumeRoleWithWebIdentity; its temporary
    keys sign the S3 request, with their session token."""
    server.keys["ASIATEMP"] = "temp-secret"
    sts_xml = (
        '<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
        "<AssumeRoleWithWebIdentityResult><Credentials>"
        "<AccessKeyId>ASIATEMP</AccessKeyId><SecretAccessKey>temp-secret</SecretAccessKey>"
        f"<SessionToken>temp-token</SessionToken><Expiration>{_iso(time.time() + 3600)}"
        "</Expiration></Credentials></AssumeRoleWithWebIdentityResult>"
        "</AssumeRoleWithWebIdentityResponse>"
    ).encode()
    token_file = tmp_path / "token"
    token_file.write_text("the-oidc-token\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    with _serve_json(lambda handler, body: (200, sts_xml)) as (sts, seen):
        monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/passhat")
        monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token_file))
        monkeypatch.setenv("AWS_ENDPOINT_URL_STS", sts)
        store = S3Store(bucket="records", endpoint=server.endpoint)
        store.put("a/b.json", b"{}")
        store.put("a/c.json", b"{}")
    assert len(seen) == 1, "temporary keys are fetched once, not per request"
    form = dict(urllib.parse.parse_qsl(seen[0][1].decode()))
    assert form["Action"] == "AssumeRoleWithWebIdentity"
    assert form["RoleArn"] == "arn:aws:iam::123456789012:role/passhat"
    assert form["WebIdentityToken"] == "the-oidc-token"
    assert server.seen[-1].headers["x-amz-security-token"] == "temp-token"
    assert "Credential=ASIATEMP/" in server.seen[-1].headers["authorization"]


def test_container_credentials_sign_requests(
    server: FakeS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """EKS Pod Identity: the endpoint is asked with the token file's Authorization."""
    server.keys["ASIAPOD"] = "pod-secret"
    answer = json.dumps(
        {
            "AccessKeyId": "ASIAPOD",
            "SecretAccessKey": "pod-secret",
            "Token": "pod-token",
            "Expiration": _iso(time.time() + 3600),
        }
    ).encode()
    token_file = tmp_path / "eks-pod-identity-token"
    token_file.write_text("pod-identity-jwt")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    with _serve_json(lambda handler, body: (200, answer)) as (endpoint, seen):
        monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", endpoint + "/v1/credentials")
        monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", str(token_file))
        S3Store(bucket="records", endpoint=server.endpoint).put("a/b.json", b"{}")
    assert seen[0][0]["authorization"] == "pod-identity-jwt"
    assert server.seen[-1].headers["x-amz-security-token"] == "pod-token"


def test_temporary_credentials_are_fetched_again_before_they_expire() -> None:
    """Keys are reused until 10 minutes before their expiry, then fetched again."""
    now = [1000.0]
    fetched: list[int] = []

    def fetch() -> tuple[Credentials, float | None]:
        fetched.append(1)
        return Credentials(f"K{len(fetched)}", "s", "t"), now[0] + 3600

    provider = awscreds.CredentialsProvider("test", fetch, clock=lambda: now[0])
    assert provider.get().access_key == "K1"
    now[0] += 2900
    assert provider.get().access_key == "K1"
    now[0] += 200
    assert provider.get().access_key == "K2"


def test_no_credentials_names_every_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """No source configured: StoreError listing the variables to set."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    store = S3Store(bucket="records", endpoint="http://127.0.0.1:1")
    with pytest.raises(StoreError) as caught:
        store.put("a/b.json", b"{}")
    message = str(caught.value)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_WEB_IDENTITY_TOKEN_FILE", "CONTAINER_CREDENTIALS"):
        assert name in message


@contextmanager
def _https_server(tmp_path: Path) -> Iterator[tuple[FakeS3, Path]]:
    ca = make_ca("s3-test-ca")
    cert, key = ca.issue("127.0.0.1", ips=["127.0.0.1"], server=True)
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    (tmp_path / "ca.crt").write_bytes(ca.pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    state = FakeS3(keys={"AKIDTEST": SECRET}, buckets={"records": {}})
    with fake_s3(state, ssl_context=context) as running:
        yield running, tmp_path / "ca.crt"


def test_tls_is_verified_against_aws_ca_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTPS with a private CA: refused (once, not retried) without AWS_CA_BUNDLE,
    accepted with it."""
    with _https_server(tmp_path) as (server, ca_file):
        store = S3Store(bucket="records", endpoint=server.endpoint)
        with pytest.raises(StoreError, match=r"TLS failed.*CERTIFICATE_VERIFY_FAILED"):
            store.put("a/b.json", b"{}")
        monkeypatch.setenv("AWS_CA_BUNDLE", str(ca_file))
        store = S3Store(bucket="records", endpoint=server.endpoint)
        store.put("a/b.json", b"{}")
        assert store.get("a/b.json") == b"{}"
    assert [request.method for request in server.seen] == ["PUT", "GET"]


def test_http_proxy_is_used_unless_no_proxy_says_otherwise(
    server: FakeS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With HTTP_PROXY the request goes to the proxy, signed for the endpoint's host;
    NO_PROXY naming that host sends it direct (here: to a name that does not resolve)."""
    monkeypatch.setenv("HTTP_PROXY", server.endpoint)
    endpoint = "http://s3.passhat.invalid:9000"
    S3Store(bucket="records", endpoint=endpoint, max_attempts=1).put("a/b.json", b"{}")
    request = server.seen[-1]
    assert request.path == f"{endpoint}/records/a/b.json"
    assert request.headers["host"] == "s3.passhat.invalid:9000"
    assert server.buckets["records"]["a/b.json"] == b"{}"
    monkeypatch.setenv("NO_PROXY", "passhat.invalid")
    store = S3Store(bucket="records", endpoint=endpoint, max_attempts=1)
    with pytest.raises(StoreError, match="cannot connect"):
        store.put("a/c.json", b"{}")
    assert "a/c.json" not in server.buckets["records"]


def test_the_operator_never_imports_boto3() -> None:
    """Opening an S3 store and the operator's modules loads neither boto3 nor botocore."""
    code = (
        "import sys, passhat.operator.main, passhat.records.s3\n"
        "from passhat.records import open_store\n"
        "open_store('s3://b/p', endpoint='http://127.0.0.1:1')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "[]"
