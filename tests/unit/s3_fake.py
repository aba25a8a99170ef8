"""A small S3 server for the unit tier: objects in a dict, every request's signature
checked with botocore's signer from what came over the wire.

It checks what a real server checks and the unit tier can see: the Signature V4
`Authorization` (rebuilt by botocore from the method, the raw path and query, and the
signed headers as received), `X-Amz-Content-SHA256` against the body, `Content-MD5`.
Listings are ListObjectsV2 in pages of `page_size` keys, URL-encoded when asked. Canned
answers (`fail_next`) stand in for a server in trouble. The real server (SeaweedFS) is
the cluster tier's (tests/cluster/test_record_store_s3.py).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from xml.sax.saxutils import escape

import botocore.auth
import botocore.awsrequest
import botocore.credentials

__all__ = ["FakeS3", "Seen", "fake_s3"]


@dataclass
class Seen:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class FakeS3:
    """The server's state: objects per bucket, the requests seen, the answers to give."""

    port: int = 0
    keys: dict[str, str] = field(default_factory=dict)  # access key -> secret
    buckets: dict[str, dict[str, bytes]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    fail_next: list[tuple[int, str]] = field(default_factory=list)  # (status, error code)
    page_size: int = 2
    scheme: str = "http"

    @property
    def endpoint(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"


def _error(code: str, message: str) -> bytes:
    return (
        f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code>"
        f"<Message>{escape(message)}</Message></Error>"
    ).encode()


def _signature_problem(state: FakeS3, seen: Seen) -> str | None:
    """Why botocore would sign this request differently; None when it signs it alike."""
    auth = seen.headers.get("authorization", "")
    try:
        credential = auth.split("Credential=")[1].split(",")[0]
        signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
        access_key, date, region, *_ = credential.split("/")
    except (IndexError, ValueError):
        return f"malformed Authorization {auth!r}"
    secret = state.keys.get(access_key)
    if secret is None:
        return "InvalidAccessKeyId"
    amz_date = seen.headers.get("x-amz-date", "")
    if amz_date[:8] != date:
        return "date and scope differ"
    when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
    headers = {name: seen.headers[name] for name in signed if name in seen.headers}
    if set(headers) != set(signed):
        return f"signed headers missing on the wire: {set(signed) - set(headers)}"
    # NB: through a forward proxy the request line holds the whole URL
    url = seen.path if "://" in seen.path else f"http://{seen.headers['host']}{seen.path}"
    request = botocore.awsrequest.AWSRequest(
        method=seen.method,
        url=url,
        headers={k: v for k, v in headers.items() if k != "host"},
        data=seen.body,
    )
    token = seen.headers.get("x-amz-security-token")
    signer = botocore.auth.S3SigV4Auth(
        botocore.credentials.Credentials(access_key, secret, token), "s3", region
    )
    original = botocore.auth.get_current_datetime
    with _CLOCK:
        botocore.auth.get_current_datetime = lambda *_, **__: when
        try:
            signer.add_auth(request)
        finally:
            botocore.auth.get_current_datetime = original
    if request.headers["Authorization"] != auth:
        return "SignatureDoesNotMatch"
    return None


_CLOCK = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # NB: keep-alive, as the client's pool expects
    state: FakeS3

    def log_message(self, *_: Any) -> None:
        pass

    def _answer(
        self, status: int, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        state = self.state
        state.seen.append(seen)
        if state.fail_next:
            status, code = state.fail_next.pop(0)
            self._answer(status, _error(code, f"canned {code}"))
            return
        problem = _signature_problem(state, seen)
        if problem is not None:
            code = problem if problem in ("InvalidAccessKeyId",) else "SignatureDoesNotMatch"
            self._answer(403, _error(code, problem))
            return
        if seen.headers.get("x-amz-content-sha256") != hashlib.sha256(body).hexdigest():
            self._answer(400, _error("XAmzContentSHA256Mismatch", "payload hash differs"))
            return
        md5 = seen.headers.get("content-md5")
        if md5 is not None and md5 != base64.b64encode(hashlib.md5(body).digest()).decode():
            self._answer(400, _error("BadDigest", "Content-MD5 differs"))
            return
        parts = urllib.parse.urlsplit(self.path)
        bucket, _, raw_key = parts.path.lstrip("/").partition("/")
        key = urllib.parse.unquote(raw_key)
        query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
        objects = state.buckets.get(urllib.parse.unquote(bucket))
        if not raw_key:
            self._bucket(bucket, objects, query, body)
            return
        if objects is None:
            self._answer(404, _error("NoSuchBucket", "The specified bucket does not exist"))
        elif self.command == "PUT":
            objects[key] = body
            self._answer(200)
        elif self.command in ("GET", "HEAD"):
            if key in objects:
                self._answer(200, objects[key])
            else:
                self._answer(404, _error("NoSuchKey", "The specified key does not exist."))
        elif self.command == "DELETE":
            objects.pop(key, None)
            self._answer(204)
        else:
            self._answer(405, _error("MethodNotAllowed", self.command))

    def _bucket(
        self, bucket: str, objects: dict[str, bytes] | None, query: dict[str, str], body: bytes
    ) -> None:
        if self.command == "PUT":
            if objects is not None:
                self._answer(409, _error("BucketAlreadyOwnedByYou", bucket))
            else:
                self.state.buckets[bucket] = {}
                self._answer(200)
            return
        if objects is None:
            self._answer(404, _error("NoSuchBucket", "The specified bucket does not exist"))
            return
        if self.command == "HEAD":
            self._answer(200)
            return
        prefix = query.get("prefix", "")
        keys = sorted(k for k in objects if k.startswith(prefix))
        start = int(query.get("continuation-token", "0"))
        page = keys[start : start + self.state.page_size]
        encode = query.get("encoding-type") == "url"
        more = start + self.state.page_size < len(keys)
        xml = ['<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">']
        xml.append(f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>")
        for key in page:
            shown = urllib.parse.quote_plus(key, safe="/") if encode else escape(key)
            xml.append(f"<Contents><Key>{shown}</Key><Size>{len(objects[key])}</Size></Contents>")
        xml.append(f"<Name>{bucket}</Name>")
        if encode:
            xml.append("<EncodingType>url</EncodingType>")
        if more:
            xml.append(f"<NextContinuationToken>{start + len(page)}</NextContinuationToken>")
        xml.append("</ListBucketResult>")
        self._answer(200, "".join(xml).encode(), {"Content-Type": "application/xml"})

    do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _handle


@contextmanager
def fake_s3(state: FakeS3, *, ssl_context: Any = None) -> Iterator[FakeS3]:
    """Serve `state` on a loopback port (HTTPS with `ssl_context`) until the block ends."""
    handler = type("Handler", (_Handler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if ssl_context is not None:
        server.socket = ssl_context.wrap_socket(server.socket, server_side=True)
        state.scheme = "https"
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
