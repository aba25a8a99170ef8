"""Every attempt on the record: archive an attempt before its pod is let go.

A pod's container logs and termination message are the only copy of a trial's transcript
and result JSON: they go with the pod, the node, or the kubelet's log rotation. So once a
pass has recorded an attempt in status, and BEFORE the pod's finalizer is removed, the
operator writes the attempt to the record store (`passhat.records`):

1. the transcript: every container's log (init containers first), each under a header
   line, capped at `log_limit` bytes per attempt (a cut is marked in the text and in the
   record);
2. the record (`AttemptRecord`: the trials.jsonl line plus pod, node, times, the
   classifier's message and the result JSON), LAST: its presence means the attempt is
   archived whole.

Exactly once, by the same argument as the status ledger (docs/operator.md): an attempt is
archived only after its outcome is in status, and its pod is released only after the
archive returned. An operator killed in between finds the pod still held and listed on
its next pass (the `recorded` label comes with the release), and archives it then --
unless the record is already in the store (checked for every attempt recorded by an
earlier pass), so nothing is archived twice. A store that is down or refuses raises
`StoreError`: the pod stays held, the record waits in the API server (not in memory), the
eval shows `ArchivePending`, creates no more pods than `parallelism` minus the held ones,
and does not complete until every record is in.

Transcripts are read through the API server's `pods/log` with the operator's own rights;
trial pods never hold store credentials, so a hostile agent cannot touch any record.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from passhat import metrics
from passhat.operator.pods import EvalRef, PodKey
from passhat.records import AttemptRecord, RecordStore, StoreError, StoreLayout
from passhat.trials.classify_pod import parse_timestamp
from passhat.trials.outcomes import Verdict
from passhat.trials.result import parse_result

__all__ = [
    "DEFAULT_LOG_LIMIT",
    "Archiver",
    "LogReader",
    "LogUnavailable",
    "RecordedAttempt",
    "build_record",
    "manifest_of",
    "read_transcript",
]

logger = logging.getLogger(__name__)

# Transcript bytes kept per attempt (all containers together); the rest is cut, marked.
DEFAULT_LOG_LIMIT = 10 * 1024 * 1024


class LogUnavailable(Exception):
    """A container's log cannot be read now (its kubelet does not answer): maybe later."""


class LogReader(Protocol):
    """What the archiver asks of the API server."""

    def read_pod_log(self, namespace: str, name: str, container: str, limit_bytes: int) -> bytes:
        """Up to `limit_bytes` of a container's log (stdout and stderr, interleaved); b""
        when it has none (never started, or the pod is gone). Raises LogUnavailable when
        its kubelet cannot be reached."""
        ...


@dataclass(frozen=True)
class RecordedAttempt:
    """An attempt whose outcome is in status: what the archiver needs to describe it."""

    task_id: str
    key: PodKey
    verdict: Verdict
    final: bool


