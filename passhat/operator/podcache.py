"""The unrecorded trial pods of each served namespace, kept current by the pod watch.

A pass used to LIST its eval's unrecorded pods from the API server, in pages, as JSON:
at 1,000 trials and parallelism 100 that was a few LIST requests every 0.3-0.5 s, each
one encoded by the API server (the Job controller reads an informer's cache instead,
fed by one watch). The pod watch (`podwatch.py`) already streams every change to these
pods, so this cache is what an informer is: per namespace, one paged LIST of the pods
the watch selects (`passhat.dev/eval-uid`, not `passhat.dev/recorded`), then the watch's
events from that LIST's resourceVersion; a LIST again whenever the watch is reopened (its
timeout, an error, a 410), and until that LIST is in the namespace is not `synced` and
passes LIST straight from the API server as before.

A cache may lag the API server; the loop is written so that a lagging list only delays
(docs/operator.md, *Why it is exact*): it never decides an outcome, a taken name or a
missing pod from the list alone. What the cache adds for that:

- `forget(namespace, name, uid)` after the operator released a pod (finalizer out): the pod is
  hidden from then on, also when an older event or a LIST that started before the release
  shows it again, until its DELETED event (it left the selector: labelled recorded, or
  deleted) or a LIST without it. After its release the operator has nothing left to do
  with a pod.
- Events are applied before they wake a pass, so a pass woken by an event sees it.
- `version(namespace)`: the resourceVersion the cache is current to (its LIST's, then
  the last event's), from which a watch the API server ended goes on without a LIST;
  "" once a failed watch unsynced it.

Pods are stored slimmed (`slimpod.py`), as the LIST kept them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from passhat.operator.pods import LABEL_EVAL_UID

__all__ = ["PodCache"]


class PodCache:
    """Slim unrecorded trial pods by namespace and name, fed by LISTs and watch events."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # namespace -> pod name -> slim pod (replaced whole, never changed in place)
        self._pods: dict[str, dict[str, dict[str, Any]]] = {}
        # namespaces whose cache holds a LIST and every watch event since
        self._synced: set[str] = set()
        # namespace -> the resourceVersion its cache is current to (its LIST's, then the
        # last event's): where a watch the server ended goes on from
        self._versions: dict[str, str] = {}
        # namespace -> uids of pods the operator released: hidden until DELETED
        self._released: dict[str, set[str]] = {}

    def replace(self, namespace: str, pods: Iterable[dict[str, Any]], version: str = "") -> None:
        """The namespace's pods as one LIST returned them (slim), at its resourceVersion
        `version`; synced from now on."""
        fresh = {_name(pod): pod for pod in pods}
        with self._lock:
            self._versions[namespace] = version
            released = self._released.get(namespace, set())
            # NB: a released pod this LIST no longer shows has left the selector for good
            self._released[namespace] = released & {_uid(pod) for pod in fresh.values()}
            self._pods[namespace] = {
                name: pod for name, pod in fresh.items() if _uid(pod) not in released
            }
            self._synced.add(namespace)

    def apply(self, namespace: str, kind: str, pod: dict[str, Any]) -> None:
        """One watch event (ADDED, MODIFIED, DELETED) of a slim pod."""
        name, uid = _name(pod), _uid(pod)
        version = str((pod.get("metadata") or {}).get("resourceVersion") or "")
        with self._lock:
            if version:
                self._versions[namespace] = version
            pods = self._pods.setdefault(namespace, {})
            released = self._released.setdefault(namespace, set())
            if kind == "DELETED":
                released.discard(uid)
                if _uid(pods.get(name) or {}) == uid:
                    del pods[name]
            elif kind in ("ADDED", "MODIFIED") and uid not in released:
                pods[name] = pod

    def version(self, namespace: str) -> str:
        """The resourceVersion a synced namespace's cache is current to; "" when it is not
        synced (or its LIST had none): the next watch has to LIST first."""
        with self._lock:
            return self._versions.get(namespace, "") if namespace in self._synced else ""

    def unsync(self, namespace: str) -> None:
        """The watch failed: passes LIST from the API server until the next `replace`."""
        with self._lock:
            self._synced.discard(namespace)
            self._versions.pop(namespace, None)

    def forget(self, namespace: str, name: str, uid: str) -> None:
        """The operator released pod `name` of `uid`: hide it (see the module docstring).
        A newer pod of that name stays."""
        with self._lock:
            self._released.setdefault(namespace, set()).add(uid)
            pods = self._pods.get(namespace) or {}
            # NB: by name, not a scan by uid: that held the lock for a walk of every cached
            # pod per release (2,000-4,000 of them at 100,000 trials, #22)
            if _uid(pods.get(name) or {}) == uid:
                del pods[name]

    def pods(self, namespace: str, eval_uid: str) -> list[dict[str, Any]] | None:
        """The eval's cached pods; None while the namespace is not synced."""
        with self._lock:
            if namespace not in self._synced:
                return None
            return [
                pod
                for pod in (self._pods.get(namespace) or {}).values()
                if _labels(pod).get(LABEL_EVAL_UID) == eval_uid
            ]


def _labels(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return (pod.get("metadata") or {}).get("labels") or {}


def _name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name"))


def _uid(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid"))
