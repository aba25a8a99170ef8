"""A small S3 client: the six object and bucket calls the record store makes, no more.

The operator archives every attempt with two PUTs from its release threads; boto3 did
that at ≈ 21 MiB of resident memory (its import and the S3 service model) and several
milliseconds of CPU per call. This client speaks the same HTTP: path-style requests
signed with Signature V4 (`passhat.records.sigv4`), over one urllib3 pool (urllib3 comes
with the kubernetes client), XML answers read with `xml.etree`. docs/benchmarks.md
(Session 11) has the measured difference.

What it keeps from the boto3 set-up it replaces: connect and read timeouts; a request
that fails to connect, times out, or gets a 5xx, 429 or a throttling code is tried again
(3 attempts in all, after a jittered 0–1 s, then 0–2 s: botocore's "standard" mode); TLS
verified against `AWS_CA_BUNDLE`, else `REQUESTS_CA_BUNDLE`, else certifi's bundle;
`HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY`; `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL`
when no endpoint is given; credentials as `passhat.records.awscreds` finds them.

Errors: `S3RequestError(detail, code=, status=)`, `code` the server's error code
(`NoSuchKey`, `NoSuchBucket`, ...; `"404"` for a HEAD, which has no body) or None when
no answer came. No message holds a credential or a signature.
"""

from __future__ import annotations

import base64
import hashlib
import os
import random
import threading
import time
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import urllib3

from passhat.records import awscreds, sigv4

__all__ = ["DEFAULT_REGION", "S3Client", "S3RequestError", "aws_endpoint", "without_userinfo"]

DEFAULT_REGION = "us-east-1"
# Error codes worth another attempt (with any 5xx and 429): botocore's transient and
# throttling codes that S3 and S3-compatible servers send.
RETRY_CODES = frozenset(
    {
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "InternalError",
    }
)
MAX_BACKOFF_S = 20.0


class S3RequestError(Exception):
    """A request failed: the server refused it (`code`, `status`) or no answer came."""

    def __init__(self, detail: str, *, code: str | None = None, status: int | None = None):
        super().__init__(detail)
        self.detail = detail
        self.code = code
        self.status = status


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes


def without_userinfo(url: str) -> str:
    """`url` without any `user:password@` (for messages, and for connecting)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def aws_endpoint(region: str) -> str:
    """AWS's S3 endpoint for `region` (path-style requests go to it)."""
    return f"https://s3.{region}.amazonaws.com"


def _ca_bundle(env: Mapping[str, str]) -> str:
    """The CA file that server certificates are checked against (botocore's order)."""
    found = env.get("AWS_CA_BUNDLE") or env.get("REQUESTS_CA_BUNDLE")
    if found:
        return found
    import certifi  # NB: only for HTTPS, and certifi comes with the kubernetes client

    return str(certifi.where())


class _Pools:
    """urllib3 pool managers, made on first use: one direct, one per proxy that the
    environment names; all verify TLS against one CA file."""

    def __init__(self, *, maxsize: int) -> None:
        self._maxsize = maxsize
        self._lock = threading.Lock()
        self._managers: dict[str | None, urllib3.PoolManager] = {}

    def _manager(self, proxy: str | None) -> urllib3.PoolManager:
        with self._lock:
            manager = self._managers.get(proxy)
            if manager is None:
                options = {
                    "num_pools": 4,
                    "maxsize": self._maxsize,
                    "block": False,
                    "cert_reqs": "CERT_REQUIRED",
                    "ca_certs": _ca_bundle(os.environ),
                }
                manager = (
                    urllib3.PoolManager(**options)  # type: ignore[arg-type]
                    if proxy is None
                    else urllib3.ProxyManager(proxy, **options)  # type: ignore[arg-type]
                )
                self._managers[proxy] = manager
            return manager

    @property
    def direct(self) -> urllib3.PoolManager:
        return self._manager(None)

    def for_url(self, url: str) -> urllib3.PoolManager:
        parts = urllib.parse.urlsplit(url)
        proxy = urllib.request.getproxies_environment().get(parts.scheme)
        if proxy and urllib.request.proxy_bypass(parts.hostname or ""):
            proxy = None
        return self._manager(proxy or None)