def _containers(pod: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(name, containerStatus) of every container, init containers first, in spec order
    where the spec is known, else in status order."""
    status = pod.get("status") or {}
    found: list[tuple[str, Mapping[str, Any]]] = []
    for field in ("initContainerStatuses", "containerStatuses"):
        for item in status.get(field) or []:
            if isinstance(item, Mapping) and item.get("name"):
                found.append((str(item["name"]), item))
    if found:
        return found
    spec = pod.get("spec") or {}
    return [
        (str(item["name"]), {})
        for item in spec.get("containers") or []
        if isinstance(item, Mapping) and item.get("name")
    ]


def _terminated(item: Mapping[str, Any]) -> Mapping[str, Any]:
    state = item.get("state") or {}
    last = item.get("lastState") or {}
    return state.get("terminated") or last.get("terminated") or {}


def build_record(
    pod: Mapping[str, Any] | None,
    attempt: RecordedAttempt,
    *,
    main_container: str,
    log_bytes: int = 0,
    log_truncated: bool = False,
) -> AttemptRecord:
    """The attempt's record from its pod (None: the attempt has no pod to read)."""
    meta = (pod or {}).get("metadata") or {}
    spec = (pod or {}).get("spec") or {}
    status = (pod or {}).get("status") or {}
    containers = dict(_containers(pod or {}))
    main = _terminated(containers.get(main_container) or {})
    if not main:
        main = next(
            (t for item in containers.values() if (t := _terminated(item))),
            {},
        )
    exit_code = main.get("exitCode")
    started, finished = main.get("startedAt"), main.get("finishedAt")
    duration: float | None = None
    start_s, end_s = parse_timestamp(started), parse_timestamp(finished)
    if start_s is not None and end_s is not None:
        duration = round(max(0.0, end_s - start_s), 3)
    verdict = attempt.verdict
    return AttemptRecord(
        task_id=attempt.task_id,
        trial=attempt.key.trial,
        attempt=attempt.key.attempt,
        outcome=verdict.outcome.value,
        reason=verdict.reason,
        exit_code=int(exit_code) if isinstance(exit_code, int) else None,
        duration_s=duration,
        final=attempt.final,
        message=verdict.message,
        pod=str(meta["name"]) if meta.get("name") else None,
        node=str(spec["nodeName"]) if spec.get("nodeName") else None,
        started_at=str(started or status.get("startTime") or "") or None,
        finished_at=str(finished) if finished else None,
        log_bytes=log_bytes,
        log_truncated=log_truncated,
        result=parse_result(str(main.get("message") or "")) if main.get("message") else None,
    )


class Archiver:
    """Writes recorded attempts to a RecordStore; one per operator, shared by every eval."""

    def __init__(
        self,
        store: RecordStore,
        logs: LogReader,
        *,
        log_limit: int = DEFAULT_LOG_LIMIT,
        log_grace_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self._logs = logs
        self.log_limit = log_limit
        self._log_grace_s = log_grace_s
        self._clock = clock
        self._lock = threading.Lock()
        # In memory only (a restart loses nothing that counts; see the module docstring):
        self._manifests: set[str] = set()  # eval uids whose eval.json this process wrote
        self._errors: dict[str, str] = {}  # eval uid -> the last store error, until a success
        self._log_failing: dict[tuple[str, str], float] = {}  # pod -> first unreadable log

    def describe(self) -> str:
        return self.store.describe()

    def failing(self, uid: str) -> str | None:
        """The last store error archiving eval `uid`'s attempts; None once one succeeded."""
        with self._lock:
            return self._errors.get(uid)

    def forget(self, uid: str) -> None:
        """Drop what is kept about eval `uid` (it was deleted)."""
        with self._lock:
            self._errors.pop(uid, None)
            self._manifests.discard(uid)

    def archive(
        self,
        ref: EvalRef,
        *,
        pod: Mapping[str, Any] | None,
        attempt: RecordedAttempt,
        manifest: Mapping[str, Any],
        main_container: str,
        fresh: bool,
    ) -> bool:
        """Archive one recorded attempt; False when its record was in the store already.

        `fresh`: the attempt was recorded by the pass that calls this, so no earlier
        archive of it can exist (the existence check is skipped: one request less per
        trial). Raises StoreError (the store failed) or LogUnavailable (a log cannot be
        read yet); either way the caller must not release the pod.
        """
        layout = StoreLayout(ref.namespace, ref.name, ref.uid)
        key = layout.record_key(attempt.key.task, attempt.key.trial, attempt.key.attempt)
        try:
            if not fresh and self.store.exists(key):
                self._succeeded(ref.uid)
                return False
            self._write_manifest(ref, layout, manifest)
            transcript, truncated = self._transcript(ref.namespace, pod)
            self.store.put(
                layout.transcript_key(attempt.key.task, attempt.key.trial, attempt.key.attempt),
                transcript,
            )
            record = build_record(
                pod,
                attempt,
                main_container=main_container,
                log_bytes=len(transcript),
                log_truncated=truncated,
            )
            self.store.put(key, (json.dumps(record, sort_keys=True) + "\n").encode())
        except StoreError as err:
            metrics.ARCHIVE_ERRORS_TOTAL.labels("store").inc()
            with self._lock:
                self._errors[ref.uid] = str(err)
            raise
        except LogUnavailable:
            metrics.ARCHIVE_ERRORS_TOTAL.labels("log").inc()
            raise
        metrics.RECORDS_ARCHIVED_TOTAL.inc()
        self._succeeded(ref.uid)
        return True

    def _succeeded(self, uid: str) -> None:
        with self._lock:
            self._errors.pop(uid, None)

    def _write_manifest(
        self, ref: EvalRef, layout: StoreLayout, manifest: Mapping[str, Any]
    ) -> None:
        with self._lock:
            if ref.uid in self._manifests:
                return
        body = json.dumps(dict(manifest), sort_keys=True).encode()
        self.store.put(layout.eval_key, body)
        with self._lock:
            self._manifests.add(ref.uid)

    def _transcript(self, namespace: str, pod: Mapping[str, Any] | None) -> tuple[bytes, bool]:
        """Every container's log under a header, capped at `log_limit` in all."""
        if pod is None:
            return b"", False
        name = str((pod.get("metadata") or {}).get("name"))
        found = read_transcript(
            self._logs,
            namespace,
            pod,
            limit=self.log_limit,
            unreadable=lambda err: self._unreadable(namespace, name, err),
        )
        self._log_failing.pop((namespace, name), None)
        return found

    def _unreadable(self, namespace: str, name: str, err: LogUnavailable) -> bytes:
        """A log that cannot be read: wait `log_grace_s` (raise), then archive without it."""
        now = self._clock()
        first = self._log_failing.setdefault((namespace, name), now)
        if now - first < self._log_grace_s:
            raise err
        logger.warning("pod %s/%s: archived without its log: %s", namespace, name, err)
        return f"[passhat: the log could not be read: {err}]\n".encode()


def _raise(err: LogUnavailable) -> bytes:
    raise err


def read_transcript(
    logs: LogReader,
    namespace: str,
    pod: Mapping[str, Any],
    *,
    limit: int,
    unreadable: Callable[[LogUnavailable], bytes] = _raise,
) -> tuple[bytes, bool]:
    """(transcript, cut) of `pod`: every container's log under a header line, init
    containers first, `limit` bytes in all (a cut is marked in the text). `unreadable`
    says what stands for a log that cannot be read (default: raise LogUnavailable)."""
    name = str((pod.get("metadata") or {}).get("name"))
    parts: list[bytes] = []
    budget, truncated = limit, False
    for container, _ in _containers(pod):
        header = f"==> {name} container {container} <==\n".encode()
        try:
            # NB: one byte over the budget tells a cut log from one that fits exactly.
            log = logs.read_pod_log(namespace, name, container, budget + 1)
        except LogUnavailable as err:
            log = unreadable(err)
        if len(log) > budget:
            log, truncated = log[:budget], True
        parts += [header, log]
        if log and not log.endswith(b"\n"):
            parts.append(b"\n")
        budget -= len(log)
        if truncated:
            parts.append(f"[passhat: transcript cut at {limit} bytes]\n".encode())
            break
    return b"".join(parts), truncated


def manifest_of(body: Mapping[str, Any], task_ids: Sequence[str]) -> dict[str, Any]:
    """The eval's `eval.json`: who it was and which tasks its task indexes name."""
    meta = body.get("metadata") or {}
    return {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "creationTimestamp": meta.get("creationTimestamp"),
        "taskIds": list(task_ids),
        "spec": body.get("spec") or {},
    }
