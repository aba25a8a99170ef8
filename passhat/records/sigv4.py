"""AWS Signature Version 4, the request signing every S3-compatible server checks.

Pure functions over strings and bytes (no clock, no network), so they are tested against
AWS's published examples (the aws-sig-v4-test-suite) and against botocore's signer for
S3 requests (`tests/unit/test_sigv4.py`). `passhat.records.s3client` signs each request
with `authorization()`; the per-day signing key is derived once and cached.

The canonical request follows the S3 variant of the rules: the path is the key
URI-encoded once (`/` kept, no dot-segment removal), the query is sorted and encoded
with `/` escaped, and every header handed in is signed.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote

__all__ = [
    "ALGORITHM",
    "EMPTY_SHA256",
    "Credentials",
    "authorization",
    "canonical_query",
    "canonical_request",
    "signing_key",
]

ALGORITHM = "AWS4-HMAC-SHA256"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


@dataclass(frozen=True)
class Credentials:
    """An access key, its secret and (for temporary credentials) the session token."""

    access_key: str
    secret_key: str = field(repr=False)
    token: str | None = field(default=None, repr=False)


def canonical_query(params: Sequence[tuple[str, str]]) -> str:
    """`a=1&b=x%2Fy`: names and values URI-encoded (only `-_.~` and alphanumerics kept),
    sorted by name, then value."""
    encoded = sorted(
        (quote(name, safe="-_.~"), quote(value, safe="-_.~")) for name, value in params
    )
    return "&".join(f"{name}={value}" for name, value in encoded)


def canonical_request(
    *,
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    payload_sha256: str,
) -> tuple[str, str]:
    """(the canonical request, the signed header names) for an already-encoded `path`
    and `query`; `headers` are signed, all of them."""
    canonical = sorted((name.lower(), " ".join(value.split())) for name, value in headers.items())
    signed = ";".join(name for name, _ in canonical)
    lines = "".join(f"{name}:{value}\n" for name, value in canonical)
    return f"{method}\n{path}\n{query}\n{lines}\n{signed}\n{payload_sha256}", signed


@functools.lru_cache(maxsize=16)
def signing_key(secret_key: str, date: str, region: str, service: str) -> bytes:
    """The key of one day, region and service (`date` is YYYYMMDD)."""
    key = hmac.digest(("AWS4" + secret_key).encode(), date.encode(), "sha256")
    for part in (region, service, "aws4_request"):
        key = hmac.digest(key, part.encode(), "sha256")
    return key


def authorization(
    credentials: Credentials,
    *,
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    payload_sha256: str,
    amz_date: str,
    region: str,
    service: str = "s3",
) -> str:
    """The `Authorization` header for a request whose `headers` (host and x-amz-date
    among them, x-amz-security-token too when there is a token) are final."""
    request, signed = canonical_request(
        method=method, path=path, query=query, headers=headers, payload_sha256=payload_sha256
    )
    scope = f"{amz_date[:8]}/{region}/{service}/aws4_request"
    to_sign = f"{ALGORITHM}\n{amz_date}\n{scope}\n{hashlib.sha256(request.encode()).hexdigest()}"
    key = signing_key(credentials.secret_key, amz_date[:8], region, service)
    signature = hmac.new(key, to_sign.encode(), "sha256").hexdigest()
    return (
        f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
        f"SignedHeaders={signed}, Signature={signature}"
    )
