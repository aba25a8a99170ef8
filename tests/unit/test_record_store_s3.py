"""S3Store without a server: a down or hung store fails fast with StoreError, and messages
name the store and key but never a credential. (The contract against a real S3 server is
in tests/cluster/test_record_store_s3.py.)"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator

import pytest

from passhat.records.s3 import S3Store
from passhat.records.store import StoreError, open_store

SECRET = "sEcReT-never-in-a-message"


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Fake credentials from the environment only: no config file, no metadata service."""
    empty = tmp_path_factory.mktemp("aws")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty / "credentials"))
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def closed_port() -> int:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A loopback port that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


def _operations(store: S3Store) -> dict[str, Callable[[], object]]:
    return {
        "put": lambda: store.put("ns/ev/uid/attempts/0/0-1.json", b"{}"),
        "get": lambda: store.get("ns/ev/uid/attempts/0/0-1.json"),
        "exists": lambda: store.exists("ns/ev/uid/attempts/0/0-1.json"),
        "list": lambda: list(store.list("ns/ev/")),
    }


@pytest.mark.slow
def test_down_store_fails_fast_with_store_error() -> None:
    """Against a closed loopback port every operation raises StoreError within seconds
    (retries included), naming the store and the key and no credential."""
    port = closed_port()
    store = S3Store(bucket="records", prefix="p", endpoint=f"http://127.0.0.1:{port}")
    for verb, operation in _operations(store).items():
        start = time.monotonic()
        with pytest.raises(StoreError) as caught:
            operation()
        elapsed = time.monotonic() - start
        message = str(caught.value)
        assert elapsed < 6, f"{verb} took {elapsed:.1f}s against a closed port"
        assert f"s3://records/p/ at http://127.0.0.1:{port}" in message
        assert ("ns/ev/" if verb == "list" else "ns/ev/uid/attempts/0/0-1.json") in message
        assert SECRET not in message and "AKIDTEST" not in message


def test_hung_store_is_bounded_by_the_read_timeout(silent_server: int) -> None:
    """A server that accepts and never answers costs the read timeout, not forever."""
    store = S3Store(
        bucket="records",
        endpoint=f"http://127.0.0.1:{silent_server}",
        read_timeout=0.5,
        max_attempts=1,
    )
    start = time.monotonic()
    with pytest.raises(StoreError, match=r"cannot read a/b\.json"):
        store.get("a/b.json")
    assert time.monotonic() - start < 5


def test_missing_credentials_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """No credentials anywhere: StoreError says which variables to set."""
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    store = S3Store(bucket="records", endpoint=f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(StoreError, match=r"no credentials.*AWS_ACCESS_KEY_ID"):
        store.put("a/b.json", b"{}")


def test_describe_names_bucket_prefix_and_endpoint_only() -> None:
    """describe() is `s3://bucket/prefix/ at endpoint`, without any user:password."""
    store = S3Store(bucket="b", prefix="/runs/x/", endpoint="http://user:pw@127.0.0.1:1")
    assert store.describe() == "s3://b/runs/x/ at http://127.0.0.1:1"
    assert S3Store(bucket="b").describe() == "s3://b/ (region us-east-1)"
    assert S3Store(bucket="b", region="eu-west-1").describe() == "s3://b/ (region eu-west-1)"


def test_open_store_makes_an_s3_store() -> None:
    """`s3://BUCKET/PREFIX` opens an S3Store with that bucket, prefix and endpoint."""
    store = open_store("s3://bucket/a/b", endpoint="http://127.0.0.1:1", region="eu-west-1")
    assert isinstance(store, S3Store)
    assert (store.bucket, store.prefix, store.endpoint, store.region) == (
        "bucket",
        "a/b/",
        "http://127.0.0.1:1",
        "eu-west-1",
    )


@pytest.mark.parametrize("prefix", ["a//b", "../x", "a/./b"])
def test_invalid_prefix_is_refused(prefix: str) -> None:
    """A prefix that could not be a key's beginning is refused when the store is made."""
    with pytest.raises(ValueError, match="not a valid record key"):
        S3Store(bucket="b", prefix=prefix)
