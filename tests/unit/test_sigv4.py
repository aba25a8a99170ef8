"""Signature V4: AWS's published examples, and the same Authorization header as
botocore's S3 signer for the requests the record store makes."""

from __future__ import annotations

import datetime
import hashlib
import urllib.parse

import botocore.auth
import botocore.awsrequest
import botocore.credentials
import pytest

from passhat.records.sigv4 import EMPTY_SHA256, Credentials, authorization, canonical_query

# The aws-sig-v4-test-suite's credentials, date, region and service.
SUITE = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
SUITE_DATE = "20150830T123600Z"
SUITE_PREFIX = (
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
    "SignedHeaders=host;x-amz-date, Signature="
)


@pytest.mark.parametrize(
    ("name", "method", "query", "signature"),
    [
        (
            "get-vanilla",
            "GET",
            "",
            "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        ),
        (
            "get-vanilla-query-order-key-case",
            "GET",
            canonical_query([("Param2", "value2"), ("Param1", "value1")]),
            "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
        ),
        (
            "post-vanilla",
            "POST",
            "",
            "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
        ),
    ],
)
def test_aws_test_suite(name: str, method: str, query: str, signature: str) -> None:
    """The published signatures of the aws-sig-v4-test-suite examples."""
    header = authorization(
        SUITE,
        method=method,
        path="/",
        query=query,
        headers={"Host": "example.amazonaws.com", "X-Amz-Date": SUITE_DATE},
        payload_sha256=EMPTY_SHA256,
        amz_date=SUITE_DATE,
        region="us-east-1",
        service="service",
    )
    assert header == SUITE_PREFIX + signature, name


def test_canonical_query_sorts_and_escapes_slashes() -> None:
    """Names then values sorted; `/`, space, `+` and non-ASCII escaped, `-_.~` kept."""
    assert (
        canonical_query([("prefix", "ns/ev a+b~ü"), ("list-type", "2"), ("a", "2"), ("a", "1")])
        == "a=1&a=2&list-type=2&prefix=ns%2Fev%20a%2Bb~%C3%BC"
    )


def _botocore(
    monkeypatch: pytest.MonkeyPatch,
    credentials: Credentials,
    *,
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes,
) -> str:
    """botocore's S3 Authorization header for the request at a fixed time."""
    fixed = datetime.datetime(2026, 12, 4, 15, 0, 0)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda *_, **__: fixed)
    request = botocore.awsrequest.AWSRequest(
        method=method, url=url, headers=dict(headers), data=body
    )
    signer = botocore.auth.S3SigV4Auth(
        botocore.credentials.Credentials(
            credentials.access_key, credentials.secret_key, credentials.token
        ),
        "s3",
        "eu-west-1",
    )
    signer.add_auth(request)
    return str(request.headers["Authorization"])


@pytest.mark.parametrize(
    ("method", "key", "query", "body", "token"),
    [
        ("PUT", "ns/ev/uid/transcripts/0/0-1.log", [], b"x" * 102_400, None),
        ("PUT", "odd/a b+c=d%20e&f?g#h;i,j~k'l(m)n!o*p@q$r.json", [], b"{}", "SESSION/TOKEN+="),
        ("GET", "odd/ünïcödé/ø.log", [], b"", None),
        ("HEAD", "ns/ev/uid/attempts/0/0-1.json", [], b"", "tok"),
        (
            "GET",
            None,
            [("list-type", "2"), ("prefix", "p/ns/ev a/"), ("encoding-type", "url")],
            b"",
            None,
        ),
    ],
)
def test_same_signature_as_botocore(
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    key: str | None,
    query: list[tuple[str, str]],
    body: bytes,
    token: str | None,
) -> None:
    """For the store's requests (odd keys, a listing, a session token) the header is
    botocore's, to the byte."""
    credentials = Credentials("AKIDTEST", "secret/with+chars", token)
    path = "/records" + ("/" + urllib.parse.quote(key, safe="/~") if key is not None else "")
    query_text = canonical_query(query)
    url = "http://192.0.2.2:8333" + path + ("?" + query_text if query_text else "")
    payload = hashlib.sha256(body).hexdigest()
    headers = {
        "Host": "192.0.2.2:8333",
        "X-Amz-Date": "20261204T150000Z",
        "X-Amz-Content-SHA256": payload,
    }
    if token:
        headers["X-Amz-Security-Token"] = token
    if body:
        headers["Content-MD5"] = "bm90IGNoZWNrZWQgaGVyZQ=="
    ours = authorization(
        credentials,
        method=method,
        path=path,
        query=query_text,
        headers=headers,
        payload_sha256=payload,
        amz_date="20261204T150000Z",
        region="eu-west-1",
    )
    theirs = _botocore(
        monkeypatch,
        credentials,
        method=method,
        url=url,
        headers={k: v for k, v in headers.items() if k != "Host"},
        body=body,
    )
    assert ours == theirs
