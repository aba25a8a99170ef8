"""The kopf wiring: one daemon per ConsistencyEval, pod events that only wake it.

kopf gives the operator the eval watch stream and one long-lived daemon per eval;
everything that decides an outcome lives in `loop.EvalLoop`. The daemon is the eval's only
writer: it runs a pass (in a thread: the API calls block), then sleeps until a pod of that
eval changes, the resync interval passes, or the eval goes away. Pod events (a raw watch
per namespace, `podwatch.PodWatcher`, cheaper than kopf's per-object handling) carry no
data into the loop; they only set the eval's wake-up event, so a missed or duplicated
event cannot change what is counted. Deleting an eval releases its pods' finalizers
(`on.delete`), so garbage collection can remove them.

Like a Job, a finished eval carries no finalizer: kopf holds its finalizer only for a
running daemon, and the daemon runs only while the eval's status is not final (`when=`),
so a finished eval can be deleted with no operator running. Its metrics come from its
watch events instead (`on_eval_event`), also after a restart.

kopf keeps its own bookkeeping in `passhat.dev/` annotations and never writes `status`,
which belongs to the loop. `configure()` must be called before kopf starts (the
`passhat operator` command does it); `OperatorRuntime` holds what the handlers share.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar, cast

import kopf

from passhat import metrics
from passhat.api.spec import GROUP, VERSION
from passhat.api.suite import suite_of
from passhat.operator import events
from passhat.operator.archive import Archiver
from passhat.operator.config import OperatorConfig
from passhat.operator.kube import PLURAL, ApiError, Kube, OperatorApi, load_client_config
from passhat.operator.loop import EvalLoop, PassResult, PassState, Recorded
from passhat.operator.ownership import PodSigner
from passhat.operator.pods import EVAL_FINALIZER, FINALIZER, EvalRef, eval_owner
from passhat.operator.podwatch import PodWatcher
from passhat.operator.status import is_terminal
from passhat.records import RecordStore

__all__ = ["EVAL_FINALIZER", "OperatorRuntime", "configure", "runtime"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
# How often the daemon of an eval in a namespace another release serves asks again.
CLAIM_RETRY_S = 30.0


class OperatorRuntime:
    """What the handlers share: config, the API wrapper, wake-up events, per-eval locks."""

    def __init__(self) -> None:
        self.config = OperatorConfig()
        self.kubeconfig: str | None = None
        self.namespaces: list[str] = []
        # Where attempts are archived (None: not archived; pods keep the only copy).
        self.store: RecordStore | None = None
        self._archiver: Archiver | None = None
        self._api: OperatorApi | None = None
        self._passes: ThreadPoolExecutor | None = None
        self._watcher: PodWatcher | None = None
        self.wakers: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Event]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        # With leader election: claim an eval's namespace for this release before serving
        # it; a refusal (another release serves it) says why (leader.py). `refusal` is
        # the claim's state as last renewed (no API call), asked before each pass.
        self.claim: Callable[[str], str | None] | None = None
        self.refusal: Callable[[str], str | None] | None = None

    @property
    def api(self) -> OperatorApi:
        """The API wrapper (made on first use from the kubeconfig / in-cluster config)."""
        if self._api is None:
            kube = Kube(load_client_config(self.kubeconfig), self.config)
            # NB: a pass waiting for an archive to finish is woken by its release.
            kube.on_released = self.wake
            self._api = kube
        return self._api

    @property
    def archiver(self) -> Archiver | None:
        """Archives recorded attempts into `store` (None when there is no store)."""
        if self.store is not None and self._archiver is None:
            self._archiver = Archiver(
                self.store,
                self.api,
                log_limit=self.config.archive_log_limit_bytes,
                log_grace_s=self.config.archive_log_grace_s,
            )
        return self._archiver

    def set_api(self, api: OperatorApi) -> None:
        """Use `api` instead of a real API server (tests)."""
        self._api = api

    @property
    def watcher(self) -> PodWatcher:
        """The per-namespace pod watches that wake the daemons."""
        if self._watcher is None:
            self._watcher = PodWatcher(
                self.api.watch_pods, wake=self.wake, on_orphan=_release_orphan
            )
        return self._watcher

    def wake(self, uid: str) -> bool:
        """Wake the daemon of eval `uid` (from any thread); False when it has none."""
        entry = self.wakers.get(uid)
        if entry is None:
            return False
        loop, event = entry
        if event.is_set():
            # NB: a pass is due and has not started (the daemon clears the event before
            # each pass), so it sees what this wake-up is for (events are applied before
            # they wake); spares the loop a wake-up per pod event (~6 per trial, #22)
            return True
        try:
            loop.call_soon_threadsafe(event.set)
        except RuntimeError:  # NB: the loop closed: the operator is exiting
            return False
        return True

    def lock(self, uid: str) -> threading.Lock:
        """The lock a pass and the deletion handler of one eval both hold."""
        with self._locks_guard:
            return self._locks.setdefault(uid, threading.Lock())

    def forget(self, uid: str) -> None:
        """Drop an eval's lock and waker (it was deleted)."""
        with self._locks_guard:
            self._locks.pop(uid, None)
        self.wakers.pop(uid, None)

    async def in_thread(self, fn: Callable[[], T]) -> T:
        """Run blocking `fn` on the pass pool, keeping kopf's context (for kopf.event)."""
        if self._passes is None:
            self._passes = ThreadPoolExecutor(max_workers=8, thread_name_prefix="passhat-pass")
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._passes, functools.partial(context.run, fn))


