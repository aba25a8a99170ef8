#!/usr/bin/env python3
"""Capture pods as the API server encodes them in JSON *and* in protobuf.

The operator reads its pods in protobuf (passhat/operator/slimpod.py) and in JSON
(`--set pod_protobuf=false`, other clients), and both readers must give the same slim pod.
This script stores what a real API server sends for the same object both ways, so the
unit tests can hold the readers to each other (tests/unit/test_slimpod.py):

- each pod of tests/fixtures/pods/*.json (captured by capture-fixtures.py) is created
  again in a scratch namespace with that fixture's metadata, spec and status (the status
  written through the status subresource; the pod bound to a node that does not exist, so
  no kubelet or kwok changes it; a deleted fixture deleted again, its finalizer holding it),
  then read with GET as protobuf, as JSON and as protobuf again (the two must be equal:
  nothing changed the pod in between);
- one LIST of them all and one watch from resourceVersion 0 (an ADDED event each, the
  stream ended by its timeoutSeconds), both in protobuf, as the bytes on the wire.

Written to tests/fixtures/wire/pods.json (protobuf as base64).

    hack/cluster/up.sh && python3 hack/cluster/capture-wire.py
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

from kubernetes import config

REPO = Path(__file__).resolve().parents[2]
PODS = REPO / "tests" / "fixtures" / "pods"
OUT = REPO / "tests" / "fixtures" / "wire" / "pods.json"
NAMESPACE = "passhat-wire"
NOWHERE = "passhat-wire-no-such-node"
PROTOBUF = "application/vnd.kubernetes.protobuf"


class Api:
    """GET/POST/PUT/PATCH/DELETE with a chosen Accept header, the body as bytes."""

    def __init__(self, kubeconfig: str) -> None:
        self.client = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        accept: str = "application/json",
        content_type: str = "application/json",
        ok: tuple[int, ...] = (),
    ) -> bytes:
        method, url, headers, serialized, _ = self.client.param_serialize(
            method=method,
            resource_path=path,
            header_params={"Accept": accept, "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.client.call_api(
            method, url, header_params=headers, body=serialized, _request_timeout=60
        )
        try:
            content = bytes(response.read())
        finally:
            response.response.release_conn()
        status = int(response.status)
        if not 200 <= status < 300 and status not in ok:
            raise RuntimeError(f"{method} {path}: HTTP {status}: {content[:300]!r}")
        return content

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        content = self.call(method, path, **kwargs)
        return json.loads(content) if content else None


def manifest(name: str, fixture: dict[str, Any], owner_uid: str) -> dict[str, Any]:
    """The fixture's pod to create again: its labels, annotations, finalizers and spec,
    bound to no real node, owned by the scratch namespace (so the GC keeps it)."""
    meta = fixture["metadata"]
    spec = dict(fixture["spec"])
    if spec.get("nodeName"):
        spec["nodeName"] = NOWHERE
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": meta.get("labels") or {},
            "annotations": meta.get("annotations") or {},
            "finalizers": meta.get("finalizers") or [],
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "name": NAMESPACE,
                    "uid": owner_uid,
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "spec": spec,
    }


def pod_name(fixture: str) -> str:
    """The scratch pod of fixture file `fixture` (kwok_exit0.json -> kwok-exit0)."""
    return fixture.removesuffix(".json").replace("_", "-")


def wait_for_service_account(api: Api) -> None:
    path = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default"
    for _ in range(120):
        if api.call("GET", path, ok=(404,)).find(b'"kind":"ServiceAccount"') >= 0:
            return
        time.sleep(0.5)
    raise RuntimeError("no default service account in the scratch namespace")


def release_all(api: Api) -> None:
    """Take every scratch pod's finalizers out and delete the namespace."""
    pods = api.json("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", ok=(404,)) or {}
    for pod in pods.get("items") or []:
        api.call(
            "PATCH",
            f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}",
            body={"metadata": {"finalizers": None}},
            content_type="application/merge-patch+json",
            ok=(404,),
        )
    api.call("DELETE", f"/api/v1/namespaces/{NAMESPACE}", ok=(404,))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", default=str(REPO / ".cluster" / "kubeconfig"))
    args = parser.parse_args(argv)
    api = Api(args.kubeconfig)
    for _ in range(120):  # NB: a namespace of an earlier run may still be terminating
        if api.json("GET", f"/api/v1/namespaces/{NAMESPACE}", ok=(404,)).get("kind") == "Status":
            break
        release_all(api)
        time.sleep(1)
    namespace = api.json(
        "POST",
        "/api/v1/namespaces",
        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
    )
    try:
        wait_for_service_account(api)
        pods: dict[str, dict[str, Any]] = {}
        base = f"/api/v1/namespaces/{NAMESPACE}/pods"
        for path in sorted(PODS.glob("*.json")):
            fixture = json.loads(path.read_text())
            name = pod_name(path.name)
            created = api.json(
                "POST", base, body=manifest(name, fixture, namespace["metadata"]["uid"])
            )
            created["status"] = fixture.get("status") or {}
            api.json("PUT", f"{base}/{name}/status", body=created)
            if fixture["metadata"].get("deletionTimestamp"):
                grace = fixture["metadata"].get("deletionGracePeriodSeconds", 30)
                api.call("DELETE", f"{base}/{name}", body={"gracePeriodSeconds": grace})
            before = api.call("GET", f"{base}/{name}", accept=PROTOBUF)
            as_json = api.json("GET", f"{base}/{name}")
            after = api.call("GET", f"{base}/{name}", accept=PROTOBUF)
            if before != after:
                raise RuntimeError(f"pod {name} changed while it was read")
            pods[path.name] = {"json": as_json, "protobuf": base64.b64encode(after).decode()}
        listed = api.call("GET", base, accept=PROTOBUF)
        query = urllib.parse.urlencode(
            {"watch": "true", "resourceVersion": "0", "timeoutSeconds": "2"}
        )
        watched = api.call("GET", f"{base}?{query}", accept=f"{PROTOBUF};stream=watch")
        for name, captured in pods.items():
            content = api.call("GET", f"{base}/{pod_name(name)}", accept=PROTOBUF)
            if base64.b64encode(content).decode() != captured["protobuf"]:
                raise RuntimeError(f"pod {name} changed during the LIST and the watch")
    finally:
        release_all(api)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {
                "_comment": "hack/cluster/capture-wire.py: pods as one API server sent them, "
                "as JSON and as protobuf (base64); a LIST and a watch of them in protobuf",
                "pods": pods,
                "list": base64.b64encode(listed).decode(),
                "watch": base64.b64encode(watched).decode(),
            },
            indent=1,
            sort_keys=True,
        )
        + "\n"
    )
    print(f"wrote {len(pods)} pods, a LIST and a watch to {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
