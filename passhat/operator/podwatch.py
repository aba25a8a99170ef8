"""Wake-ups from pod changes: one raw watch stream per namespace that has evals.

The reconcile loop only needs to know *that* some pod of an eval changed; the pass then
reads everything itself. A kopf `on.event` handler on pods did that job first, but kopf
runs its whole per-object machinery for each event (a worker, cause detection, a deep
copy of the body for its diff base, a log line) and a trial pod produces about seven
events: on a 1,000-trial benchmark that was a large share of the operator's CPU. Here a
thread per namespace streams pod events with a server-side label selector and reads
nothing but the eval-uid label. A missed event costs nothing but latency (the daemon
also runs a pass every resync interval), so the stream is simply reopened after errors.

Only events that can matter to a pass wake it. Recorded pods (kept after they finished,
labelled `passhat.dev/recorded`) are left out by the server-side selector, and DELETED
events are ignored: a pod holding our finalizer cannot be deleted, so a DELETED event is
either a pod we already let go or one that just left the selector by being labelled
recorded -- in both cases its outcome is already in status.

A deleted trial pod whose eval is gone (its finalizer stripped by hand) is handed to
`on_orphan`, which releases it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from passhat.operator.pods import FINALIZER, LABEL_EVAL_UID, LABEL_RECORDED

__all__ = ["PodWatcher", "WatchFn"]

logger = logging.getLogger(__name__)

# watch(namespace, on_event): stream (event type, pod) until the stream ends; raise on errors.
WatchFn = Callable[[str, Callable[[str, Mapping[str, Any]], None]], None]


class PodWatcher:
    """Per-namespace watch threads that call `wake(eval_uid)` for every trial pod event."""

    def __init__(
        self,
        watch: WatchFn,
        *,
        wake: Callable[[str], bool],
        on_orphan: Callable[[str, Mapping[str, Any], str], None],
        retry_s: float = 1.0,
    ) -> None:
        self._watch = watch
        self._wake = wake
        self._on_orphan = on_orphan
        self._retry_s = retry_s
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()

    def ensure(self, namespace: str) -> None:
        """Start watching `namespace` unless already watching it."""
        with self._lock:
            if namespace in self._threads:
                return
            thread = threading.Thread(
                target=self._run, args=(namespace,), name=f"podwatch-{namespace}", daemon=True
            )
            self._threads[namespace] = thread
        thread.start()

    def _run(self, namespace: str) -> None:
        failures = 0
        while True:
            try:
                self._watch(namespace, lambda kind, pod: self._event(namespace, kind, pod))
                failures = 0
            except Exception as err:  # NB: the API server may be restarting; reopen
                failures += 1
                logger.debug("pod watch in %s failed (%s); reopening", namespace, err)
                time.sleep(min(self._retry_s * failures, 10.0))

    def _event(self, namespace: str, kind: str, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if kind == "DELETED" or LABEL_RECORDED in labels:
            return  # NB: already recorded and released (see the module docstring)
        uid = str(labels.get(LABEL_EVAL_UID, ""))
        if self._wake(uid):
            return
        if meta.get("deletionTimestamp") and FINALIZER in (meta.get("finalizers") or []):
            try:
                self._on_orphan(namespace, meta, uid)
            except Exception:
                logger.exception("could not release orphaned pod %s", meta.get("name"))