runtime = OperatorRuntime()


def configure(
    config: OperatorConfig,
    *,
    kubeconfig: str | None = None,
    namespaces: Sequence[str] = (),
    store: RecordStore | None = None,
) -> None:
    """Set the operator's config before kopf starts (`passhat operator` calls this);
    `namespaces` are the ones it serves (none: every namespace); `store` is where
    attempts are archived (none: not archived)."""
    runtime.config = config
    runtime.kubeconfig = kubeconfig
    runtime.namespaces = list(namespaces)
    runtime.store = store


class NeverGiveUp:
    """kopf's API retry delays, never exhausted: 1, 1, 2, 3, 5, 8, 13, 21 s (kopf's own),
    then every 30 s. Iterable afresh for each call (kopf iterates it once per request)."""

    def __iter__(self) -> Iterator[float]:
        yield from (1, 1, 2, 3, 5, 8, 13, 21)
        yield from itertools.repeat(30.0)


class EmptyDiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf's annotation diff base with spec and metadata ignored: always `{}`, built
    without kopf's deep copy of the whole eval first (with 1,000 tasks and the status of a
    running eval that copy, once per eval event, was 8 % of the operator's CPU at 10,000
    trials: #22, docs/benchmarks.md "Session 18"). Fields a handler asks for
    (`extra_fields`; passhat has none) still go through kopf's own build."""

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None
    ) -> kopf.BodyEssence:
        if extra_fields:
            return super().build(body=body, extra_fields=extra_fields)
        return cast(kopf.BodyEssence, {})


@kopf.on.startup()
def _settings(settings: kopf.OperatorSettings, **_: Any) -> None:
    """kopf stores its state in passhat.dev annotations, never in status."""
    settings.persistence.finalizer = EVAL_FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    # NB: an empty diff base ("{}"). By default kopf copies the spec, labels and annotations
    # into this annotation, and annotations are capped at 256 KiB in total: an eval with a
    # bigger spec (up to 10,000 tasks) could be patched by kopf never again, nor deleted
    # (kopf's finalizer stayed). passhat has no create/update/field handlers to diff for.
    settings.persistence.diffbase_storage = EmptyDiffBase(
        prefix=GROUP, key="last-handled-configuration", ignored_fields=["spec", "metadata"]
    )
    # Handler successes are not worth an API write each; our own Events say what matters.
    settings.posting.level = logging.WARNING
    settings.execution.max_workers = 16
    # NB: serving named namespaces, the operator has rights there and nothing cluster-wide:
    # kopf's scan of namespaces and CRDs would get 403 and be retried after every start
    # before the given namespaces are served (seen once: 9 retries, 54 s; docs/install.md).
    settings.scanning.disabled = bool(runtime.namespaces)
    # NB: kopf gives an API call up after 8 retries, and a watch given up stops the whole
    # operator ("Multidimensional multitasker has failed"): a namespace admin who deleted
    # the operator's RoleBinding in their namespace (403) stopped it for every namespace,
    # within a minute and after each restart (seen on the test cluster). Never given up,
    # that namespace's watch waits for its rights; the other namespaces are served.
    settings.networking.error_backoffs = NeverGiveUp()


