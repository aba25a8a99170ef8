"""Leases in memory with the API server's create / update semantics, and a settable clock:
the election's tests (`test_operator_leader.py`, `test_operator_claims_forged.py`)."""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any

from passhat.operator.kube import ApiError, Conflict

__all__ = ["Clock", "Leases"]


class Leases:
    """Leases in memory with the API server's create / update semantics (409s)."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        self.rv = 0
        self.down = False
        self.lock = threading.Lock()
        # Called between a GET and the next write (a concurrent writer).
        self.between: Any = None

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._check()
        with self.lock:
            item = self.items.get((namespace, name))
            return copy.deepcopy(item) if item is not None else None

    def create_lease(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self._check()
        self._between()
        with self.lock:
            key = (namespace, body["metadata"]["name"])
            if key in self.items:
                raise Conflict("create", 409, "already exists")
            return self._store(key, body)

    def update_lease(self, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self._check()
        self._between()
        with self.lock:
            key = (namespace, name)
            stored = self.items.get(key)
            if stored is None:
                raise ApiError("update", 404, "not found")
            if body["metadata"].get("resourceVersion") != stored["metadata"]["resourceVersion"]:
                raise Conflict("update", 409, "the object has been modified")
            return self._store(key, body)

    def _store(self, key: tuple[str, str], body: Mapping[str, Any]) -> dict[str, Any]:
        self.rv += 1
        item = copy.deepcopy(dict(body))
        item["metadata"] = {**item["metadata"], "resourceVersion": str(self.rv)}
        self.items[key] = item
        return copy.deepcopy(item)

    def _between(self) -> None:
        hook, self.between = self.between, None
        if hook is not None:
            hook()

    def _check(self) -> None:
        if self.down:
            raise ApiError("get", 0, "connection refused")

    # NB: the RoleBinding calls of `main.ElectionApi`; these tests bind no rights
    def get_rbac(self, namespace: str, resource: str, name: str) -> dict[str, Any] | None:
        return None

    def remove_rbac_finalizer(
        self, namespace: str, resource: str, body: Mapping[str, Any], finalizer: str
    ) -> bool:
        return False

    def list_evals(self, namespace: str | None) -> list[dict[str, Any]]:
        return []

    def list_held_pods(self, namespace: str | None) -> list[dict[str, Any]]:
        return []


class Clock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now