def _describe_failure(err: urllib3.exceptions.HTTPError, connect_s: float, read_s: float) -> str:
    """One line for a request that got no answer."""
    if isinstance(err, urllib3.exceptions.NewConnectionError):
        reason = str(err).rpartition(": ")[2] or str(err)
        return f"cannot connect: {reason}"
    if isinstance(err, urllib3.exceptions.ConnectTimeoutError):
        return f"no connection within {connect_s:g} s"
    if isinstance(err, urllib3.exceptions.ReadTimeoutError):
        return f"no answer within {read_s:g} s"
    if isinstance(err, urllib3.exceptions.SSLError):
        return f"TLS failed: {err}"
    if isinstance(err, urllib3.exceptions.ProxyError):
        return f"proxy failed: {err}"
    if isinstance(err, urllib3.exceptions.ProtocolError):
        return f"connection broken: {err.args[-1] if err.args else err}"
    return str(err)


def _retryable(err: urllib3.exceptions.HTTPError) -> bool:
    """A failure another attempt may get past (not a certificate or a bad URL)."""
    return isinstance(
        err,
        urllib3.exceptions.TimeoutError
        | urllib3.exceptions.ProtocolError
        | urllib3.exceptions.ProxyError,
    )


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _error_of(body: bytes) -> tuple[str | None, str]:
    """(Code, Message) of an S3 `<Error>` document; (None, "") when there is none."""
    if not body.lstrip().startswith(b"<"):
        return None, ""
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return None, ""
    values = {_local(child.tag): (child.text or "").strip() for child in root}
    return values.get("Code") or None, values.get("Message", "")