@kopf.on.startup()
def _release_stranded_at_start(**_: Any) -> None:
    release_stranded_pods()


def release_stranded_pods() -> None:
    """Let go of trial pods whose eval is gone or finished (released nowhere else); run at
    start.

    The pod watch releases such a pod only in a namespace where an eval runs. After the
    operator was uninstalled and an eval's finalizer stripped by hand, garbage collection
    deletes its pods, which our finalizer then holds, and their namespace, Terminating,
    can get no eval that would start a watch: only this sweep at start releases them. A
    finished eval has no daemon to let go of pods its last pass could not release (an API
    error after the final status write): one pass over it here does.
    """
    held: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    scopes: list[str | None] = list(runtime.namespaces) or [None]
    signer = PodSigner(runtime.config.pod_key)
    for namespace in scopes:
        for pod in _without_rights_skipped(runtime.api.list_held_pods, namespace) or []:
            meta = pod.get("metadata") or {}
            uid = signer.owner_uid(pod)
            # NB: only pods the operator made; a look-alike is not ours to let go
            if uid is not None and FINALIZER in (meta.get("finalizers") or []):
                held.setdefault((str(meta.get("namespace") or namespace), uid), []).append(meta)
    # NB: one eval lookup per eval, not per pod (a big eval may hold thousands)
    for (namespace, uid), metas in held.items():
        _without_rights_skipped(
            functools.partial(_release_unserved, uid=uid, metas=metas), namespace
        )


def _without_rights_skipped(call: Callable[[Any], T], namespace: str | None) -> T | None:
    """`call(namespace)`; None (and a warning) when the operator has no rights there.

    Why: the operator's rights in a served namespace are a RoleBinding that the
    namespace's admin may delete. The sweep runs in a start-up activity, which kopf retries
    every 60 s until it succeeds, serving nothing meanwhile: one namespace's 403 kept the
    operator from every namespace after its next restart (seen on the test cluster). A
    namespace without rights is skipped; other errors are raised (retried) as before."""
    try:
        return call(namespace)
    except ApiError as err:
        if err.status not in (403, 404):
            raise
        logger.warning(
            "namespace %s: no rights there (the operator's RoleBinding was removed?), "
            "skipped at start: %s",
            namespace,
            err,
        )
        return None


def _ref(meta: Mapping[str, Any]) -> EvalRef:
    return EvalRef(str(meta.get("namespace")), str(meta.get("name")), str(meta.get("uid")))


def _on_recorded(ref: EvalRef, item: Recorded) -> None:
    if _daemon_runs(ref):
        metrics.observe_trial(
            ref.namespace,
            ref.name,
            outcome=str(item.verdict.outcome),
            reason=item.verdict.reason,
            duration_s=item.duration_s,
        )


def _on_status(ref: EvalRef, status: Mapping[str, Any]) -> None:
    if _daemon_runs(ref):
        metrics.observe_status(ref.namespace, ref.name, status)


def _daemon_runs(ref: EvalRef) -> bool:
    """Whether the eval's daemon is still registered. NB: kopf drops its finalizer when it
    sees the final status, so the eval can be deleted (and its series dropped by
    `_forget`) while the pass that wrote that status still reports; it must not bring
    them back."""
    return ref.uid in runtime.wakers


def _unfinished(status: Mapping[str, Any], **_: Any) -> bool:
    """The daemon's filter: it runs (and kopf's finalizer is held) until the eval is final.

    When the final status is written, kopf stops the daemon (it returns by itself too) and
    removes the finalizer; an eval found finished at start gets neither.
    """
    return not is_terminal(status)


