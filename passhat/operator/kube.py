"""Kubernetes API access for the reconcile loop: raw JSON in and out, retried, parallel.

The loop needs a handful of calls (get an eval, list its unrecorded pods, create a pod,
write status with a resourceVersion precondition, release a finalizer and mark a pod
recorded, delete a pod, read a pod or a ConfigMap)
and it needs them fast: the benchmark compares the operator with the Job controller, so
nothing here deserializes into client models, every call but `list_pods` reads straight
from the API server, `list_pods` reads the pod cache the pod watch feeds (`podcache.py`;
the loop treats it as possibly stale: docs/operator.md, *Why it is exact*), and the
writes of one pass go out in parallel on thread pools shared fairly by the evals
(`fairpool.FairPool`: round robin over evals, each capped at three quarters of the
threads), so one eval's backlog never holds up another's writes.

Every write to an existing pod (a finalizer patch, a delete) is made only to a pod the
operator made (`ownership.PodSigner`: controller owner reference and creation mark) and
carries that pod's uid as a precondition (a `test` op in the JSON patch, `preconditions`
on the delete), so a pod created in its place under the same name is never touched.
The verbs each call needs are listed in `API_CALLS`, which the chart's RBAC test holds
the rendered (Cluster)Role to.

`EvalApi` is the protocol the loop codes against and `OperatorApi` adds the pod watch the
handlers use; `Kube` implements both over the `kubernetes` client's REST layer, and the
unit tests implement `EvalApi` in memory. Transient failures (5xx, 429, connection
errors: the API server restarting) are retried a few times here; anything longer fails
the pass, which the loop simply runs again later. A pod create is the exception: a 429 on
it is not retried here, and a batch of creates stops sending at its first error, so the
eval's pacing (`pacing.py`) backs off instead.
"""

from __future__ import annotations

import functools
import json
import logging
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

import urllib3

from passhat import metrics
from passhat.api.spec import GROUP, VERSION
from passhat.operator import protowire
from passhat.operator.config import OperatorConfig
from passhat.operator.fairpool import FairPool
from passhat.operator.ownership import PodSigner
from passhat.operator.podcache import PodCache
from passhat.operator.pods import (
    ANNOTATION_TRANSCRIPT,
    FINALIZER,
    LABEL_EVAL_UID,
    LABEL_GRADING,
    LABEL_RECORDED,
    let_go_already,
)
from passhat.operator.slimpod import decode_pod, slim_pod

__all__ = [
    "ApiError",
    "Conflict",
    "EvalApi",
    "Kube",
    "OperatorApi",
    "load_client_config",
    "slim_pod",
]

logger = logging.getLogger(__name__)

PLURAL = "consistencyevals"
T = TypeVar("T")


# LIST pages: the first asks for LIST_FIRST_PAGE pods; each later one for at most twice
# as many as the page before, as many as fit in LIST_PAGE_BYTES at the largest size per
# pod seen so far, and at most LIST_PAGE_SIZE. (Pods carry their task's params in env:
# 500 pods of 64 KiB params, the most allowed, are a 32 MB response or more.)
LIST_PAGE_SIZE = 500
LIST_FIRST_PAGE = 10
LIST_PAGE_BYTES = 8 * 1024 * 1024
# Trial pods of one eval whose outcome is not yet recorded and released (kept pods carry
# LABEL_RECORDED and are never listed or watched again).
_UNRECORDED = f"!{LABEL_RECORDED}"
# How long the end of a keep or release is remembered (longer than any LIST takes).
_RELEASED_HORIZON_S = 600.0
# A GET of only an object's metadata (a PartialObjectMetadata), not its data.
_METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
# For writes whose returned object is not read (pod creates, patches, deletes): the API
# server encodes it as protobuf, not JSON, and it is dropped; an error is still read
# (protowire.py). JSON stays acceptable, for a server that would not offer protobuf.
_WRITE_ONLY = f"{protowire.MEDIA_TYPE}, application/json"
# For pod reads (the pod watch, its LIST, a GET), decoded by `slimpod.decode_pod`.
_PROTOBUF = protowire.MEDIA_TYPE
_PROTOBUF_WATCH = f"{protowire.MEDIA_TYPE};stream=watch"

