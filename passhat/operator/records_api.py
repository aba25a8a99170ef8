"""The records API: an eval's archived attempts and transcripts, served to kubectl users
through the Kubernetes aggregation layer (`APIService v1alpha1.records.passhat.dev`).

Why aggregated: teams must read their evals' records without ever holding the record
store's credentials, and one team must never read another namespace's transcripts. So the
kube-apiserver authenticates the user (whatever the cluster uses: certificates, OIDC,
tokens) and proxies the request here over mutual TLS, naming the user in `X-Remote-User`,
`X-Remote-Group` and `X-Remote-Extra-*` (the front proxy; the pattern of metrics-server).
This server believes those headers only from a client certificate of the request-header CA
with an allowed common name (both read from `kube-system/extension-apiserver-
authentication`), then asks the API server whether that user may `get pods/log` in the
eval's namespace (a SubjectAccessReview): an eval's records and transcripts are its pods'
logs, so reading them needs that right and nothing more. The kube-apiserver's own check of
the aggregated path (`get` on `evals/trials`, `evals/transcript`) is granted to every
authenticated user by the chart, so this review is the one gate.

Paths (all GET; errors are Kubernetes `Status` objects):

    /apis, /apis/records.passhat.dev, /apis/records.passhat.dev/v1alpha1   discovery
    .../v1alpha1/namespaces/NS/evals/NAME/trials[?uid=UID][&limit=N&continue=T] EvalTrials JSON
    .../v1alpha1/namespaces/NS/evals/NAME/transcript?task=ID&trial=N&attempt=A[&uid=UID]
    /healthz, /livez, /readyz                                               probes (no auth)

The eval's uid: `?uid=`, else the live eval's (if it exists), else the newest archived
one (by `creationTimestamp` in its `eval.json`), so records outlive the eval's deletion.
"""

from __future__ import annotations

import json
import logging
import re
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from passhat.api.errors import UsageError
from passhat.api.spec import GROUP as EVAL_GROUP
from passhat.api.spec import VERSION as EVAL_VERSION
from passhat.records import RecordStore, StoreError, StoreLayout
from passhat.trials.classify_pod import parse_timestamp

__all__ = [
    "AUTH_CONFIG_MAP",
    "DEFAULT_RECORDS_API_PORT",
    "GROUP",
    "VERSION",
    "AccessReviewer",
    "ClusterAccess",
    "KubeAccess",
    "ReadSlots",
    "RecordsApi",
    "RecordsApiServer",
    "RequestHeaderConfig",
    "Response",
    "UserInfo",
    "load_request_header_config",
    "open_records_api",
    "proxy_cert_allowed",
    "user_from_headers",
]

logger = logging.getLogger(__name__)

GROUP = "records.passhat.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
DEFAULT_RECORDS_API_PORT = 8443
# Where the kube-apiserver publishes how to trust its front proxy (namespace, name).
AUTH_CONFIG_MAP = ("kube-system", "extension-apiserver-authentication")
# The right that reading an eval's records needs, in the eval's namespace.
NEEDED = {"verb": "get", "resource": "pods", "subresource": "log"}
NEEDED_TEXT = "get pods/log"
PROBES = ("/healthz", "/livez", "/readyz")

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_PATH = re.compile(
    rf"^/apis/{re.escape(GROUP)}/{VERSION}/namespaces/(?P<ns>[^/]+)/evals/(?P<name>[^/]+)"
    r"/(?P<sub>[^/]+)/?$"
)


