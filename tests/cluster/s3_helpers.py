"""The test cluster's S3 server (SeaweedFS, started by hack/cluster/up.sh) for the tests.

up.sh writes what a client needs into `.cluster/s3.env` (shell `export` lines: the
endpoint on the node IP, which host processes and pods alike reach, the bucket, the
region and generated credentials). `S3Server` reads that file; the conftest fixtures
`s3_server` (session) and `s3_store` (an S3Store on a fresh prefix per test, emptied
afterwards) are built on it.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import botocore.config

from passhat.records.s3 import S3Store

ENV_NAMES = (
    "PASSHAT_S3_ENDPOINT",
    "PASSHAT_S3_BUCKET",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
)


def read_env_file(path: Path) -> dict[str, str]:
    """The `export NAME=value` lines of a shell file, as a dict (values unquoted)."""
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["export"] and len(words) == 2 and "=" in words[1]:
            name, _, value = words[1].partition("=")
            values[name] = value
    return values


@dataclass(frozen=True)
class S3Server:
    """Where the test S3 server is and how to sign in (from `.cluster/s3.env`)."""

    endpoint: str
    bucket: str
    region: str
    # The file's variables, credentials included: kept out of repr (pytest prints fixtures).
    env: Mapping[str, str] = field(repr=False)

    @classmethod
    def from_env_file(cls, path: Path) -> S3Server:
        """The server `path` describes; ValueError naming what the file lacks."""
        env = read_env_file(path)
        missing = [name for name in ENV_NAMES if not env.get(name)]
        if missing:
            raise ValueError(f"{path} lacks {', '.join(missing)}")
        return cls(
            endpoint=env["PASSHAT_S3_ENDPOINT"],
            bucket=env["PASSHAT_S3_BUCKET"],
            region=env["AWS_DEFAULT_REGION"],
            env=env,
        )

    def store(self, prefix: str, **options: Any) -> S3Store:
        """An S3Store on this server's bucket below `prefix` (credentials from the
        environment, which the `s3_server` fixture sets from the file)."""
        return S3Store(
            bucket=self.bucket, prefix=prefix, endpoint=self.endpoint, region=self.region, **options
        )

    def client(self) -> Any:
        """A plain boto3 S3 client with the file's credentials (for clean-up and checks
        the RecordStore protocol has no verb for)."""
        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"],
            config=botocore.config.Config(
                s3={"addressing_style": "path"}, connect_timeout=3, read_timeout=30
            ),
        )

    def delete_prefix(self, prefix: str) -> None:
        """Remove every object below `prefix` (a test's leftovers)."""
        s3 = self.client()
        for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix.rstrip("/") + "/"
        ):
            for item in page.get("Contents", ()):
                s3.delete_object(Bucket=self.bucket, Key=item["Key"])
