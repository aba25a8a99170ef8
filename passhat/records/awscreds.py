"""Where the S3 record store's credentials come from: the ways a pod is given them.

The operator runs in a pod, and a pod gets AWS credentials in one of three ways, looked
for in this order (botocore's order for the same three):

1. `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`): static keys,
   what the chart sets from `records.s3.credentialsSecret`, and any S3-compatible server;
2. web identity (IRSA on EKS, and any OIDC federation): `AWS_ROLE_ARN` +
   `AWS_WEB_IDENTITY_TOKEN_FILE` (+ `AWS_ROLE_SESSION_NAME`), exchanged with STS's
   `AssumeRoleWithWebIdentity` (an unsigned call) for temporary keys;
3. a container credentials endpoint (EKS Pod Identity, ECS):
   `AWS_CONTAINER_CREDENTIALS_FULL_URI` or `..._RELATIVE_URI`, with
   `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` or `..._TOKEN`.

Temporary keys are fetched again 10 minutes before they expire. Not supported, on
purpose (boto3 had them): shared config and credentials files and profiles
(`AWS_PROFILE`, SSO, `credential_process`), which the chart never mounts, and the EC2
instance metadata service, which would hand the operator the node's role, shared with
every pod on the node. `docs/records.md` says so.

Errors are `CredentialsError`; their messages name variables and files, never a secret.
"""

from __future__ import annotations

import json
import os
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import urlencode

import urllib3

from passhat.records.sigv4 import Credentials

__all__ = ["CredentialsError", "CredentialsProvider", "HttpPools", "from_environment"]

# Fetch temporary credentials again this long before they expire.
REFRESH_BEFORE_S = 600.0
# Where ECS and EKS Pod Identity serve credentials for a relative URI.
CONTAINER_HOST = "http://169.254.170.2"
_STS_NS = "{https://sts.amazonaws.com/doc/2011-06-15/}"

Fetch = Callable[[], tuple[Credentials, float | None]]


class HttpPools(Protocol):
    """Connection pools: `direct` for link-local endpoints, `for_url(url)` for the rest
    (through the environment's proxy where one applies)."""

    @property
    def direct(self) -> urllib3.PoolManager:
        """The pool manager for link-local endpoints (never through a proxy)."""
        ...

    def for_url(self, url: str) -> urllib3.PoolManager:
        """The pool manager to reach `url` with."""
        ...


class CredentialsError(Exception):
    """No credentials could be found or fetched; the message says where it looked."""


