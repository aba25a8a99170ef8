"""The record store in an S3 bucket: where a cluster's attempts outlive their pods.

Object storage is how Argo, Kubeflow and Tekton Results keep what a run leaves behind,
and any S3-compatible server will do (AWS, MinIO, Ceph, SeaweedFS — the test cluster's).
`S3Store` passes the same contract test as `FileStore` (`tests/records_contract.py`).

It is built for the operator's release threads: a store that is down must fail within
seconds (connect timeout 3 s, read timeout 30 s, 3 attempts in all) with a `StoreError`,
so the operator holds the attempt's pod and tries again later instead of hanging.
Requests go through passhat's own small client (`passhat.records.s3client`: Signature
V4, urllib3), not boto3, which cost the operator ≈ 21 MiB and most of its archive CPU.
Credentials come from the environment, web identity or a container endpoint
(`passhat.records.awscreds`) and never appear in a message. Addressing is path-style
(`http://host:port/bucket/key`), which every S3-compatible server understands.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from passhat.records.s3client import DEFAULT_REGION, S3Client, S3RequestError, without_userinfo
from passhat.records.store import StoreError

__all__ = ["DEFAULT_REGION", "S3Store"]

CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 30.0
# Attempts per request, the first included (refused connections, timeouts, 5xx and
# throttling are tried again after a jittered 0-1 s, then 0-2 s).
MAX_ATTEMPTS = 3
# Connections kept open to the server: the operator archives from every release thread
# at once (16 by default); beyond this, a thread opens and drops one per call.
POOL_CONNECTIONS = 32


def _check_key(key: str) -> str:
    """The key itself, or ValueError: the same keys as FileStore, so archives move freely."""
    if not key or key.startswith("/") or any(part in ("", ".", "..") for part in key.split("/")):
        raise ValueError(f"not a valid record key: {key!r}")
    return key


class S3Store:
    """A RecordStore in an S3 bucket: a key is an object name below `prefix`."""

    def __init__(
        self,
        *,
        bucket: str,
        prefix: str = "",
        endpoint: str | None = None,
        region: str | None = None,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        read_timeout: float = READ_TIMEOUT_S,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        if not bucket:
            raise ValueError("an S3 record store needs a bucket")
        prefix = prefix.strip("/")
        self.bucket = bucket
        self.prefix = _check_key(prefix) + "/" if prefix else ""
        self.endpoint = endpoint or None
        self.region = (
            region
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION")
            or DEFAULT_REGION
        )
        self.client = S3Client(
            endpoint=self.endpoint,
            region=self.region,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_attempts=max_attempts,
            pool_connections=POOL_CONNECTIONS,
        )

    def describe(self) -> str:
        where = (
            f"at {without_userinfo(self.endpoint)}" if self.endpoint else f"(region {self.region})"
        )
        return f"s3://{self.bucket}/{self.prefix} {where}"

    def _error(self, verb: str, key: str, err: S3RequestError) -> StoreError:
        detail = f"no bucket {self.bucket}" if err.code == "NoSuchBucket" else err.detail
        return StoreError(f"{self.describe()}: cannot {verb} {key}: {detail}")

    def put(self, key: str, data: bytes) -> None:
        name = self.prefix + _check_key(key)
        try:
            self.client.put_object(self.bucket, name, data)
        except S3RequestError as err:
            raise self._error("write", key, err) from None

    def get(self, key: str) -> bytes | None:
        name = self.prefix + _check_key(key)
        try:
            return self.client.get_object(self.bucket, name)
        except S3RequestError as err:
            raise self._error("read", key, err) from None

    def exists(self, key: str) -> bool:
        name = self.prefix + _check_key(key)
        try:
            # NB: HEAD has no body: a missing bucket is a bare 404 too, so it answers False
            # here and put() then names the missing bucket.
            return self.client.head_object(self.bucket, name)
        except S3RequestError as err:
            raise self._error("look up", key, err) from None

    def list(self, prefix: str) -> Iterator[str]:
        # NB: sorted here, not trusted to the server: S3 lists in byte order, but some
        # S3-compatible servers walk directory by directory ("a/b" before "a-c").
        start = len(self.prefix)
        try:
            keys = [
                key[start:] for key in self.client.list_objects(self.bucket, self.prefix + prefix)
            ]
        except S3RequestError as err:
            raise self._error("list", prefix or "(all keys)", err) from None
        yield from sorted(keys)

    def ensure_bucket(self) -> None:
        """Create the bucket unless it exists (set-up scripts and tests; the operator
        expects it made)."""
        try:
            if self.client.head_bucket(self.bucket):
                return
        except S3RequestError as err:
            raise self._error("find", f"bucket {self.bucket}", err) from None
        try:
            self.client.create_bucket(self.bucket)
        except S3RequestError as err:
            if err.code != "BucketAlreadyOwnedByYou":
                raise self._error("create", f"bucket {self.bucket}", err) from None