class S3Client:
    """Signed S3 requests to one endpoint, safe to share between threads."""

    def __init__(
        self,
        *,
        endpoint: str | None,
        region: str,
        connect_timeout: float,
        read_timeout: float,
        max_attempts: int,
        pool_connections: int,
    ) -> None:
        endpoint = (
            endpoint
            or os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL")
            or aws_endpoint(region)
        )
        parts = urllib.parse.urlsplit(without_userinfo(endpoint))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"{without_userinfo(endpoint)}: an S3 endpoint is http(s)://HOST[:PORT]"
            )
        self.endpoint = f"{parts.scheme}://{parts.netloc}"
        self._host = parts.netloc
        self._base_path = parts.path.rstrip("/")
        self.region = region
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.max_attempts = max(1, max_attempts)
        self._timeout = urllib3.Timeout(connect=connect_timeout, read=read_timeout)
        self._pools = _Pools(maxsize=pool_connections)
        self._http = self._pools.for_url(self.endpoint)
        self._credentials: awscreds.CredentialsProvider | None = None
        self._credentials_lock = threading.Lock()

    def _credentials_now(self) -> sigv4.Credentials:
        try:
            if self._credentials is None:
                with self._credentials_lock:
                    if self._credentials is None:
                        self._credentials = awscreds.from_environment(
                            region=self.region, http=self._pools
                        )
            return self._credentials.get()
        except awscreds.CredentialsError as err:
            raise S3RequestError(str(err)) from None

    def request(
        self,
        method: str,
        bucket: str,
        key: str | None = None,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """The 2xx answer to a signed request; S3RequestError for anything else, after
        the attempts a transient failure is worth."""
        path = f"{self._base_path}/{urllib.parse.quote(bucket, safe='')}"
        if key is not None:
            path += "/" + urllib.parse.quote(key, safe="/~")
        canonical_query = sigv4.canonical_query(query)
        url = self.endpoint + path + ("?" + canonical_query if canonical_query else "")
        payload_sha256 = hashlib.sha256(body).hexdigest() if body else sigv4.EMPTY_SHA256
        http = self._http
        detail, code, status = "", None, None
        for attempt in range(self.max_attempts):
            if attempt:
                time.sleep(random.uniform(0, min(MAX_BACKOFF_S, 2.0 ** (attempt - 1))))
            signed = self._sign(method, path, canonical_query, headers, payload_sha256)
            try:
                response = http.urlopen(
                    method,
                    url,
                    body=body,
                    headers=signed,
                    retries=False,
                    redirect=False,
                    timeout=self._timeout,
                    preload_content=True,
                )
            except urllib3.exceptions.HTTPError as err:
                detail, code, status = (
                    _describe_failure(err, self.connect_timeout, self.read_timeout),
                    None,
                    None,
                )
                if _retryable(err):
                    continue
                break
            data = response.data
            if 200 <= response.status < 300:
                return Response(response.status, data)
            status = response.status
            code, message = _error_of(data)
            if code is None:
                code = str(status)
                message = message or (response.reason or "")
            detail = f"{code}: {message}" if message else code
            if status >= 500 or status == 429 or code in RETRY_CODES:
                continue
            raise S3RequestError(detail, code=code, status=status)
        if self.max_attempts > 1:
            detail += f" ({self.max_attempts} attempts)"
        raise S3RequestError(detail, code=code, status=status)

    def _sign(
        self,
        method: str,
        path: str,
        query: str,
        extra: Mapping[str, str] | None,
        payload_sha256: str,
    ) -> dict[str, str]:
        credentials = self._credentials_now()
        headers = {
            "Host": self._host,
            "X-Amz-Date": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()),
            "X-Amz-Content-SHA256": payload_sha256,
        }
        if credentials.token:
            headers["X-Amz-Security-Token"] = credentials.token
        if extra:
            headers.update(extra)
        headers["Authorization"] = sigv4.authorization(
            credentials,
            method=method,
            path=path,
            query=query,
            headers=headers,
            payload_sha256=payload_sha256,
            amz_date=headers["X-Amz-Date"],
            region=self.region,
        )
        return headers

    # The calls the record store makes.

    def put_object(self, bucket: str, key: str, data: bytes) -> None:
        """PUT an object, with Content-MD5 (which buckets with object lock require)."""
        md5 = base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()
        self.request("PUT", bucket, key, body=data, headers={"Content-MD5": md5})

    def get_object(self, bucket: str, key: str) -> bytes | None:
        """The object's bytes; None when there is no such key (a missing bucket raises)."""
        try:
            return self.request("GET", bucket, key).body
        except S3RequestError as err:
            if err.code == "NoSuchKey":
                return None
            raise

    def head_object(self, bucket: str, key: str) -> bool:
        """Whether the object exists (a missing bucket answers False: HEAD has no body)."""
        try:
            self.request("HEAD", bucket, key)
        except S3RequestError as err:
            if err.status == 404:
                return False
            raise
        return True

    def delete_object(self, bucket: str, key: str) -> None:
        self.request("DELETE", bucket, key)

    def list_objects(self, bucket: str, prefix: str) -> Iterator[str]:
        """Every key below `prefix` (ListObjectsV2, page by page, keys URL-encoded on the
        wire so that any key survives XML)."""
        token: str | None = None
        while True:
            query = [("list-type", "2"), ("prefix", prefix), ("encoding-type", "url")]
            if token:
                query.append(("continuation-token", token))
            body = self.request("GET", bucket, query=query).body
            try:
                root = ET.fromstring(body)
            except ET.ParseError as err:
                raise S3RequestError(f"unreadable listing: {err}") from None
            keys: list[str] = []
            encoded, truncated, token = False, False, None
            for child in root:
                name = _local(child.tag)
                if name == "Contents":
                    keys.extend(item.text or "" for item in child if _local(item.tag) == "Key")
                elif name == "IsTruncated":
                    truncated = (child.text or "").strip() == "true"
                elif name == "NextContinuationToken":
                    token = child.text
                elif name == "EncodingType":
                    # NB: after the keys in the document; a server that ignores the
                    # parameter leaves it out and sends the keys as they are.
                    encoded = (child.text or "").strip() == "url"
            yield from (urllib.parse.unquote_plus(key) for key in keys) if encoded else keys
            if not truncated or not token:
                return

    def head_bucket(self, bucket: str) -> bool:
        try:
            self.request("HEAD", bucket)
        except S3RequestError as err:
            if err.status == 404:
                return False
            raise
        return True

    def create_bucket(self, bucket: str) -> None:
        body = None
        if self.region != DEFAULT_REGION:
            body = (
                '<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                f"<LocationConstraint>{self.region}</LocationConstraint>"
                "</CreateBucketConfiguration>"
            ).encode()
        self.request("PUT", bucket, body=body)