def _expiry(text: str) -> float:
    """An ISO 8601 expiry time (`2026-12-04T16:00:00Z`) as epoch seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class CredentialsProvider:
    """Credentials from one source, fetched on first use and again before they expire;
    thread-safe."""

    def __init__(
        self, source: str, fetch: Fetch, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.source = source
        self._fetch = fetch
        self._clock = clock
        self._lock = threading.Lock()
        self._credentials: Credentials | None = None
        self._expires: float | None = None

    def get(self) -> Credentials:
        """The current credentials; CredentialsError when they cannot be had."""
        credentials, expires = self._credentials, self._expires
        if credentials is not None and (
            expires is None or expires - self._clock() > REFRESH_BEFORE_S
        ):
            return credentials
        with self._lock:
            if self._credentials is None or (
                self._expires is not None and self._expires - self._clock() <= REFRESH_BEFORE_S
            ):
                self._credentials, self._expires = self._fetch()
            return self._credentials


def _static(env: Mapping[str, str]) -> Fetch:
    credentials = Credentials(
        env["AWS_ACCESS_KEY_ID"],
        env["AWS_SECRET_ACCESS_KEY"],
        env.get("AWS_SESSION_TOKEN") or None,
    )
    return lambda: (credentials, None)


def _web_identity(env: Mapping[str, str], region: str, http: HttpPools) -> Fetch:
    role, token_file = env["AWS_ROLE_ARN"], env["AWS_WEB_IDENTITY_TOKEN_FILE"]
    session = env.get("AWS_ROLE_SESSION_NAME") or f"passhat-{int(time.time())}"
    endpoint = (
        env.get("AWS_ENDPOINT_URL_STS")
        or env.get("AWS_ENDPOINT_URL")
        or (
            "https://sts.amazonaws.com"
            if env.get("AWS_STS_REGIONAL_ENDPOINTS") == "legacy"
            else f"https://sts.{region}.amazonaws.com"
        )
    )

    def fetch() -> tuple[Credentials, float | None]:
        try:
            with open(token_file, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as err:
            raise CredentialsError(
                f"cannot read AWS_WEB_IDENTITY_TOKEN_FILE {token_file}: {err.strerror or err}"
            ) from None
        body = urlencode(
            {
                "Action": "AssumeRoleWithWebIdentity",
                "Version": "2011-06-15",
                "RoleArn": role,
                "RoleSessionName": session,
                "WebIdentityToken": token,
            }
        )
        where = f"STS AssumeRoleWithWebIdentity at {endpoint} for {role}"
        response = _call(
            http.for_url(endpoint),
            "POST",
            endpoint.rstrip("/") + "/",
            where,
            body=body.encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        try:
            root = ET.fromstring(response)
            found = root.find(f".//{_STS_NS}Credentials")
            if found is None:
                found = root.find(".//Credentials")
            if found is None:
                raise ValueError("no Credentials element")
            values = {child.tag.rpartition("}")[2]: (child.text or "") for child in found}
            return (
                Credentials(
                    values["AccessKeyId"], values["SecretAccessKey"], values["SessionToken"]
                ),
                _expiry(values["Expiration"]),
            )
        except (ET.ParseError, KeyError, ValueError) as err:
            raise CredentialsError(f"{where}: unexpected answer ({err})") from None

    return fetch


def _container(env: Mapping[str, str], http: HttpPools) -> Fetch:
    url = env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI") or (
        CONTAINER_HOST + env["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"]
    )
    token_file = env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
    fixed_token = env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN")

    def fetch() -> tuple[Credentials, float | None]:
        headers: dict[str, str] = {}
        if token_file:
            try:
                with open(token_file, encoding="utf-8") as handle:
                    headers["Authorization"] = handle.read().strip()
            except OSError as err:
                raise CredentialsError(
                    f"cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE {token_file}: "
                    f"{err.strerror or err}"
                ) from None
        elif fixed_token:
            headers["Authorization"] = fixed_token
        where = f"the container credentials endpoint {url}"
        # NB: never through a proxy (botocore's rule too): the endpoint is link-local.
        response = _call(http.direct, "GET", url, where, headers=headers)
        try:
            values: Any = json.loads(response)
            expiration = values.get("Expiration")
            return (
                Credentials(values["AccessKeyId"], values["SecretAccessKey"], values.get("Token")),
                _expiry(expiration) if expiration else None,
            )
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise CredentialsError(f"{where}: unexpected answer ({err!r})") from None

    return fetch


def _call(
    http: urllib3.PoolManager,
    method: str,
    url: str,
    where: str,
    *,
    body: bytes | None = None,
    headers: Mapping[str, str],
) -> bytes:
    """The body of a 2xx answer; CredentialsError for anything else (one retry on a
    connection error: these endpoints are local or regional and answer fast)."""
    try:
        response = http.request(
            method,
            url,
            body=body,
            headers=dict(headers),
            retries=urllib3.Retry(total=1, connect=1, read=1, redirect=0, status=0),
            timeout=urllib3.Timeout(connect=3.0, read=10.0),
        )
    except urllib3.exceptions.HTTPError as err:
        raise CredentialsError(f"{where}: {err}") from None
    if not 200 <= response.status < 300:
        text = response.data[:300].decode("utf-8", "replace").strip()
        raise CredentialsError(f"{where}: HTTP {response.status}: {text}")
    return bytes(response.data)


def from_environment(
    *,
    region: str,
    http: HttpPools,
    env: Mapping[str, str] | None = None,
) -> CredentialsProvider:
    """The provider for the first source the environment configures; CredentialsError
    naming every variable looked at when there is none."""
    env = os.environ if env is None else env
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        return CredentialsProvider("environment", _static(env))
    if env.get("AWS_ROLE_ARN") and env.get("AWS_WEB_IDENTITY_TOKEN_FILE"):
        return CredentialsProvider("web identity", _web_identity(env, region, http))
    if env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI") or env.get(
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"
    ):
        return CredentialsProvider("container endpoint", _container(env, http))
    raise CredentialsError(
        "no credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_ROLE_ARN "
        "and AWS_WEB_IDENTITY_TOKEN_FILE, or AWS_CONTAINER_CREDENTIALS_FULL_URI)"
    )