# NB: a stopped daemon (the eval finished or was deleted) is first asked to exit (it does
# after the pass in flight), and cancelled only after `cancellation_backoff`.
@kopf.daemon(
    GROUP,
    VERSION,
    PLURAL,
    cancellation_backoff=10.0,
    cancellation_timeout=10.0,
    when=_unfinished,
)
async def run_eval(
    meta: kopf.Meta,
    body: kopf.Body,
    stopped: kopf.DaemonStopped,
    logger: kopf.Logger,
    **_: Any,
) -> None:
    """The eval's only writer: run passes until it is finished, deleted or stopped."""
    ref = _ref(meta)
    config = runtime.config
    if not await _may_serve(body, stopped, logger):
        return
    wake = asyncio.Event()
    runtime.wakers[ref.uid] = (asyncio.get_running_loop(), wake)
    runtime.watcher.ensure(ref.namespace)
    loop = EvalLoop(
        runtime.api,
        ref,
        config=config,
        post_event=events.post,
        on_recorded=_on_recorded,
        on_status=_on_status,
        archiver=runtime.archiver,
        # NB: kopf's daemon body is live: kopf replaces it with each watch event of the eval
        watched_version=lambda: str(body.metadata.get("resourceVersion") or ""),
    )
    lock = runtime.lock(ref.uid)

    def one_pass() -> PassResult:
        with lock:
            started = time.monotonic()
            try:
                return loop.run_pass()
            finally:
                metrics.RECONCILE_DURATION_SECONDS.observe(time.monotonic() - started)

    try:
        while not stopped:
            if _claim_lost(ref.namespace) and not await _may_serve(body, stopped, logger):
                return
            wake.clear()
            started = time.monotonic()
            try:
                result = await runtime.in_thread(one_pass)
            except Exception as err:  # NB: level-triggered: the next pass starts over
                logger.warning(f"pass failed, retrying in {config.error_backoff_s}s: {err}")
                await _sleep(wake, stopped, config.error_backoff_s, wake_early=False)
                continue
            if result.state is PassState.DONE:
                logger.info("eval finished; its daemon stops")
                return
            if result.state is not PassState.CONFLICT:
                # NB: outcomes left unwritten (status_interval_s) are written in time
                wait = min(config.resync_interval_s, result.again_in_s or float("inf"))
                await _sleep(wake, stopped, wait, wake_early=True)
            # Coalesce a burst of pod events into one pass (and never spin on conflicts).
            rest = config.min_pass_interval_s - (time.monotonic() - started)
            if rest > 0 and not stopped:
                await asyncio.sleep(rest)
    finally:
        if runtime.wakers.get(ref.uid, (None, None))[1] is wake:
            runtime.wakers.pop(ref.uid, None)


def _claim_lost(namespace: str) -> bool:
    """Whether another release (or a forger) now holds `namespace`'s claim: its evals'
    passes stop until the claim is this release's again (the others go on)."""
    refusal = runtime.refusal
    return refusal is not None and refusal(namespace) is not None


async def _may_serve(
    body: Mapping[str, Any], stopped: kopf.DaemonStopped, logger: kopf.Logger
) -> bool:
    """Whether this release may serve the eval `body` in its namespace (the claim); while
    another release serves it, say so once (an Event on the eval) and wait."""
    namespace = str((body.get("metadata") or {}).get("namespace"))
    claim = runtime.claim
    if claim is None:
        return True
    said = False
    while not stopped:
        refusal = await runtime.in_thread(functools.partial(claim, namespace))
        if refusal is None:
            return True
        if not said:
            # NB: kopf posts no logger record as an Event (posting.loggers is off): the
            # Event is posted explicitly (the log line alone was seen on the test cluster)
            logger.warning(refusal)
            events.post(body, events.namespace_claimed(refusal))
            said = True
        await _sleep(asyncio.Event(), stopped, CLAIM_RETRY_S, wake_early=False)
    return False


async def _sleep(
    wake: asyncio.Event, stopped: kopf.DaemonStopped, timeout: float, *, wake_early: bool
) -> None:
    """Sleep up to `timeout`, or until woken (if `wake_early`) or stopped."""
    waiters: list[asyncio.Future[Any]] = [asyncio.ensure_future(stopped.wait())]
    if wake_early:
        waiters.append(asyncio.ensure_future(wake.wait()))
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


# NB: optional: a finished eval has no finalizer (see `_unfinished`); a running one is held
# by its daemon, so this runs for every eval deleted while it runs.
@kopf.on.delete(GROUP, VERSION, PLURAL, optional=True)
def release_on_delete(meta: kopf.Meta, logger: kopf.Logger, **_: Any) -> None:
    """Release the finalizers of a deleted eval's pods (garbage collection removes them)."""
    ref = _ref(meta)
    runtime.wake(ref.uid)
    with runtime.lock(ref.uid):
        pods = runtime.api.list_pods(ref.namespace, ref.uid)
        if pods:
            runtime.api.release_pods(ref.namespace, pods)
    logger.info(f"released {len(pods)} trial pods")
    _forget(ref)