# Every API call of the operator process as (API group, resource, verb), the RBAC it
# needs: the chart's (Cluster)Role must grant exactly these (tests/unit/test_chart_rbac.py).
API_CALLS: dict[str, tuple[str, str, str]] = {
    "Kube.get_eval": ("passhat.dev", "consistencyevals", "get"),
    "Kube.patch_eval_status": ("passhat.dev", "consistencyevals/status", "patch"),
    "Kube.list_pods, Kube.list_held_pods, Kube.watch_pods (its LIST)": ("", "pods", "list"),
    "Kube.watch_pods": ("", "pods", "watch"),
    "Kube.get_pod": ("", "pods", "get"),
    "Kube._create_pod": ("", "pods", "create"),
    "Kube._patch_out_finalizer": ("", "pods", "patch"),
    "Kube._release_pod": ("", "pods", "delete"),
    "Kube.read_pod_log (the archiver, the grader check)": ("", "pods/log", "get"),
    "Kube.get_config_map (spec.tasksFrom), records_api (an eval's tasks)": (
        "",
        "configmaps",
        "get",
    ),
    "kopf: the eval watch (list)": ("passhat.dev", "consistencyevals", "list"),
    "kopf: the eval watch": ("passhat.dev", "consistencyevals", "watch"),
    "kopf: its finalizer and annotations on evals": ("passhat.dev", "consistencyevals", "patch"),
    "events.post (kopf.event)": ("", "events", "create"),
    "Kube.list_evals (drain)": ("passhat.dev", "consistencyevals", "list"),
    "Kube.remove_eval_finalizer (drain)": ("passhat.dev", "consistencyevals", "patch"),
    "Kube.get_lease (leader election, namespace claims)": ("coordination.k8s.io", "leases", "get"),
    "Kube.create_lease": ("coordination.k8s.io", "leases", "create"),
    "Kube.update_lease": ("coordination.k8s.io", "leases", "update"),
}
# Namespaced mode only: the operator's RoleBinding in each served namespace carries a
# finalizer, so a namespace being deleted keeps it until the operator has let go of its
# evals and pods there (rights.py); it reads it and removes that finalizer (by name).
API_CALLS_NAMESPACED: dict[str, tuple[str, str, str]] = {
    "Kube.get_rbac": ("rbac.authorization.k8s.io", "rolebindings", "get"),
    "Kube.remove_rbac_finalizer": ("rbac.authorization.k8s.io", "rolebindings", "patch"),
}
# Cluster-wide only: kopf lists and watches CRDs to find the resource it serves (its
# scan is off in namespaced mode, see handlers._settings).
API_CALLS_CLUSTER_WIDE: dict[str, tuple[str, str, str]] = {
    "kopf: CRD discovery (list)": ("apiextensions.k8s.io", "customresourcedefinitions", "list"),
    "kopf: CRD discovery": ("apiextensions.k8s.io", "customresourcedefinitions", "watch"),
}


class ApiError(Exception):
    """An API call failed for good (after retries, or a non-retryable status)."""

    def __init__(self, verb: str, status: int, message: str) -> None:
        self.verb = verb
        self.status = status
        super().__init__(f"{verb}: HTTP {status}: {message}")


class Conflict(ApiError):
    """409: the object changed since it was read (a stale status write)."""


class EvalApi(Protocol):
    """What the reconcile loop asks of the API server (all JSON dicts, camelCase)."""

    def get_eval(
        self, namespace: str, name: str, *, not_older_than: str = ""
    ) -> dict[str, Any] | None:
        """The eval as stored now; None when it does not exist. With `not_older_than` (a
        resourceVersion this loop read or wrote), the eval as the API server's watch cache
        holds it, at least that new: no read of etcd, no decoding of the stored JSON."""
        ...

    def list_pods(self, namespace: str, eval_uid: str) -> list[dict[str, Any]]:
        """Every pod labelled with this eval's uid and not (yet) labelled recorded, read
        from the API server. Each pod may be cut down to what the loop reads (`slim_pod`).
        """
        ...

    def get_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A ConfigMap; None when it does not exist."""
        ...

    def get_config_map_meta(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A ConfigMap's metadata only (uid, resourceVersion, ...); None when it does not
        exist."""
        ...

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A pod as stored now (slimmed); None when it does not exist."""
        ...

    def patch_eval_status(
        self, namespace: str, name: str, resource_version: str, status: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Merge-patch `status` if the eval is still at `resource_version`; else Conflict."""
        ...

    def settle(
        self,
        namespace: str,
        *,
        keep: Sequence[Mapping[str, Any]],
        release: Sequence[Mapping[str, Any]],
        create: Sequence[Mapping[str, Any]],
        before: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> list[str]:
        """Create, keep and release pods, all in parallel; the names of the creates that
        found their name taken (409) are returned.

        The creates stop at the first error: pods of `create` not yet sent by then are not
        sent (a full quota refuses them all alike), and that error is raised.

        `before(pod)` runs first for each pod to keep or release (the archive of its
        attempt); when it raises, that pod is neither kept nor released (the next pass
        lists it again).

        `keep`: finished pods whose outcome is recorded; ONE patch removes our finalizer
        and adds the recorded label, and the pod stays until its eval is deleted.
        `release`: remove our finalizer, then delete the pod (never recorded, or still
        running). A pod that is already gone is fine. A pod the operator did not make
        is neither kept nor released (logged), and every patch and delete carries the
        pod's uid as a precondition.
        The creates are done when this returns (their errors are raised); keeps and
        releases may still be in flight, and until each is done `list_pods` leaves its
        pod out (the loop would only release it again).
        """
        ...

    def release_pods(self, namespace: str, pods: Sequence[Mapping[str, Any]]) -> None:
        """Remove our finalizer from each pod, then delete it (in parallel; gone is fine);
        only pods the operator made, each with its uid as a precondition."""
        ...

    def releasing(self, namespace: str, eval_uid: str) -> int:
        """How many of the eval's keeps and releases (and their archives) are in flight."""
        ...

    def read_pod_log(
        self,
        namespace: str,
        name: str,
        container: str,
        limit_bytes: int,
        tail_lines: int | None = None,
    ) -> bytes:
        """Up to `limit_bytes` of a container's log (of its last `tail_lines` lines when
        given); b"" when there is none (see `passhat.operator.archive.LogReader`)."""
        ...


class OperatorApi(EvalApi, Protocol):
    """What the kopf handlers ask of the API server: the loop's calls, and a pod watch."""

    def list_held_pods(self, namespace: str | None) -> list[dict[str, Any]]:
        """Every unrecorded trial pod of any eval in `namespace` (None: all namespaces),
        slimmed; the operator's start looks among them for pods whose eval is gone."""
        ...

    def watch_pods(
        self, namespace: str, on_event: Callable[[str, Mapping[str, Any]], None]
    ) -> None:
        """Stream trial pod events of a namespace to `on_event(type, pod)` (raises on errors)."""
        ...


def load_client_config(kubeconfig: str | None = None) -> Any:
    """A `kubernetes.client.Configuration` from a kubeconfig file or the in-cluster one."""
    from kubernetes import client, config

    configuration = client.Configuration()
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, client_configuration=configuration
        )
    except config.ConfigException:
        if kubeconfig is not None:
            raise
        config.load_incluster_config(  # type: ignore[no-untyped-call]
            client_configuration=configuration
        )
    return configuration


