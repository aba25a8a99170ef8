"""The record store in an S3 bucket: where a cluster's attempts outlive their pods.

Object storage is how Argo, Kubeflow and Tekton Results keep what a run leaves behind,
and any S3-compatible server will do (AWS, MinIO, Ceph, SeaweedFS — the test cluster's).
`S3Store` passes the same contract test as `FileStore` (`tests/records_contract.py`).

It is built for the operator's release threads: a store that is down must fail within
seconds (connect timeout 3 s, read timeout 30 s, 3 attempts in all) with a `StoreError`,
so the operator holds the attempt's pod and tries again later instead of hanging.
Credentials come from boto3's usual chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY,
web identity, ...) and never appear in a message. Addressing is path-style
(`http://host:port/bucket/key`), which every S3-compatible server understands.
"""

from __future__ import annotations

import base64
import hashlib
import os
import urllib.parse
from collections.abc import Iterator
from typing import Any, cast

import boto3
import botocore.config
import botocore.exceptions

from passhat.records.store import StoreError

__all__ = ["DEFAULT_REGION", "S3Store"]

DEFAULT_REGION = "us-east-1"
CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 30.0
# Attempts per request, the first included (botocore's "standard" retry mode: refused
# connections, timeouts, 5xx and throttling are retried after a jittered 1 s, 2 s).
MAX_ATTEMPTS = 3
# Connections kept open to the server (threads beyond it open and drop one per call).
POOL_CONNECTIONS = 32

# NB: the codes S3 (and S3-compatible servers) give for "no such object".
_MISSING = frozenset({"NoSuchKey", "404", "NotFound"})


def _check_key(key: str) -> str:
    """The key itself, or ValueError: the same keys as FileStore, so archives move freely."""
    if not key or key.startswith("/") or any(part in ("", ".", "..") for part in key.split("/")):
        raise ValueError(f"not a valid record key: {key!r}")
    return key


def _without_userinfo(url: str) -> str:
    """`url` without any `user:password@` (for messages)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


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
        config = botocore.config.Config(
            region_name=self.region,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retries={"mode": "standard", "total_max_attempts": max_attempts},
            s3={"addressing_style": "path"},
            # NB: the operator archives from every release thread at once (16 by default);
            # botocore's default pool of 10 dropped and reopened a connection per request
            # beyond it (seen as "Connection pool is full" warnings under load).
            max_pool_connections=POOL_CONNECTIONS,
            # NB: only the checksums S3 requires: newer botocore adds CRC headers by
            # default, which several S3-compatible servers refuse; put() sends Content-MD5.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        # NB: a session per store: boto3's default session is shared and not thread-safe
        # to create clients from; the client itself is safe across threads.
        self._client: Any = boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, config=config
        )

    def describe(self) -> str:
        where = (
            f"at {_without_userinfo(self.endpoint)}" if self.endpoint else f"(region {self.region})"
        )
        return f"s3://{self.bucket}/{self.prefix} {where}"

    def _error(self, verb: str, key: str, err: Exception) -> StoreError:
        if isinstance(err, botocore.exceptions.ClientError):
            info = err.response.get("Error", {})
            code = info.get("Code") or "error"
            detail = (
                f"no bucket {self.bucket}"
                if code == "NoSuchBucket"
                else f"{code}: {info.get('Message') or err}"
            )
        elif isinstance(err, botocore.exceptions.NoCredentialsError):
            detail = "no credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
        else:
            detail = str(err)
        return StoreError(f"{self.describe()}: cannot {verb} {key}: {detail}")

    def put(self, key: str, data: bytes) -> None:
        name = self.prefix + _check_key(key)
        md5 = base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()
        try:
            self._client.put_object(Bucket=self.bucket, Key=name, Body=data, ContentMD5=md5)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as err:
            raise self._error("write", key, err) from None

    def get(self, key: str) -> bytes | None:
        name = self.prefix + _check_key(key)
        try:
            response = self._client.get_object(Bucket=self.bucket, Key=name)
            return cast(bytes, response["Body"].read())
        except botocore.exceptions.ClientError as err:
            if err.response.get("Error", {}).get("Code") in _MISSING:
                return None
            raise self._error("read", key, err) from None
        except botocore.exceptions.BotoCoreError as err:
            raise self._error("read", key, err) from None

    def exists(self, key: str) -> bool:
        name = self.prefix + _check_key(key)
        try:
            self._client.head_object(Bucket=self.bucket, Key=name)
        except botocore.exceptions.ClientError as err:
            # NB: HEAD has no body: a missing bucket is a bare 404 too, so it answers False
            # here and put() then names the missing bucket.
            if err.response.get("Error", {}).get("Code") in _MISSING:
                return False
            raise self._error("look up", key, err) from None
        except botocore.exceptions.BotoCoreError as err:
            raise self._error("look up", key, err) from None
        return True

    def list(self, prefix: str) -> Iterator[str]:
        # NB: sorted here, not trusted to the server: S3 lists in byte order, but some
        # S3-compatible servers walk directory by directory ("a/b" before "a-c").
        keys: list[str] = []
        start = len(self.prefix)
        try:
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix + prefix
            )
            for page in pages:
                keys.extend(item["Key"][start:] for item in page.get("Contents", ()))
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as err:
            raise self._error("list", prefix or "(all keys)", err) from None
        yield from sorted(keys)

    def ensure_bucket(self) -> None:
        """Create the bucket unless it exists (set-up scripts and tests; the operator
        expects it made)."""
        try:
            self._client.head_bucket(Bucket=self.bucket)
            return
        except botocore.exceptions.ClientError as err:
            if err.response.get("Error", {}).get("Code") not in _MISSING | {"NoSuchBucket"}:
                raise self._error("find", f"bucket {self.bucket}", err) from None
        except botocore.exceptions.BotoCoreError as err:
            raise self._error("find", f"bucket {self.bucket}", err) from None
        args: dict[str, Any] = {"Bucket": self.bucket}
        if self.region != DEFAULT_REGION:
            args["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
        try:
            self._client.create_bucket(**args)
        except botocore.exceptions.ClientError as err:
            if err.response.get("Error", {}).get("Code") != "BucketAlreadyOwnedByYou":
                raise self._error("create", f"bucket {self.bucket}", err) from None
        except botocore.exceptions.BotoCoreError as err:
            raise self._error("create", f"bucket {self.bucket}", err) from None
