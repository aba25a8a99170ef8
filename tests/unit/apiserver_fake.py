"""An in-memory API server behind `Kube`'s HTTP layer, for tests of the real `Kube`.

`FakeServerKube` is the real `passhat.operator.kube.Kube` (its pools, retries, error
mapping, slow-start stops) with only `_once`, the one HTTP round trip, answered by a
`FakeServer`: evals (GET, status PATCH with the resourceVersion precondition), pods
(LIST by eval uid without the recorded label, POST with 409 on a taken name, the strategic
merge patch that releases a finalizer and labels a pod recorded, DELETE) and a ResourceQuota
of non-terminal pods per namespace (403 "exceeded quota", as the API server answers).
Each request takes `latency_s` (the API server's round trip) and is counted by
(method, namespace) and by POST outcome. A kubelet ends pods `duration_s` after their
creation when `step()` is called. Pod reads are answered in protobuf when asked so
(`protobuf_pods.py`).
"""

from __future__ import annotations

import copy
import itertools
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Mapping
from typing import Any

from kubernetes import client

from passhat.operator import protowire
from passhat.operator.config import OperatorConfig
from passhat.operator.kube import Kube
from passhat.operator.pods import LABEL_EVAL_UID, LABEL_RECORDED
from tests.unit.operator_fake import merge_patch, terminated
from tests.unit.protobuf_pods import as_protobuf

_EVAL = "/apis/passhat.dev/v1alpha1/namespaces/"


