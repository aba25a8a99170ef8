"""S3Store against the cluster's real S3 server (SeaweedFS): the RecordStore contract, a
missing bucket, wrong credentials, and a pod on the real node reaching the endpoint."""

from __future__ import annotations

import json
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from passhat.records.s3 import S3Store
from passhat.records.store import RecordStore, StoreError
from tests.cluster.s3_helpers import S3Server
from tests.records_contract import CONTRACT, StoreFactory


@pytest.fixture
def s3_prefix(s3_server: S3Server) -> Iterator[str]:
    """A prefix in the bucket that no other test uses; emptied afterwards."""
    prefix = f"tests/contract-{uuid.uuid4().hex[:10]}"
    yield prefix
    s3_server.delete_prefix(prefix)


@pytest.mark.parametrize("check", CONTRACT, ids=lambda check: check.__name__)
def test_s3_store_contract(
    check: Callable[[StoreFactory], None], s3_server: S3Server, s3_prefix: str
) -> None:
    """A bucket on a real S3 server keeps the contract that every record store keeps."""

    def make(name: str) -> RecordStore:
        return s3_server.store(f"{s3_prefix}/{name}")

    check(make)


def test_fixture_store_round_trips(s3_store: S3Store) -> None:
    """The `s3_store` fixture gives a working store on a fresh, empty prefix."""
    assert list(s3_store.list("")) == []
    s3_store.put("ns/ev/uid/eval.json", b"{}")
    assert s3_store.get("ns/ev/uid/eval.json") == b"{}"
    assert s3_store.describe().startswith(f"s3://{s3_store.bucket}/tests/t-test-fixture-store")


def test_missing_bucket_is_a_store_error_naming_it(s3_server: S3Server) -> None:
    """A store on a bucket nobody made: a read and a listing say the bucket is missing
    (exists() cannot tell: HEAD answers a bare 404); ensure_bucket() makes it, twice over.
    (A write is not checked: SeaweedFS makes the bucket for an Admin identity, AWS refuses.)"""
    bucket = f"passhat-test-{uuid.uuid4().hex[:10]}"
    store = S3Store(bucket=bucket, endpoint=s3_server.endpoint, region=s3_server.region)
    for operation in (lambda: store.get("a/b.json"), lambda: list(store.list(""))):
        with pytest.raises(StoreError, match=f"no bucket {bucket}"):
            operation()
    assert not store.exists("a/b.json")
    try:
        store.ensure_bucket()
        store.ensure_bucket()
        store.put("a/b.json", b"{}")
        assert list(store.list("")) == ["a/b.json"]
    finally:
        s3 = s3_server.client()
        s3.delete_object(Bucket=bucket, Key="a/b.json")
        s3.delete_bucket(Bucket=bucket)


def test_wrong_secret_is_refused_without_showing_it(
    s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrong secret key is a StoreError with the server's code, and the secret (wrong or
    right) appears in no message."""
    wrong = "wrong-" + uuid.uuid4().hex
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", wrong)
    store = s3_server.store("tests/wrong-secret")
    for operation in (
        lambda: store.put("a/b.json", b"{}"),
        lambda: store.get("a/b.json"),
        lambda: list(store.list("")),
    ):
        with pytest.raises(StoreError) as caught:
            operation()
        message = str(caught.value)
        assert "SignatureDoesNotMatch" in message or "AccessDenied" in message, message
        assert wrong not in message
        assert s3_server.env["AWS_SECRET_ACCESS_KEY"] not in message


def test_a_pod_on_the_real_node_reaches_the_endpoint(
    s3_server: S3Server,
    namespace: str,
    apply_manifest: Callable[..., list[dict[str, Any]]],
    pod_manifest: Callable[..., dict[str, Any]],
    kubectl: Callable[..., str],
    wait_for: Callable[..., Any],
) -> None:
    """The endpoint in s3.env (the node IP) answers a pod: an unsigned request gets the
    server's 403, so pods (the operator in-cluster, trials) can reach the archive."""
    url = s3_server.endpoint.rstrip("/") + "/" + urllib.parse.quote(s3_server.bucket) + "/"
    pod = pod_manifest("s3-reach", f"wget -S -O- {url} 2>&1; true")
    apply_manifest(json.dumps(pod), namespace=namespace)
    wait_for(
        lambda: (
            kubectl("get", "pod", "s3-reach", "-n", namespace, "-o", "jsonpath={.status.phase}")
            == "Succeeded"
        ),
        120,
        "the s3-reach pod to succeed",
    )
    log = kubectl("logs", "s3-reach", "-n", namespace)
    assert "403" in log, log