# -- who is asking --------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestHeaderConfig:
    """How to trust the front proxy: its CA, allowed names, and the headers it sets."""

    client_ca: str  # PEM, one or more certificates
    allowed_names: tuple[str, ...] = ()  # empty: any name the CA signed
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)
    uid_headers: tuple[str, ...] = ()

    @classmethod
    def from_config_map(cls, data: Mapping[str, str]) -> RequestHeaderConfig:
        """From `extension-apiserver-authentication`'s data; ValueError naming what is
        missing (the API server has no `--requestheader-client-ca-file`)."""
        ca = data.get("requestheader-client-ca-file") or ""
        if "BEGIN CERTIFICATE" not in ca:
            raise ValueError(
                "no requestheader-client-ca-file: the kube-apiserver runs without "
                "--requestheader-client-ca-file, so it cannot proxy to aggregated APIs"
            )

        def names(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
            text = data.get(key)
            if text is None:
                return default
            value = json.loads(text) if text.strip() else []
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{key}: expected a JSON list of strings, got {text!r}")
            return tuple(value)

        return cls(
            client_ca=ca,
            allowed_names=names("requestheader-allowed-names", ()),
            username_headers=names("requestheader-username-headers", ("X-Remote-User",)),
            group_headers=names("requestheader-group-headers", ("X-Remote-Group",)),
            extra_prefixes=names("requestheader-extra-headers-prefix", ("X-Remote-Extra-",)),
            uid_headers=names("requestheader-uid-headers", ()),
        )


@dataclass(frozen=True)
class UserInfo:
    """The user the front proxy vouches for."""

    name: str
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # sorted (key, values)
    uid: str = ""


class Headers(Protocol):
    """What the request's headers offer (`http.client.HTTPMessage` fits)."""

    def items(self) -> Iterable[tuple[str, str]]: ...


def proxy_cert_allowed(peer_cert: Mapping[str, Any] | None, config: RequestHeaderConfig) -> bool:
    """Whether a TLS peer certificate (already verified against the request-header CA, as
    `SSLSocket.getpeercert()` gives it) is the front proxy's: present, and its common name
    allowed (any name when the API server allows any)."""
    if not peer_cert:
        return False
    if not config.allowed_names:
        return True
    names = [
        value for rdn in peer_cert.get("subject", ()) for key, value in rdn if key == "commonName"
    ]
    return any(name in config.allowed_names for name in names)


def user_from_headers(headers: Headers, config: RequestHeaderConfig) -> UserInfo | None:
    """The user named by the front proxy's headers; None when no user header is set.

    Header names match without regard to case; every group header and every occurrence of
    it adds a group; an extra header `X-Remote-Extra-<key>` adds a value to the extra
    `<key>` (lower-cased and percent-decoded, as the kube-apiserver encodes it).
    """
    lowered = [(name.lower(), value) for name, value in headers.items()]

    def values(names: tuple[str, ...]) -> list[str]:
        wanted = {name.lower() for name in names}
        return [value for name, value in lowered if name in wanted]

    users = [value for value in values(config.username_headers) if value]
    if not users:
        return None
    extra: dict[str, list[str]] = {}
    for name, value in lowered:
        for prefix in config.extra_prefixes:
            if name.startswith(prefix.lower()) and len(name) > len(prefix):
                key = urllib.parse.unquote(name[len(prefix) :])
                extra.setdefault(key, []).append(value)
    uids = values(config.uid_headers)
    return UserInfo(
        name=users[0],
        groups=tuple(values(config.group_headers)),
        extra=tuple(sorted((key, tuple(vals)) for key, vals in extra.items())),
        uid=uids[0] if uids else "",
    )


# -- may they --------------------------------------------------------------------------------


class ClusterAccess(Protocol):
    """What the records API asks of the kube-apiserver, with the operator's own rights."""

    def get_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A ConfigMap; None when it does not exist."""
        ...

    def get_eval(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The live ConsistencyEval; None when it does not exist (or cannot be read)."""
        ...

    def create_access_review(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST a SubjectAccessReview; the review as answered (raises when unanswered)."""
        ...


@dataclass(frozen=True)
class Decision:
    """A review's answer: allowed or not, and the authorizer's reason when it gave one."""

    allowed: bool
    reason: str = ""


@dataclass
class AccessReviewer:
    """Asks the API server whether a user may `get pods/log` in a namespace; answers are
    kept `ttl_s` seconds (like the kube-apiserver's delegating authorizer), at most
    `max_entries` of them."""

    access: ClusterAccess
    ttl_s: float = 10.0
    max_entries: int = 4096
    clock: Callable[[], float] = time.monotonic
    _cache: dict[tuple[Any, ...], tuple[float, Decision]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def review(self, user: UserInfo, namespace: str) -> Decision:
        """The decision for `user` in `namespace` (raises when the API server cannot answer:
        the caller then refuses with 503, never allows)."""
        key = (user, namespace)
        now = self.clock()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and cached[0] > now:
                return cached[1]
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "resourceAttributes": {"namespace": namespace, **NEEDED},
        }
        if user.extra:
            spec["extra"] = {key: list(values) for key, values in user.extra}
        if user.uid:
            spec["uid"] = user.uid
        answer = self.access.create_access_review(
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": spec,
            }
        )
        status = answer.get("status") or {}
        decision = Decision(
            allowed=bool(status.get("allowed")) and not status.get("denied"),
            reason=str(status.get("reason") or status.get("evaluationError") or ""),
        )
        with self._lock:
            if len(self._cache) >= self.max_entries:
                self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
                if len(self._cache) >= self.max_entries:
                    self._cache.clear()
            self._cache[key] = (now + self.ttl_s, decision)
        return decision


class ReadSlots:
    """At most `total` record reads at once in the operator's process, at most `per_user`
    of them one user's; a read that finds no slot is refused at once (429), never queued.

    Why: a read builds the whole answer in memory and holds the GIL while it decodes and
    encodes records (about 25 µs and 1 KiB a record; an eval may have 200,000 slots and
    their retries), in the process that drives every namespace's evals. Unbounded, a
    tenant allowed to read only their own namespace ran the operator out of memory with a
    few parallel `kubectl passhat trials` of one big eval (docs/security.md)."""

    def __init__(self, *, total: int = 2, per_user: int = 1) -> None:
        self.total = total
        self.per_user = per_user
        self._busy: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, user: str) -> bool:
        """Take a slot for `user`; False when none is free for them now."""
        with self._lock:
            if sum(self._busy.values()) >= self.total or self._busy.get(user, 0) >= self.per_user:
                return False
            self._busy[user] = self._busy.get(user, 0) + 1
            return True

    def give_back(self, user: str) -> None:
        with self._lock:
            left = self._busy.get(user, 0) - 1
            if left > 0:
                self._busy[user] = left
            else:
                self._busy.pop(user, None)


# A refused read is asked to come back after this long (Retry-After).
READ_RETRY_AFTER_S = 1
# The most records one `trials` answer holds (`?limit=`, the default too); the rest come
# with `?continue=` as Kubernetes lists do. About 14 MiB of the operator's memory a page
# (bench/records_read.py: 2.8 KiB a record while the answer is built).
PAGE_RECORDS = 5000


# -- what they get ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Response:
    """An HTTP answer: status code, content type, body (and extra headers)."""

    code: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def json(self) -> Any:
        """The body decoded (tests)."""
        return json.loads(self.body)


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    500: "InternalError",
    429: "TooManyRequests",
    503: "ServiceUnavailable",
}


def status(
    code: int, message: str, *, name: str = "", kind: str = "evals", retry_after: int = 0
) -> Response:
    """A Kubernetes `Status` (failure) as kubectl prints it: `Error from server (...)`;
    with `retry_after`, `details.retryAfterSeconds` and the `Retry-After` header (429)."""
    details: dict[str, Any] = {"group": GROUP, "kind": kind, **({"name": name} if name else {})}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": _REASONS.get(code, "Unknown"),
        "details": details,
        "code": code,
    }
    answer = _json(code, body)
    if retry_after:
        answer = Response(
            answer.code, answer.content_type, answer.body, (("Retry-After", str(retry_after)),)
        )
    return answer


def _json(code: int, body: Any) -> Response:
    return Response(code, "application/json", json.dumps(body).encode())


def _discovery(path: str) -> Response | None:
    version = {"groupVersion": API_VERSION, "version": VERSION}
    group = {
        "name": GROUP,
        "versions": [version],
        "preferredVersion": version,
    }
    if path == "/apis":
        return _json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]})
    if path == f"/apis/{GROUP}":
        return _json(200, {"kind": "APIGroup", "apiVersion": "v1", **group})
    if path == f"/apis/{API_VERSION}":
        resources = [
            {
                "name": f"evals/{sub}",
                "singularName": "",
                "namespaced": True,
                "kind": kind,
                "verbs": ["get"],
            }
            for sub, kind in (("trials", "EvalTrials"), ("transcript", "Transcript"))
        ]
        return _json(
            200,
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": API_VERSION,
                "resources": resources,
            },
        )
    return None


class RecordsApi:
    """The records API's logic, apart from HTTP: one `handle` per request.

    `store` holds the archive; `access` reaches the kube-apiserver with the operator's
    rights (live evals, access reviews); `config` says how to trust the front proxy.
    """

    def __init__(
        self,
        *,
        store: RecordStore,
        access: ClusterAccess,
        config: RequestHeaderConfig,
        reviewer: AccessReviewer | None = None,
        slots: ReadSlots | None = None,
    ) -> None:
        self.store = store
        self.access = access
        self.config = config
        self.reviewer = reviewer if reviewer is not None else AccessReviewer(access)
        self.slots = slots if slots is not None else ReadSlots()

    def handle(
        self,
        method: str,
        target: str,
        headers: Headers,
        peer_cert: Mapping[str, Any] | None,
    ) -> Response:
        """Answer one request; `peer_cert` is the verified client certificate (or None)."""
        parsed = urllib.parse.urlsplit(target)
        path = parsed.path.rstrip("/") or "/"
        if path in PROBES:
            return Response(200, "text/plain; charset=utf-8", b"ok")
        if not proxy_cert_allowed(peer_cert, self.config):
            return status(
                401,
                "Unauthorized: the records API answers only the kube-apiserver's front "
                "proxy (a client certificate of its request-header CA); go through the "
                "API server, e.g. kubectl get --raw /apis/records.passhat.dev/v1alpha1",
            )
        if method not in ("GET", "HEAD"):
            return status(405, f"method {method} is not allowed: the records API is read-only")
        found = _discovery(path)
        if found is not None:
            return found
        match = _PATH.match(path)
        if match is None:
            return status(404, "the server could not find the requested resource")
        namespace, name, sub = match["ns"], match["name"], match["sub"]
        if sub not in ("trials", "transcript"):
            return status(404, f"no subresource {sub!r} of evals: trials or transcript")
        if not (_NAME.match(namespace) and _NAME.match(name)):
            return status(400, f"not a valid namespace/name: {namespace}/{name}", name=name)
        user = user_from_headers(headers, self.config)
        if user is None:
            return status(401, "Unauthorized: the front proxy named no user", name=name)
        try:
            decision = self.reviewer.review(user, namespace)
        except Exception as err:  # NB: fail closed, whatever went wrong
            logger.warning("records api: access review for %s failed: %s", user.name, err)
            return status(503, f"cannot check access now (SubjectAccessReview: {err})", name=name)
        if not decision.allowed:
            logger.info(
                "records api: refused %s %s in namespace %s (%s)",
                user.name,
                sub,
                namespace,
                decision.reason or "no rule allows",
            )
            return status(
                403,
                f'user "{user.name}" cannot {NEEDED_TEXT} in namespace "{namespace}" (reading '
                f"an eval's records and transcripts needs that right)",
                name=name,
            )
        query = urllib.parse.parse_qs(parsed.query)
        if not self.slots.take(user.name):
            return status(
                429,
                f"too many record reads in flight (at most {self.slots.total} at once, "
                f"{self.slots.per_user} per user); retry in {READ_RETRY_AFTER_S} s",
                name=name,
                retry_after=READ_RETRY_AFTER_S,
            )
        try:
            if sub == "trials":
                return self._trials(namespace, name, query)
            return self._transcript(namespace, name, query)
        except StoreError as err:
            logger.warning("records api: %s", err)
            return status(503, f"the records store cannot answer now: {err}", name=name)
        finally:
            self.slots.give_back(user.name)

    # -- the reads ---------------------------------------------------------------------------

    def _uid(self, namespace: str, name: str, query: Mapping[str, list[str]]) -> tuple[str, bool]:
        """(uid, live): `?uid=`, else the live eval's, else the newest archived one ("")."""
        live_uid = ""
        try:
            live = self.access.get_eval(namespace, name)
        except Exception as err:  # NB: the archive still answers without the live eval
            logger.debug("records api: reading eval %s/%s: %s", namespace, name, err)
            live = None
        if live is not None:
            live_uid = str((live.get("metadata") or {}).get("uid") or "")
        asked = (query.get("uid") or [""])[0]
        if asked:
            return asked, asked == live_uid
        if live_uid:
            return live_uid, True
        return self._newest_uid(namespace, name), False

    def _newest_uid(self, namespace: str, name: str) -> str:
        prefix = StoreLayout.evals_prefix(namespace, name)
        best: tuple[float, str] | None = None
        for key in self.store.list(prefix):
            uid, _, rest = key[len(prefix) :].partition("/")
            if rest != "eval.json":
                continue
            manifest = _load(self.store.get(key))
            created = parse_timestamp((manifest or {}).get("creationTimestamp")) or 0.0
            if best is None or (created, uid) > best:
                best = (created, uid)
        return best[1] if best else ""

    def _manifest(
        self, namespace: str, name: str, query: Mapping[str, list[str]]
    ) -> tuple[StoreLayout, dict[str, Any], bool] | Response:
        uid, live = self._uid(namespace, name, query)
        layout = StoreLayout(namespace, name, uid) if uid else None
        try:
            key = layout.eval_key if layout is not None else None
        except ValueError:
            return status(400, f"uid: not a valid uid: {uid!r}", name=name)
        manifest = _load(self.store.get(key)) if key is not None else None
        if layout is None or not isinstance(manifest, dict):
            which = f" (uid {uid})" if uid else ""
            return status(
                404,
                f'no records of consistencyeval "{name}"{which} in namespace "{namespace}"',
                name=name,
            )
        return layout, manifest, live

    def _trials(self, namespace: str, name: str, query: Mapping[str, list[str]]) -> Response:
        try:
            limit = int((query.get("limit") or [str(PAGE_RECORDS)])[0])
        except ValueError:
            limit = 0
        if not 1 <= limit <= PAGE_RECORDS:
            return status(400, f"limit: a number of records from 1 to {PAGE_RECORDS}", name=name)
        after = (query.get("continue") or [""])[0]
        found = self._manifest(namespace, name, query)
        if isinstance(found, Response):
            return found
        layout, manifest, live = found
        keyed, more = self._page(layout.records_prefix, after, limit)
        keyed.sort(key=lambda item: item[0])
        meta: dict[str, Any] = {
            "name": name,
            "namespace": namespace,
            "uid": layout.uid,
            "creationTimestamp": manifest.get("creationTimestamp"),
        }
        if more:
            meta["continue"] = more
        body = {
            "apiVersion": API_VERSION,
            "kind": "EvalTrials",
            "metadata": meta,
            "live": live,
            "eval": manifest,
            "records": [record for _, record in keyed],
        }
        return _json(200, body)

    def _page(
        self, prefix: str, after: str, limit: int
    ) -> tuple[list[tuple[tuple[int, int, int], dict[str, Any]]], str]:
        """Up to `limit` records whose keys come after `prefix + after` (store key order),
        and the continue token ("" on the last page: the last key read, without prefix)."""
        keyed: list[tuple[tuple[int, int, int], dict[str, Any]]] = []
        last = ""
        for key in self.store.list(prefix):
            position = StoreLayout.parse_record_key(key)
            if position is None or key[len(prefix) :] <= after:
                continue
            if len(keyed) == limit:
                return keyed, last
            record = _load(self.store.get(key))
            last = key[len(prefix) :]
            if isinstance(record, dict):
                keyed.append((position, record))
        return keyed, ""

    def _transcript(self, namespace: str, name: str, query: Mapping[str, list[str]]) -> Response:
        task_id = (query.get("task") or [""])[0]
        try:
            trial = int((query.get("trial") or [""])[0])
            attempt = int((query.get("attempt") or [""])[0])
        except ValueError:
            trial = attempt = -1
        if not task_id or trial < 0 or attempt < 0:
            return status(
                400,
                "a transcript needs ?task=ID&trial=N&attempt=A (trial and attempt from 0)",
                name=name,
                kind="evals/transcript",
            )
        found = self._manifest(namespace, name, query)
        if isinstance(found, Response):
            return found
        layout, manifest, _ = found
        task_ids = manifest.get("taskIds") or []
        if task_id not in task_ids:
            return status(
                404, f'eval "{name}" has no task "{task_id}"', name=name, kind="evals/transcript"
            )
        data = self.store.get(layout.transcript_key(task_ids.index(task_id), trial, attempt))
        if data is None:
            return status(
                404,
                f'no transcript of task "{task_id}" trial {trial} attempt {attempt} of eval '
                f'"{name}" in namespace "{namespace}"',
                name=name,
                kind="evals/transcript",
            )
        return Response(200, "text/plain; charset=utf-8", data)


def _load(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


# -- the cluster, with the operator's rights -------------------------------------------------


class KubeAccess:
    """`ClusterAccess` over the kubernetes client's REST layer (raw JSON, like `Kube`)."""

    def __init__(self, configuration: Any, *, timeout_s: float = 10.0) -> None:
        from kubernetes import client

        self._client = client.ApiClient(configuration)
        self._client.user_agent = "passhat-operator/records-api"
        self._timeout_s = timeout_s

    def _call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        method, url, headers, serialized, _ = self._client.param_serialize(
            method=method,
            resource_path=path,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self._client.call_api(
            method, url, header_params=headers, body=serialized, _request_timeout=self._timeout_s
        )
        try:
            raw = response.read()  # type: ignore[no-untyped-call]
        finally:
            response.response.release_conn()
        data = _load(raw) if raw else {}
        return int(response.status), data if data is not None else {}

    def _get(self, path: str) -> dict[str, Any] | None:
        code, data = self._call("GET", path)
        if code == 404:
            return None
        if not 200 <= code < 300:
            raise RuntimeError(f"GET {path}: HTTP {code}: {data.get('message', '')}")
        return dict(data)

    def get_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get(f"/api/v1/namespaces/{namespace}/configmaps/{name}")

    def get_eval(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get(
            f"/apis/{EVAL_GROUP}/{EVAL_VERSION}/namespaces/{namespace}/consistencyevals/{name}"
        )

    def create_access_review(self, body: Mapping[str, Any]) -> dict[str, Any]:
        path = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
        code, data = self._call("POST", path, dict(body))
        if not 200 <= code < 300:
            raise RuntimeError(f"HTTP {code}: {data.get('message', '')}")
        return dict(data)

    def close(self) -> None:
        self._client.close()  # type: ignore[no-untyped-call]


def load_request_header_config(
    access: ClusterAccess, *, attempts: int = 5, delay_s: float = 1.0
) -> RequestHeaderConfig:
    """Read how to trust the front proxy from `kube-system/extension-apiserver-
    authentication`; ValueError naming the problem when it cannot be had."""
    namespace, name = AUTH_CONFIG_MAP
    last = ""
    for attempt in range(attempts):
        try:
            config_map = access.get_config_map(namespace, name)
        except Exception as err:  # NB: the API server may be restarting; try a few times
            last = str(err)
        else:
            if config_map is None:
                raise ValueError(f"configmap {namespace}/{name} does not exist")
            return RequestHeaderConfig.from_config_map(config_map.get("data") or {})
        if attempt + 1 < attempts:
            time.sleep(delay_s)
    raise ValueError(
        f"cannot read configmap {namespace}/{name} ({last}); the operator needs the role "
        "extension-apiserver-authentication-reader in kube-system"
    )


# -- HTTP ------------------------------------------------------------------------------------


def _handler(api: RecordsApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "passhat-records-api"
        protocol_version = "HTTP/1.1"  # NB: keep-alive: the aggregator reuses connections
        timeout = 120  # idle keep-alive connections are closed after this

        def setup(self) -> None:
            super().setup()
            cert = self.request.getpeercert() if isinstance(self.request, ssl.SSLSocket) else None
            # NB: only the kube-apiserver's front proxy may keep a connection open (the
            # port is open to every pod): any other peer gets one answer, within a short
            # timeout, and the connection is closed
            self.from_proxy = proxy_cert_allowed(cert, api.config)
            if not self.from_proxy:
                self.connection.settimeout(_TLSServer.handshake_timeout_s)

        def _serve(self) -> None:
            cert = self.request.getpeercert() if isinstance(self.request, ssl.SSLSocket) else None
            response = api.handle(self.command, self.path, self.headers, cert)
            self.send_response(response.code)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
            self.send_header("Cache-Control", "no-store")
            if not self.from_proxy:
                self.send_header("Connection", "close")
                self.close_connection = True
            for header, value in response.headers:
                self.send_header(header, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(response.body)

        do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        def log_message(self, format: str, *args: object) -> None:
            logger.debug("records api: " + format, *args)

    return Handler


class _TLSServer(ThreadingHTTPServer):
    """A threaded HTTPS server whose TLS handshakes run in the request threads (a slow
    client never holds up the accept loop), with at most `max_connections` connections
    (threads) at once: one more is closed as soon as it is accepted.

    Why: the port is open to every pod (the kube-apiserver's address is not known to a
    NetworkPolicy), and a thread per connection, unbounded, let any pod of any tenant
    open thousands of idle connections, each a thread of the process that drives every
    namespace's evals, until it ran out of memory or of its pid limit. A flood can still
    keep the records API busy (reads then fail, 503 from the kube-apiserver), never the
    operator."""

    daemon_threads = True
    handshake_timeout_s = 5.0
    max_connections = 128

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], ctx: ssl.SSLContext
    ) -> None:
        self.ssl_context = ctx
        self._connections = threading.BoundedSemaphore(self.max_connections)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._connections.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._connections.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._connections.release()

    def get_request(self) -> tuple[Any, Any]:
        sock, address = self.socket.accept()
        wrapped = self.ssl_context.wrap_socket(
            sock, server_side=True, do_handshake_on_connect=False
        )
        return wrapped, address

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            request.settimeout(self.handshake_timeout_s)
            request.do_handshake()
        except (ssl.SSLError, OSError) as err:
            logger.debug("records api: TLS handshake with %s failed: %s", client_address, err)
            return
        super().finish_request(request, client_address)


def server_context(*, cert_file: str, key_file: str, client_ca: str) -> ssl.SSLContext:
    """TLS 1.2+ with our serving cert; client certs are asked for (not required, so probes
    connect) and, when sent, must chain to the request-header CA `client_ca` (PEM)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert_file, key_file)
    ctx.verify_mode = ssl.CERT_OPTIONAL
    ctx.load_verify_locations(cadata=client_ca)
    return ctx


class RecordsApiServer:
    """The records API on one HTTPS port, served from a daemon thread beside kopf."""

    def __init__(
        self,
        api: RecordsApi,
        *,
        cert_file: str,
        key_file: str,
        port: int = DEFAULT_RECORDS_API_PORT,
        host: str = "0.0.0.0",
    ) -> None:
        ctx = server_context(cert_file=cert_file, key_file=key_file, client_ca=api.config.client_ca)
        self._httpd = _TLSServer((host, port), _handler(api), ctx)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="passhat-records-api", daemon=True
        )

    @property
    def port(self) -> int:
        """The port actually bound (useful with port 0)."""
        return int(self._httpd.server_address[1])

    def start(self) -> RecordsApiServer:
        """Start serving in the background; returns self."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._thread.join(timeout=10)
        self._httpd.server_close()

    def __enter__(self) -> RecordsApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_records_api(
    *,
    store: RecordStore | None,
    configuration: Any,
    port: int,
    cert_file: str | None,
    key_file: str | None,
    host: str = "0.0.0.0",
) -> RecordsApiServer:
    """The records API server (not yet started) of `passhat operator --records-api-port`.

    Reads how to trust the front proxy from the cluster first. Raises UsageError naming
    the flag or the cluster setting that is missing: no store, no cert or key, an
    unreadable cert, a port that cannot be bound, no request-header CA.
    """
    if store is None:
        raise UsageError("--records-api-port: serving the records API needs a records store")
    if not cert_file or not key_file:
        raise UsageError("--records-api-port needs --records-api-cert and --records-api-key")
    access = KubeAccess(configuration)
    try:
        config = load_request_header_config(access)
    except ValueError as err:
        raise UsageError(f"--records-api-port: {err}") from None
    api = RecordsApi(store=store, access=access, config=config)
    try:
        return RecordsApiServer(api, cert_file=cert_file, key_file=key_file, port=port, host=host)
    except ssl.SSLError as err:
        raise UsageError(
            f"--records-api-cert {cert_file} / --records-api-key {key_file}: {err.reason or err}"
        ) from None
    except OSError as err:
        raise UsageError(
            f"--records-api-port {port}: cannot listen or read the certificate "
            f"({err.strerror or err})"
        ) from None