def _retryable(status: int) -> bool:
    return status == 429 or status >= 500


# How often the kubernetes client's credential hook runs at most (see `_CredentialHook`).
CREDENTIAL_REFRESH_S = 10.0


class _CredentialHook:
    """The configuration's `refresh_api_key_hook`, run at most every `every_s` seconds.

    The kubernetes client runs the hook before every request, and both its loaders' hooks
    (kubeconfig and in-cluster) copy the host, the CA and the token into the configuration
    each time: ~4 % of the operator's CPU in a 1,000-trial benchmark (py-spy, #22). The
    tokens they load live for minutes (the in-cluster loader rereads its file once a
    minute), so every 10 s is as fresh; a 401 runs it at once (`Kube._request`)."""

    def __init__(
        self,
        hook: Callable[[Any], object],
        every_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.hook, self.every_s, self._clock = hook, every_s, clock
        self._next = float("-inf")
        self._lock = threading.Lock()

    def __call__(self, configuration: Any) -> None:
        with self._lock:
            now = self._clock()
            if now >= self._next:
                self._next = now + self.every_s
                self.hook(configuration)
                self.install(configuration)

    def install(self, configuration: Any) -> None:
        """Be the configuration's hook. Both loaders' hooks install themselves again (a new
        closure) each time they run, and a thread may have run such a closure directly
        (read from the configuration before this throttle put itself back): keep the
        newest one behind this throttle (`Kube._request` calls this before each request)."""
        current = getattr(configuration, "refresh_api_key_hook", None)
        if current is not self and current is not None:
            self.hook = current
            configuration.refresh_api_key_hook = self

    def expire(self) -> None:
        """Run the hook before the next request (the API server refused the token)."""
        self._next = float("-inf")


def _eval_key(namespace: str, pods: Sequence[Mapping[str, Any]]) -> str:
    """Whose writes these are, for the fair pools: the first pod's eval (uid label)."""
    labels = (pods[0].get("metadata") or {}).get("labels") or {} if pods else {}
    return f"{namespace}/{labels.get(LABEL_EVAL_UID, '')}"


class Kube:
    """`EvalApi` over the kubernetes client's REST layer, raw JSON, retried, parallel."""

    def __init__(self, configuration: Any, config: OperatorConfig | None = None) -> None:
        from kubernetes import client

        self._config = config or OperatorConfig()
        # NB: the write pool and the release pool (write_threads each) and the passes'
        # LISTs: with fewer, urllib3 drops connections and the next call pays a new TLS
        # handshake ("Connection pool is full" warnings in every 1,000-trial benchmark).
        configuration.connection_pool_maxsize = max(
            getattr(configuration, "connection_pool_maxsize", 0) or 0,
            2 * self._config.write_threads + 8,
        )
        hook = getattr(configuration, "refresh_api_key_hook", None)
        if hook is not None and not isinstance(hook, _CredentialHook):
            configuration.refresh_api_key_hook = _CredentialHook(hook, CREDENTIAL_REFRESH_S)
        self._credentials: _CredentialHook | None = configuration.refresh_api_key_hook
        self._client = client.ApiClient(configuration)
        self._client.user_agent = self._config.user_agent
        self._signer = PodSigner(self._config.pod_key)
        threads = self._config.write_threads
        # NB: one eval never takes more than 3/4 of a pool: a quarter stays for the others
        # even while its requests are slow.
        per_eval = max(1, threads - threads // 4)
        self._pool = FairPool(threads, per_key=per_eval, name="passhat-kube")
        # NB: releases run on a pool of their own, so a pass's creates never queue behind
        # the previous pass's releases, and the next pass need not wait for them.
        self._release_pool = FairPool(threads, per_key=per_eval, name="passhat-release")
        # (namespace, pod name) -> eval uid of each keep or release in flight
        self._releasing: dict[tuple[str, str], str] = {}
        # (namespace, pod name) -> when (monotonic) its keep or release ended, for a while
        self._released: dict[tuple[str, str], float] = {}
        self._released_prune_at = 1024
        self._releasing_lock = threading.Lock()
        # The size of the last response body each thread read (`_list_slim` pages by it).
        self._local = threading.local()
        # Called with an eval's uid when one of its keeps or releases is done (wakes it).
        self.on_released: Callable[[str], object] | None = None
        # The unrecorded trial pods, fed by `watch_pods` (podcache.py); `list_pods` reads
        # it once a namespace is synced, unless `pod_cache` is off.
        self.pods = PodCache()

    def close(self) -> None:
        """Stop the write pools and close connections."""
        self._pool.close()
        self._release_pool.close()
        self._client.close()  # type: ignore[no-untyped-call]

    # -- the raw call ---------------------------------------------------------------------

    def _request(
        self,
        verb: str,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        ok_statuses: tuple[int, ...] = (),
        raw: bool = False,
        accept: str | None = None,
        retry_throttled: bool = True,
    ) -> tuple[int, Any]:
        """(status, parsed JSON body, or the bytes with `raw` on success); retries
        transient failures (429 only with `retry_throttled`); raises ApiError. `accept`:
        another media type (`_WRITE_ONLY`: a success is not read)."""
        url_path = path + ("?" + urllib.parse.urlencode(query) if query else "")

        def retried(status: int) -> bool:
            # NB: 0 is a connection error
            return status == 0 or (_retryable(status) and (retry_throttled or status != 429))

        attempts = self._config.request_retries + 1
        attempt, reauthenticated = 0, False
        while attempt < attempts:
            if self._credentials is not None:
                self._credentials.install(self._client.configuration)
            try:
                status, data = self._once(
                    method, url_path, body, content_type, raw=raw, accept=accept
                )
            except (urllib3.exceptions.HTTPError, OSError) as err:
                status, data = 0, {"message": f"{type(err).__name__}: {err}"}
            if 200 <= status < 300 or status in ok_statuses:
                return status, data
            if status == 401 and not reauthenticated and self._credentials is not None:
                # NB: the token may have just expired: reload it and send again, once per
                # call and not as one of its retries (nothing ran: authentication is first)
                reauthenticated = True
                self._credentials.expire()
                continue
            if not retried(status):
                break
            metrics.observe_api_error(verb)
            if attempt + 1 < attempts:
                time.sleep(min(0.2 * 2**attempt, 3.0) * (0.5 + random.random()))
            attempt += 1
        message = data.get("message", "") if isinstance(data, dict) else str(data)[:200]
        if not retried(status):
            metrics.observe_api_error(verb)
        error = Conflict if status == 409 else ApiError
        raise error(verb, status, message)

    def _once(
        self,
        method: str,
        url_path: str,
        body: Any,
        content_type: str,
        *,
        raw: bool = False,
        accept: str | None = None,
    ) -> tuple[int, Any]:
        media = accept or ("*/*" if raw else "application/json")
        headers = {"Accept": media, "Content-Type": content_type}
        method, url, headers, serialized, _ = self._client.param_serialize(
            method=method,
            resource_path=url_path,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self._client.call_api(
            method,
            url,
            header_params=headers,
            body=serialized,
            _request_timeout=self._config.request_timeout_s,
        )
        try:
            content = response.read()  # type: ignore[no-untyped-call]
        finally:
            response.response.release_conn()
        self._local.body_bytes = len(content)
        if raw and 200 <= int(response.status) < 300:
            return int(response.status), bytes(content)
        if content.startswith(protowire.PREFIX):
            # NB: asked for with `_WRITE_ONLY`: a success is not read, an error is a Status
            if 200 <= int(response.status) < 300:
                return int(response.status), {}
            try:
                return int(response.status), protowire.decode_status(bytes(content))
            except protowire.ProtoError:
                return int(response.status), {"message": f"HTTP {response.status}"}
        try:
            data = json.loads(content) if content else {}
        except ValueError:
            data = {"message": content[:200].decode(errors="replace")}
        return int(response.status), data

    # -- EvalApi, OperatorApi ------------------------------------------------------------------

    def _eval_path(self, namespace: str, name: str) -> str:
        return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/{name}"

    def get_eval(
        self, namespace: str, name: str, *, not_older_than: str = ""
    ) -> dict[str, Any] | None:
        path = self._eval_path(namespace, name)
        if not_older_than:
            # NB: a GET with a resourceVersion is served from the watch cache once it holds
            # that version (else 504 after 3 s, or 410 if compacted): then a quorum read
            status, data = self._request(
                "get",
                "GET",
                path,
                query={"resourceVersion": not_older_than},
                ok_statuses=(404, 410, 504),
                retry_throttled=True,
            )
            if status in (200, 404):
                return None if status == 404 else dict(data)
        status, data = self._request("get", "GET", path, ok_statuses=(404,))
        return None if status == 404 else dict(data)

    def list_pods(self, namespace: str, eval_uid: str) -> list[dict[str, Any]]:
        cached = self.pods.pods(namespace, eval_uid) if self._config.pod_cache else None
        if cached is not None:
            # NB: a pod whose release ended is hidden by the cache itself (`forget`)
            with self._releasing_lock:
                busy = {name for ns, name in self._releasing if ns == namespace}
            return [pod for pod in cached if pod["metadata"].get("name") not in busy]
        # NB: a keep or release that ends while the LIST is in flight may or may not be in
        # its snapshot: such a pod is left out too, or the pass would archive and release
        # it again (seen for ~20 % of the pods of a 1,000-trial eval archiving 100 KiB
        # logs, where a keep takes ~0.5 s; each cost a store lookup and two PATCHes).
        started = time.monotonic()

        def releasing() -> set[str]:
            with self._releasing_lock:
                return {name for ns, name in self._releasing if ns == namespace} | {
                    name
                    for (ns, name), ended in self._released.items()
                    if ns == namespace and ended >= started
                }

        return self._list_slim(
            f"/api/v1/namespaces/{namespace}/pods",
            f"{LABEL_EVAL_UID}={eval_uid},{_UNRECORDED}",
            leave_out=releasing,
        )

    def list_held_pods(self, namespace: str | None) -> list[dict[str, Any]]:
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        return self._list_slim(path, f"{LABEL_EVAL_UID},{_UNRECORDED}")

    def _list_slim(
        self,
        path: str,
        selector: str,
        *,
        leave_out: Callable[[], set[str]] = set,
    ) -> list[dict[str, Any]]:
        """The pods at `path` matching `selector`, slimmed, but for the names `leave_out()`
        returns (asked again for each page)."""
        # NB: pages are one consistent snapshot (continue tokens); decoding page by page,
        # each page at most about LIST_PAGE_BYTES, and keeping only what the loop reads
        # (`slim_pod`) keeps the peak memory of a 10,000-pod eval, or of 1,000 pods with
        # 64 KiB params each, a fraction of one whole decoded list.
        pods: list[dict[str, Any]] = []
        token = ""
        limit, per_pod = LIST_FIRST_PAGE, 0
        while True:
            query = {"labelSelector": selector, "limit": str(limit)}
            if token:
                query["continue"] = token
            self._local.body_bytes = 0
            page = self._pod_page(path, query)
            if page is None:  # the snapshot expired mid-list: start over
                pods, token, limit = [], "", LIST_FIRST_PAGE
                continue
            meta, items = page
            self._local.list_rv = meta.get("resourceVersion", "")
            per_pod = max(per_pod, self._local.body_bytes // len(items) if items else 0)
            fit = LIST_PAGE_BYTES // per_pod if per_pod else LIST_PAGE_SIZE
            limit = max(1, min(LIST_PAGE_SIZE, 2 * limit, fit))
            skipped = leave_out()
            pods.extend(pod for pod in items if pod["metadata"].get("name") not in skipped)
            token = meta.get("continue", "")
            del page, items  # NB: free the decoded page before the next one is read
            if not token:
                return pods

    def _pod_page(
        self, path: str, query: Mapping[str, str]
    ) -> tuple[dict[str, str], list[dict[str, Any]]] | None:
        """(list metadata: resourceVersion, continue; the pods, slim) of one LIST page, in
        protobuf unless `pod_protobuf` is off; None on 410 (the snapshot expired). A page
        the protobuf reader cannot read (a pod a hostile client wrote) is asked for again
        as JSON, so one such pod stops nothing."""
        if self._config.pod_protobuf:
            status, content = self._request(
                "list", "GET", path, query=query, ok_statuses=(410,), raw=True, accept=_PROTOBUF
            )
            if status == 410:
                return None
            try:
                return protowire.decode_pod_list(content)
            except protowire.ProtoError as err:
                logger.warning("reading %s again as JSON: protobuf unreadable (%s)", path, err)
        status, data = self._request("list", "GET", path, query=query, ok_statuses=(410,))
        if status == 410:
            return None
        meta = data.get("metadata") or {}
        return (
            {key: str(meta[key]) for key in ("resourceVersion", "continue") if meta.get(key)},
            [slim_pod(pod) for pod in data.get("items") or []],
        )

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        if self._config.pod_protobuf:
            status, content = self._request(
                "get", "GET", path, ok_statuses=(404,), raw=True, accept=_PROTOBUF
            )
            if status == 404:
                return None
            try:
                kind, raw = protowire.unwrap(content)
                if kind != "Pod":
                    raise protowire.ProtoError(f"a {kind or 'nameless'} object, not a Pod")
                return decode_pod(raw)
            except protowire.ProtoError as err:
                logger.warning("reading %s again as JSON: protobuf unreadable (%s)", path, err)
        status, data = self._request("get", "GET", path, ok_statuses=(404,))
        return None if status == 404 else slim_pod(data)

    def get_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        status, data = self._request(
            "get",
            "GET",
            f"/api/v1/namespaces/{namespace}/configmaps/{name}",
            ok_statuses=(404,),
        )
        return None if status == 404 else dict(data)

    def get_config_map_meta(self, namespace: str, name: str) -> dict[str, Any] | None:
        status, data = self._request(
            "get",
            "GET",
            f"/api/v1/namespaces/{namespace}/configmaps/{name}",
            ok_statuses=(404,),
            accept=_METADATA_ONLY,
        )
        return None if status == 404 else dict(data.get("metadata") or {})

    def list_evals(self, namespace: str | None) -> list[dict[str, Any]]:
        """Every eval in `namespace` (None: all namespaces), whole (`passhat operator drain`)."""
        where = f"/namespaces/{namespace}" if namespace else ""
        _, data = self._request("list", "GET", f"/apis/{GROUP}/{VERSION}{where}/{PLURAL}")
        return [dict(item) for item in data.get("items") or []]

    def remove_eval_finalizer(
        self, namespace: str, body: Mapping[str, Any], finalizer: str
    ) -> bool:
        """Remove `finalizer` from the eval `body` (a JSON patch whose `test` ops check the
        eval's uid and the finalizer's index); False when it is not there (any more)."""
        name = str((body.get("metadata") or {}).get("name"))
        return self._remove_finalizer(self._eval_path(namespace, name), body, finalizer)

    def get_rbac(self, namespace: str, resource: str, name: str) -> dict[str, Any] | None:
        """The operator's own RoleBinding (`resource`: rolebindings) in a served namespace;
        None when it does not exist."""
        status, data = self._request(
            "get", "GET", self._rbac_path(namespace, resource, name), ok_statuses=(404,)
        )
        return None if status == 404 else dict(data)

    def remove_rbac_finalizer(
        self, namespace: str, resource: str, body: Mapping[str, Any], finalizer: str
    ) -> bool:
        """Remove `finalizer` from the operator's own RoleBinding `body` (guarded like
        `remove_eval_finalizer`)."""
        name = str((body.get("metadata") or {}).get("name"))
        return self._remove_finalizer(self._rbac_path(namespace, resource, name), body, finalizer)

    @staticmethod
    def _rbac_path(namespace: str, resource: str, name: str) -> str:
        return f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/{resource}/{name}"

    def _remove_finalizer(self, path: str, body: Mapping[str, Any], finalizer: str) -> bool:
        meta = body.get("metadata") or {}
        finalizers = list(meta.get("finalizers") or [])
        if finalizer not in finalizers:
            return False
        index = finalizers.index(finalizer)
        patch = [
            {"op": "test", "path": "/metadata/uid", "value": meta.get("uid")},
            {"op": "test", "path": f"/metadata/finalizers/{index}", "value": finalizer},
            {"op": "remove", "path": f"/metadata/finalizers/{index}"},
        ]
        status, _ = self._request(
            "patch",
            "PATCH",
            path,
            body=patch,
            content_type="application/json-patch+json",
            ok_statuses=(404, 422),
        )
        return status not in (404, 422)

    # -- leases (leader.LeaseApi) ---------------------------------------------------------

    def _lease_path(self, namespace: str, name: str = "") -> str:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        return f"{path}/{name}" if name else path

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        status, data = self._request(
            "get", "GET", self._lease_path(namespace, name), ok_statuses=(404,)
        )
        return None if status == 404 else dict(data)

    def create_lease(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        _, data = self._request("create", "POST", self._lease_path(namespace), body=dict(body))
        return dict(data)

    def update_lease(self, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        _, data = self._request("update", "PUT", self._lease_path(namespace, name), body=dict(body))
        return dict(data)

    def patch_eval_status(
        self, namespace: str, name: str, resource_version: str, status: Mapping[str, Any]
    ) -> dict[str, Any]:
        body = {"metadata": {"resourceVersion": resource_version}, "status": dict(status)}
        _, data = self._request(
            "patch",
            "PATCH",
            self._eval_path(namespace, name) + "/status",
            body=body,
            content_type="application/merge-patch+json",
        )
        return dict(data)

    def settle(
        self,
        namespace: str,
        *,
        keep: Sequence[Mapping[str, Any]],
        release: Sequence[Mapping[str, Any]],
        create: Sequence[Mapping[str, Any]],
        before: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> list[str]:
        for pod, owner in self._ours(namespace, keep):
            self._release_later(namespace, pod, owner, self._keep_pod, before)
        for pod, owner in self._ours(namespace, release):
            if let_go_already(pod):
                continue  # NB: nothing to send, and no wake-up for nothing (a pass per 0.1 s)
            self._release_later(namespace, pod, owner, self._release_pod, before)
        stop = threading.Event()

        def create_one(pod: Mapping[str, Any]) -> str | None:
            if stop.is_set():
                return None  # NB: an earlier create of the batch failed: not sent
            try:
                return self._create_pod(namespace, pod)
            except BaseException:
                stop.set()
                raise

        taken = self._parallel(
            _eval_key(namespace, create), [functools.partial(create_one, pod) for pod in create]
        )
        return [name for name in taken if name is not None]

    def release_pods(self, namespace: str, pods: Sequence[Mapping[str, Any]]) -> None:
        self._parallel(
            _eval_key(namespace, pods),
            [
                functools.partial(self._release_pod, namespace, pod)
                for pod, _ in self._ours(namespace, pods)
            ],
        )

    def releasing(self, namespace: str, eval_uid: str) -> int:
        with self._releasing_lock:
            return sum(
                1 for (ns, _), uid in self._releasing.items() if ns == namespace and uid == eval_uid
            )

    def read_pod_log(
        self,
        namespace: str,
        name: str,
        container: str,
        limit_bytes: int,
        tail_lines: int | None = None,
    ) -> bytes:
        from passhat.operator.archive import LogUnavailable

        try:
            _, data = self._request(
                "log",
                "GET",
                f"/api/v1/namespaces/{namespace}/pods/{name}/log",
                query={
                    "container": container,
                    "limitBytes": str(max(1, limit_bytes)),
                    **({"tailLines": str(tail_lines)} if tail_lines is not None else {}),
                },
                ok_statuses=(400, 404),
                raw=True,
            )
        except ApiError as err:
            # NB: 5xx after the retries: the API server could not reach the pod's kubelet.
            raise LogUnavailable(f"pod {name} container {container}: {err}") from None
        # NB: 400: the container never started (no log); 404: the pod is gone.
        return data if isinstance(data, bytes) else b""

    def watch_pods(
        self, namespace: str, on_event: Callable[[str, Mapping[str, Any]], None]
    ) -> None:
        """Stream the namespace's unrecorded trial pod events to `on_event(type, pod)` until
        the server ends the watch (a few minutes) or the connection fails (raises).

        As an informer does, it first LISTs those pods into `self.pods` and watches from
        that LIST's resourceVersion, applying each event to the cache before `on_event`
        (a pass woken by an event sees it); a failed watch unsyncs the namespace's cache
        (passes LIST straight from the API server until the next call has listed again).
        A watch the server ended (its timeout) is resumed by the next call from the
        version the cache is current to (the last event's), without a LIST, as client-go's
        reflector resumes; a 410 (that version is too old) fails it, and the call after
        LISTs.
        """
        from kubernetes.watch.watch import iter_resp_lines

        selector = f"{LABEL_EVAL_UID},{_UNRECORDED}"
        path = f"/api/v1/namespaces/{namespace}/pods"
        query = {"labelSelector": selector, "watch": "true", "timeoutSeconds": "240"}
        try:
            if self._config.pod_cache:
                # NB: a cache still synced is current to its version: a watch the server
                # ended goes on from there (a failed one unsynced it: LIST first)
                if not self.pods.version(namespace):
                    self._local.list_rv = ""
                    pods = self._list_slim(path, selector)
                    self.pods.replace(namespace, pods, self._local.list_rv)
                    del pods  # NB: the cache holds them now; not this list for the watch
                since = self.pods.version(namespace)
                if since:
                    query["resourceVersion"] = since
            protobuf = self._config.pod_protobuf
            method, url, headers, _, _ = self._client.param_serialize(
                method="GET",
                resource_path=f"{path}?{urllib.parse.urlencode(query)}",
                header_params={"Accept": _PROTOBUF_WATCH if protobuf else "application/json"},
                auth_settings=["BearerToken"],
            )
            response = self._client.call_api(
                method, url, header_params=headers, _request_timeout=300
            )
            try:
                if response.status != 200:
                    if response.status == 401 and self._credentials is not None:
                        self._credentials.expire()  # NB: the next watch reloads the token
                    raise ApiError("watch", int(response.status), "watch refused")
                if protobuf:
                    body = response.response
                    for kind, pod in protowire.watch_events(body.read1):
                        self._pod_event(namespace, {"type": kind, "object": pod}, on_event)
                else:
                    for line in iter_resp_lines(response.response):  # type: ignore[no-untyped-call]
                        if line:
                            event = json.loads(line)
                            if isinstance(event.get("object"), dict) and event["type"] != "ERROR":
                                event["object"] = slim_pod(event["object"])
                            self._pod_event(namespace, event, on_event)
            finally:
                response.response.release_conn()
        except BaseException as err:
            if isinstance(err, protowire.ProtoError):
                # NB: a pod event the reader cannot read (a pod a hostile client wrote):
                # passes LIST (in JSON where protobuf fails) until the reopened watch has
                # listed again
                logger.warning(
                    "pod watch in %s: protobuf unreadable (%s); reopening", namespace, err
                )
            self.pods.unsync(namespace)
            raise

    def _pod_event(
        self,
        namespace: str,
        event: Mapping[str, Any],
        on_event: Callable[[str, Mapping[str, Any]], None],
    ) -> None:
        """Apply one watch event to the cache, then hand it on; an ERROR event (410: the
        resourceVersion is too old) ends the watch, so that the next one LISTs again."""
        kind, obj = str(event.get("type")), event.get("object") or {}
        if kind == "ERROR":
            code = obj.get("code") if isinstance(obj, Mapping) else None
            raise ApiError("watch", int(code or 0), str(obj.get("message") or obj))
        if kind in ("ADDED", "MODIFIED", "DELETED") and self._config.pod_cache:
            self.pods.apply(namespace, kind, obj)
        on_event(kind, obj)

    # -- helpers ----------------------------------------------------------------------------

    def _ours(
        self, namespace: str, pods: Sequence[Mapping[str, Any]]
    ) -> list[tuple[Mapping[str, Any], str]]:
        """The pods the operator made, with a uid (the preconditions need it), each with
        the uid of the eval that made it (signed); the others are logged and left alone."""
        mine: list[tuple[Mapping[str, Any], str]] = []
        for pod in pods:
            meta = pod.get("metadata") or {}
            owner = self._signer.owner_uid(pod) if meta.get("uid") else None
            if owner is not None:
                mine.append((pod, owner))
            else:
                logger.warning(
                    "not touching pod %s/%s: the operator did not create it",
                    namespace,
                    meta.get("name"),
                )
        return mine

    def _release_later(
        self,
        namespace: str,
        pod: Mapping[str, Any],
        owner: str,
        release: Callable[[str, Mapping[str, Any]], None],
        before: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> None:
        """Run `before(pod)`, then `release(namespace, pod)`, on the release pool;
        `list_pods` hides the pod until it is done. A failure is logged: the next pass
        lists the pod again. `owner`: the uid of the eval that made the pod (signed, from
        `_ours`), not its label, which a user may change."""
        meta = pod.get("metadata") or {}
        key = (namespace, str(meta.get("name")))
        with self._releasing_lock:
            if key in self._releasing:
                return
            self._releasing[key] = owner

        def run() -> None:
            done = False
            try:
                if before is not None:
                    before(pod)
                release(namespace, pod)
                self.pods.forget(namespace, key[1], str(meta.get("uid")))
                done = True
            except Exception as err:  # NB: the pod is listed again and released again
                logger.warning("could not release pod %s/%s: %s", *key, err)
            finally:
                with self._releasing_lock:
                    self._releasing.pop(key, None)
                    self._note_released(key)
                # NB: a failed release wakes no pass: the eval's next pass (its resync at
                # the latest) tries again, where a wake-up would retry every 0.1 s (an
                # admission policy refusing the patch for good: a finished eval's daemon
                # spun, Complete waiting for the release)
                if done and self.on_released is not None and owner:
                    self.on_released(owner)

        try:
            self._release_pool.submit(_eval_key(namespace, [pod]), run)
        except RuntimeError:  # NB: the pool is shut down (closing): the next process will
            with self._releasing_lock:
                self._releasing.pop(key, None)

    def _note_released(self, key: tuple[str, str]) -> None:
        """Remember when `key`'s keep or release ended (call with the lock held); entries
        older than any LIST could still be in flight are dropped as the map grows."""
        now = time.monotonic()
        self._released[key] = now
        if len(self._released) > self._released_prune_at:
            horizon = now - _RELEASED_HORIZON_S
            self._released = {k: t for k, t in self._released.items() if t >= horizon}
            # NB: amortized: the next prune waits until the map has doubled
            self._released_prune_at = max(1024, 2 * len(self._released))

    def _parallel(self, key: str, calls: Sequence[Callable[[], T]]) -> list[T]:
        """Run calls on the write pool as eval `key`'s; their results, or the first
        failure re-raised after all finished."""
        if len(calls) <= 1:
            return [call() for call in calls]
        futures: list[Future[T]] = [self._pool.submit(key, call) for call in calls]
        errors = [err for future in futures if (err := future.exception()) is not None]
        if errors:
            raise errors[0]
        return [future.result() for future in futures]

    def _create_pod(self, namespace: str, pod: Mapping[str, Any]) -> str | None:
        """Create `pod`; its name when the name is taken (409), else None."""
        status, _ = self._request(
            "create",
            "POST",
            f"/api/v1/namespaces/{namespace}/pods",
            body=dict(pod),
            ok_statuses=(409,),
            accept=_WRITE_ONLY,
            # NB: throttled: the eval backs off (pacing.py), no retries here
            retry_throttled=False,
        )
        return str((pod.get("metadata") or {}).get("name")) if status == 409 else None

    def _keep_pod(self, namespace: str, pod: Mapping[str, Any]) -> None:
        """Remove our finalizer and add the recorded label in one patch; the pod stays.
        A grader pod's transcript annotation is emptied in the same patch: its verdict is
        in status, and kept it held up to 192 KiB of etcd per grader pod, readable with
        `get pods`, until the eval was deleted (docs/security.md)."""
        labels = (pod.get("metadata") or {}).get("labels") or {}
        grader = isinstance(labels, Mapping) and LABEL_GRADING in labels
        self._patch_out_finalizer(
            namespace,
            pod,
            labels={LABEL_RECORDED: "true"},
            annotations={ANNOTATION_TRANSCRIPT: ""} if grader else None,
        )

    def _release_pod(self, namespace: str, pod: Mapping[str, Any]) -> None:
        """Remove exactly our finalizer (the patch guarded by the uid), then delete with
        the uid as a precondition (409: a pod of that name replaced it)."""
        meta = pod.get("metadata") or {}
        if not self._patch_out_finalizer(namespace, pod):
            return
        if meta.get("deletionTimestamp") is None:
            self._request(
                "delete",
                "DELETE",
                f"/api/v1/namespaces/{namespace}/pods/{meta.get('name')}",
                body={
                    "kind": "DeleteOptions",
                    "apiVersion": "v1",
                    "preconditions": {"uid": meta.get("uid")},
                },
                ok_statuses=(404, 409),
                accept=_WRITE_ONLY,
            )

    def _patch_out_finalizer(
        self,
        namespace: str,
        pod: Mapping[str, Any],
        *,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> bool:
        """One strategic merge patch, as the Job controller takes its tracking finalizer
        out: `$deleteFromPrimitiveList/finalizers` removes exactly our finalizer wherever
        it is (nothing when it is gone), with `labels` and `annotations` set in the same
        write. The pod's uid in the patch is its guard, as in the garbage collector's
        owner-reference patches: a pod of the same name but another uid refuses it (422,
        `metadata.uid` is immutable). A pod the caller saw without our finalizer and with
        nothing to set is not written. False when the pod is gone or was replaced.

        (A JSON patch with `test` ops did the same until #22: the API server turns the
        stored pod into JSON and back for it, ~1 ms more CPU per trial than this patch.)"""
        meta = pod.get("metadata") or {}
        if FINALIZER not in (meta.get("finalizers") or []) and not labels and not annotations:
            return True
        patch: dict[str, Any] = {
            "uid": meta.get("uid"),
            "$deleteFromPrimitiveList/finalizers": [FINALIZER],
        }
        if labels:
            patch["labels"] = dict(labels)
        if annotations:
            patch["annotations"] = dict(annotations)
        status, _ = self._request(
            "patch",
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{meta.get('name')}",
            body={"metadata": patch},
            content_type="application/strategic-merge-patch+json",
            ok_statuses=(404, 422),
            accept=_WRITE_ONLY,
        )
        return status not in (404, 422)