def _finished_or_gone(status: Mapping[str, Any], **kwargs: Any) -> bool:
    """on_eval_event's filter: a running eval's daemon sets its gauges itself (and each of
    its status writes is an event, which kopf would log a line for)."""
    return kwargs.get("type") == "DELETED" or is_terminal(status)


@kopf.on.event(GROUP, VERSION, PLURAL, when=_finished_or_gone)
def on_eval_event(
    event: kopf.RawEvent, meta: kopf.Meta, status: kopf.Status, body: kopf.Body, **_: Any
) -> None:
    """Every watch event of an eval (kopf's initial listing too): see `eval_event`."""
    eval_event(event.get("type"), _ref(meta), with_suite(status, suite_of(body)))


def with_suite(status: Mapping[str, Any], suite: str | None) -> dict[str, Any]:
    """The status with `suite` as the eval's spec and labels name it now: no pass rewrites
    a finished eval's status.suite, and a run labelled into a suite afterwards
    (`kubectl label ceval OLD passhat.dev/suite=nightly`) belongs to it in the metrics
    as in `passhat history`."""
    observed = {key: value for key, value in status.items() if key != "suite"}
    if suite is not None:
        observed["suite"] = suite
    return observed


def eval_event(kind: str | None, ref: EvalRef, status: Mapping[str, Any]) -> None:
    """A finished eval's gauges (no daemon writes them after a restart); a deleted eval's
    series and bookkeeping dropped (a finished one goes without `on.delete`)."""
    if kind == "DELETED":
        _forget(ref)
    elif is_terminal(status):
        metrics.observe_status(ref.namespace, ref.name, status)


def _forget(ref: EvalRef) -> None:
    metrics.forget_eval(ref.namespace, ref.name)
    if runtime.archiver is not None:
        runtime.archiver.forget(ref.uid)
    events.RETRY_LIMITER.forget(ref.namespace, ref.name)
    runtime.forget(ref.uid)


def _release_orphan(namespace: str, meta: Mapping[str, Any], uid: str) -> None:
    """A deleted pod with no daemon to wake (the pod watch's `on_orphan`); only one the
    operator made for eval `uid`."""
    if PodSigner(runtime.config.pod_key).owns({"metadata": meta}, uid):
        _release_unserved(namespace, uid, [meta])


def _release_unserved(namespace: str, uid: str, metas: Sequence[Mapping[str, Any]]) -> None:
    """Held pods of eval `uid` that no daemon serves: let them go if the eval is gone or
    being deleted (e.g. its finalizer was stripped); settle the eval if it is finished."""
    owner = eval_owner(metas[0], uid)
    if owner is None:
        return
    body = _live_eval(namespace, owner, uid)
    if body is None:
        logger.info("releasing %d trial pods of deleted eval %s/%s", len(metas), namespace, owner)
        runtime.api.release_pods(namespace, [{"metadata": dict(meta)} for meta in metas])
    elif is_terminal(body.get("status") or {}):
        _settle_finished(EvalRef(namespace, owner, uid))


def _live_eval(namespace: str, name: str, uid: str) -> dict[str, Any] | None:
    """The eval `name` if it is still the one with `uid` and not being deleted.

    NB: a finished eval being deleted has no finalizer, so `on.delete` does not run for
    it, and a pass over it does nothing: its held pods are let go like a gone eval's.
    """
    body = runtime.api.get_eval(namespace, name)
    meta = (body or {}).get("metadata") or {}
    if body is None or meta.get("uid") != uid or meta.get("deletionTimestamp"):
        return None
    return body


def _settle_finished(ref: EvalRef) -> None:
    """One pass over a finished eval, which lets its leftover pods go (the pass keeps the
    recorded ones, releases the rest); nothing else runs for a finished eval."""
    with runtime.lock(ref.uid):
        EvalLoop(
            runtime.api,
            ref,
            config=runtime.config,
            post_event=events.post,
            archiver=runtime.archiver,
        ).run_pass()