class FakeServer:
    """Evals and pods of several namespaces, thread-safe, with per-namespace pod quotas."""

    def __init__(self, *, latency_s: float = 0.002, quota: Mapping[str, int] | None = None) -> None:
        self.latency_s = latency_s
        self.quota = dict(quota or {})
        self.lock = threading.Lock()
        self.evals: dict[tuple[str, str], dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: Counter[tuple[str, str]] = Counter()
        # (namespace, "created" | "refused" | "taken") -> POSTs of pods, and when
        self.posts: Counter[tuple[str, str]] = Counter()
        self.post_times: dict[str, list[float]] = {}
        self._rv = itertools.count(1)
        self._uid = itertools.count(1)

    def add_eval(self, namespace: str, name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Store a new eval; returns it."""
        body = {
            "apiVersion": "passhat.dev/v1alpha1",
            "kind": "ConsistencyEval",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}-{next(self._uid)}",
                "generation": 1,
                "resourceVersion": str(next(self._rv)),
            },
            "spec": copy.deepcopy(dict(spec)),
        }
        with self.lock:
            self.evals[(namespace, name)] = body
        return copy.deepcopy(body)

    def status(self, namespace: str, name: str) -> dict[str, Any]:
        """The eval's stored status."""
        with self.lock:
            return copy.deepcopy(self.evals[(namespace, name)].get("status") or {})

    def step(self, *, duration_s: float) -> None:
        """The kubelet: pods created `duration_s` ago or more end with exit code 0."""
        now = time.monotonic()
        with self.lock:
            for pod in self.pods.values():
                status = pod["status"]
                if status["phase"] == "Pending" and now - pod["created_at"] >= duration_s:
                    status["phase"] = "Succeeded"
                    status["containerStatuses"] = [
                        terminated(0, reason="Completed", now=time.time(), start=time.time())
                    ]
                    pod["metadata"]["resourceVersion"] = str(next(self._rv))

    def handle(self, method: str, url_path: str, body: Any) -> tuple[int, Any]:
        """Answer one request (after `latency_s`)."""
        time.sleep(self.latency_s)
        path, _, query_text = url_path.partition("?")
        query = dict(urllib.parse.parse_qsl(query_text))
        parts = path.strip("/").split("/")
        namespace = parts[parts.index("namespaces") + 1] if "namespaces" in parts else ""
        with self.lock:
            self.requests[(method, namespace)] += 1
            if path.startswith(_EVAL):
                return self._eval(method, namespace, parts, body)
            return self._pod(method, namespace, parts, query, body)

    def _eval(self, method: str, namespace: str, parts: list[str], body: Any) -> tuple[int, Any]:
        stored = self.evals.get((namespace, parts[6]))
        if stored is None:
            return 404, {"message": "not found"}
        if method == "GET":
            return 200, copy.deepcopy(stored)
        assert method == "PATCH" and parts[-1] == "status"
        if body["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]:
            return 409, {"message": "the object has been modified"}
        merge_patch(stored.setdefault("status", {}), body["status"])
        stored["metadata"]["resourceVersion"] = str(next(self._rv))
        return 200, copy.deepcopy(stored)

    def _pod(
        self, method: str, namespace: str, parts: list[str], query: dict[str, str], body: Any
    ) -> tuple[int, Any]:
        if method == "GET" and parts[-1] == "pods":
            uid = query["labelSelector"].split(",")[0].partition("=")[2]
            items = [
                copy.deepcopy({k: v for k, v in pod.items() if k != "created_at"})
                for (ns, _), pod in self.pods.items()
                if ns == namespace
                and pod["metadata"]["labels"].get(LABEL_EVAL_UID) == uid
                and LABEL_RECORDED not in pod["metadata"]["labels"]
            ]
            return 200, {"items": items, "metadata": {}}
        if method == "POST":
            return self._create(namespace, body)
        key = (namespace, parts[-1])
        pod = self.pods.get(key)
        if pod is None:
            return 404, {"message": "not found"}
        meta = pod["metadata"]
        if method == "PATCH":
            # NB: the strategic merge patch of `Kube._patch_out_finalizer`
            patch = body["metadata"]
            if patch.get("uid") not in (None, meta.get("uid")):
                return 422, {"message": "metadata.uid: field is immutable"}
            gone = set(patch.get("$deleteFromPrimitiveList/finalizers") or [])
            meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f not in gone]
            meta["labels"].update(patch.get("labels") or {})
            meta.setdefault("annotations", {}).update(patch.get("annotations") or {})
        elif method == "DELETE":
            meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            del self.pods[key]
        return 200, {}

    def _create(self, namespace: str, body: Any) -> tuple[int, Any]:
        name = body["metadata"]["name"]
        self.post_times.setdefault(namespace, []).append(time.monotonic())
        if (namespace, name) in self.pods:
            self.posts[(namespace, "taken")] += 1
            return 409, {"reason": "AlreadyExists"}
        limit = self.quota.get(namespace)
        used = sum(
            1
            for (ns, _), pod in self.pods.items()
            if ns == namespace and pod["status"]["phase"] in ("Pending", "Running")
        )
        if limit is not None and used >= limit:
            self.posts[(namespace, "refused")] += 1
            return 403, {
                "message": f'pods "{name}" is forbidden: exceeded quota: pods-{limit}, '
                f"requested: pods=1, used: pods={used}, limited: pods={limit}"
            }
        self.posts[(namespace, "created")] += 1
        stored = copy.deepcopy(dict(body))
        stored["metadata"].update(
            uid=f"pod-{next(self._uid)}",
            resourceVersion=str(next(self._rv)),
            creationTimestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        stored["status"] = {"phase": "Pending"}
        stored["created_at"] = time.monotonic()
        self.pods[(namespace, name)] = stored
        return 201, {}


class FakeServerKube(Kube):
    """The real `Kube`, its HTTP round trip answered by `server`."""

    def __init__(self, server: FakeServer, config: OperatorConfig | None = None) -> None:
        super().__init__(client.Configuration(), config)
        self.server = server

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
        status, data = self.server.handle(method, url_path, body)
        if raw and accept == protowire.MEDIA_TYPE and 200 <= status < 300:
            return status, as_protobuf(data)  # NB: pod reads, in protobuf as the real one
        return status, data
