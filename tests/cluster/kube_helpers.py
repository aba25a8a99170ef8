"""Typed bridges between the cluster tests' plain dicts and the kubernetes client.

The tests write objects as plain dicts and read them back as the JSON the API server
returned, with no client model in between. The client (typed inline since release 37)
declares model bodies (`V1Pod`, `V1Node`, ...) and types a `_preload_content=False` call
as the model although it returns the raw urllib3 response. These helpers say each of
those things once, so the tests stay type-checked without an ignore at every call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

import urllib3
import yaml
from kubernetes import client

M = TypeVar("M")


def as_body(manifest: Mapping[str, Any], model: type[M]) -> M:
    """`manifest` as the body of a client method that declares `model`: every client
    release accepts a plain dict there (older ones send it as is, typed ones validate it)."""
    return cast(M, manifest)


def raw_json(response: object) -> Any:
    """The decoded JSON of a `_preload_content=False` call's response (a urllib3 one)."""
    return json.loads(cast(urllib3.HTTPResponse, response).data)


def create_pod(
    core: client.CoreV1Api,
    namespace: str,
    manifest: Mapping[str, Any],
    *,
    dry_run: str | None = None,
) -> None:
    """Create the pod `manifest` (a plain dict) in `namespace`."""
    core.create_namespaced_pod(namespace, as_body(manifest, client.V1Pod), dry_run=dry_run)


def grant(
    kubectl: Callable[..., str],
    namespace: str,
    user: str,
    *,
    name: str,
    rules: Sequence[Mapping[str, Any]],
) -> None:
    """A Role `name` of `rules` in `namespace`, bound to `user` (impersonated in tests)."""
    objects = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": [dict(rule) for rule in rules],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    ]
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))
