"""One reconcile pass of one eval: the level-triggered loop that makes accounting exact.

A pass reads the ledger from the API server, never from memory, and its pods from a
watch-fed cache (`podcache.py`) that may lag, which only ever delays a decision:

1. GET the eval (spec, `status.ledger`, resourceVersion): not older than the version this
   loop last read or wrote, from the API server's watch cache; from etcd on a loop's
   first pass and after a 409 (a cache behind another writer only costs a 409).
2. Read its unrecorded pods: eval-uid label, no `recorded` label (the pod cache; a LIST
   until the cache has synced). A pod this loop created counts as live until listed
   (expectations), and a GET, never the list, decides about a name a create found
   taken or an expected pod still not listed (`_taken_holders`).
3. For each pod: an attempt the ledger already holds is only released (the operator died
   between recording and releasing it); the slot's current attempt is classified and,
   once terminal, recorded in the ledger (final unless a retryable infra error).
4. If anything changed, write the whole status ONCE, as a merge patch on the status
   subresource carrying the resourceVersion read in step 1: a 409 means someone else
   wrote in between, and the pass is dropped and run again from step 1.
5. Only after that write, release the recorded pods. A finished one (phase Succeeded or
   Failed, or every container terminated) is kept, like a Job's pods, until its eval is
   deleted: ONE patch removes our finalizer and adds the `recorded` label, so no pass
   lists it again. One that still runs (a sidecar, a pod stuck in image errors) or was
   never recorded is released and deleted.
   (`EvalApi.settle` may finish releases after it returns; the next pass does not wait.)
6. Create the pods of slots that are not final and have no pod for their current attempt,
   up to `parallelism` live pods (deterministic names: re-creating is a harmless 409; a
   name the LIST did not show but a create finds taken belongs to a pod whose labels were
   changed, or to someone else's pod that took it first: the next pass counts that attempt
   as infra_error/lost and moves on), paced like the Job controller's creates: slow-start
   batches, a backoff while the API server refuses them for now (`pacing.py`).

Only pods the operator made for this eval count, and only they are touched: a controller
owner reference to the eval and the operator's creation mark (`ownership.PodSigner`,
which a tenant cannot forge); of those, only pods whose name matches their labels count.
A pod that took an attempt's name first is never touched: that attempt is lost and the
next one gets a new name.

The operator may die between any two API calls. Every step is safe to repeat: the ledger
refuses an attempt it already holds, a pod cannot vanish before its outcome is in status
(our finalizer), a pod is labelled recorded only after its outcome is in status (so one
recorded but not yet released is still listed, and only released), and a slot whose
current attempt has no pod was simply never created -- so it is created now, under the
same name. An outcome is never inferred from a missing pod. Retry backoff and the create
backoff are written into status (`timing.py`), so a restart or a new leader waits them out;
the rest of the loop's memory (slow start, image-error ConfigError counts) is lost on a
restart, which means retrying sooner, never counting differently.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from passhat.api import conditions as cond
from passhat.api.errors import SpecError
from passhat.api.load import config_map_names, parse_spec, resolve_tasks
from passhat.api.spec import EvalSpec, Task
from passhat.api.suite import suite_of
from passhat.operator import events
from passhat.operator.archive import Archiver, RecordedAttempt, manifest_of
from passhat.operator.config import OperatorConfig
from passhat.operator.deadline import deadline_exceeded_status, deadline_message, ended_status
from passhat.operator.gradercheck import (
    CheckStep,
    StabilityChecker,
    is_grader_pod,
    pod_log_transcripts,
    store_transcripts,
)
from passhat.operator.kube import ApiError, Conflict, EvalApi
from passhat.operator.ownership import PodSigner
from passhat.operator.pacing import CreatePacer, create_paced
from passhat.operator.pods import (
    LABEL_EVAL_UID,
    LABEL_RECORDED,
    EvalRef,
    PodKey,
    build_pod,
    let_go_already,
    pod_key,
    pod_name,
)
from passhat.operator.queueing import ahead_capacity, queue_of, waiting_for_admission
from passhat.operator.spend import budget_exhausted_status, usage_after
from passhat.operator.status import (
    StatusInputs,
    build_status,
    condition_status,
    config_error_status,
    infra_errors_by_reason,
    is_terminal,
)
from passhat.operator.taskpin import PinCheck, pin_problems, pins_of
from passhat.operator.timing import restore, timing_status
from passhat.trials.budget import check_budget
from passhat.trials.classify_pod import (
    POD_RULES,
    PodFacts,
    classify_facts,
    parse_timestamp,
    pod_facts,
    pod_result,
    verdict_for_vanished_pod,
)
from passhat.trials.ledger import LedgerError, SlotLedger, SlotState
from passhat.trials.outcomes import CONFIG_ERROR, IMAGE_ERROR, LOST, Outcome, Verdict
from passhat.trials.retry import RetryPlan
from passhat.trials.usage import Resources, Spend, resources_of, spend_of

__all__ = ["EvalLoop", "PassResult", "PassState", "Recorded"]

logger = logging.getLogger(__name__)

# ForeignTrialPod events per eval and operator process, at most.
_MAX_FOREIGN_REPORTED = 10

# spec.podRetention: which finished, recorded trial pods stay (docs/spec.md).
RETAIN_ALL, RETAIN_FAILED, RETAIN_NONE = "all", "failed", "none"
_RETENTIONS = (RETAIN_ALL, RETAIN_FAILED, RETAIN_NONE)


class PassState(Enum):
    """What the daemon should do after a pass."""

    # More work may come: wait for a wake-up or the resync interval.
    CONTINUE = "continue"
    # The status changed under us (409), the API server refused a pod for good (the next
    # pass writes the ConfigError), or the pass created its most and more pods are
    # missing: run the pass again now.
    CONFLICT = "conflict"
    # Finished for good (complete, failed, deleted, or gone): the daemon may stop.
    DONE = "done"


@dataclass(frozen=True)
class Recorded:
    """One attempt folded into the ledger by a pass (reported once its status is written)."""

    task_id: str
    key: PodKey
    verdict: Verdict
    final: bool
    duration_s: float | None
    retry_delay_s: float
    # What the attempt reported it spent and used (its result JSON), and why a reported
    # spend was refused (passhat.trials.usage).
    spend: Spend | None = None
    resources: Resources | None = None
    spend_problem: str | None = None


@dataclass
class PassResult:
    """What a pass did; `status` is the status it wrote (None when it wrote none)."""

    state: PassState
    recorded: list[Recorded] = field(default_factory=list)
    created: int = 0
    released: int = 0
    status: dict[str, Any] | None = None
    # Set when the pass left outcomes unwritten (`status_interval_s`): run the next pass
    # within this many seconds, also without a wake-up.
    again_in_s: float | None = None


@dataclass(frozen=True)
class _Resolved:
    spec: EvalSpec
    tasks: list[Task]
    # status.taskSources, and the per-pass check that they still hold (tasksFrom only).
    pins: list[dict[str, Any]] = field(default_factory=list)
    pin_check: PinCheck | None = None


class _ConfigProblem(Exception):
    def __init__(self, message: str, *, reason: str, terminal: bool) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
        self.terminal = terminal


def _ended(pod: Mapping[str, Any]) -> bool:
    """Whether nothing of the pod runs any more, or soon will not: its phase is final, or
    every container (init ones included) has terminated.

    NB: a real kubelet reports the containers' terminated states before it moves the phase
    to Succeeded/Failed (only once the pod worker has torn the pod down), and a pass may
    record the attempt in between; such a pod becomes terminal by itself. A pod with a
    container still running (a sidecar) or waiting (an image error) never would.
    """
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return True
    containers = [
        item
        for key in ("initContainerStatuses", "containerStatuses")
        for item in status.get(key) or []
    ]
    return bool(containers) and all(
        "terminated" in ((item or {}).get("state") or {}) for item in containers
    )


def _recorded_in(ledger: SlotLedger | None, pod: Mapping[str, Any]) -> bool:
    """Whether `ledger` holds the attempt `pod` ran."""
    key = pod_key(pod)
    if ledger is None or key is None:
        return False
    if key.task >= ledger.n_tasks or key.trial >= ledger.trials:
        return False
    return ledger.is_final(key.task, key.trial) or key.attempt < ledger.next_attempt(
        key.task, key.trial
    )


def _dispose(
    pods: list[Mapping[str, Any]], ledger: SlotLedger | None, retention: str = RETAIN_ALL
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(keep, release): finished pods whose attempt `ledger` holds and that
    `spec.podRetention` (`retention`) keeps are kept (released and labelled recorded);
    every other pod is released and deleted."""
    keep = [
        pod
        for pod in pods
        if _ended(pod) and _recorded_in(ledger, pod) and _retained(ledger, pod, retention)
    ]
    kept = {id(pod) for pod in keep}
    return keep, [pod for pod in pods if id(pod) not in kept]


def _retained(ledger: SlotLedger | None, pod: Mapping[str, Any], retention: str) -> bool:
    """Whether `spec.podRetention` keeps this finished pod, whose attempt `ledger` holds:
    `all` keeps every one, `none` none, `failed` all but the pod of a slot's final attempt
    that passed (retried infra errors, fails and infra errors stay, for `kubectl logs`)."""
    if retention == RETAIN_ALL:
        return True
    key = pod_key(pod)
    if retention == RETAIN_NONE or ledger is None or key is None:
        return retention != RETAIN_NONE
    slot = (key.task, key.trial)
    passed = (
        ledger.is_final(*slot)
        and key.attempt == ledger.attempts(*slot) - 1
        and ledger.state(*slot) == SlotState.PASS
    )
    return not passed


def _ledger_of(status: Mapping[str, Any]) -> SlotLedger | None:
    """The ledger in `status`, or None when there is none (or it cannot be read)."""
    try:
        return SlotLedger.unpack(str(status["ledger"])) if status.get("ledger") else None
    except LedgerError:
        return None


def _duration(pod: Mapping[str, Any]) -> float | None:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    for item in statuses:
        terminated = (item.get("state") or {}).get("terminated") or {}
        start, end = (
            parse_timestamp(terminated.get("startedAt")),
            parse_timestamp(terminated.get("finishedAt")),
        )
        if start is not None and end is not None:
            return max(0.0, end - start)
    return None


class EvalLoop:
    """The reconcile loop of one eval; `run_pass()` is one level-triggered pass."""

    def __init__(
        self,
        api: EvalApi,
        ref: EvalRef,
        *,
        config: OperatorConfig | None = None,
        clock: Callable[[], float] = time.time,
        post_event: Callable[[Mapping[str, Any], events.Event], None] | None = None,
        on_recorded: Callable[[EvalRef, Recorded], None] | None = None,
        on_status: Callable[[EvalRef, Mapping[str, Any]], None] | None = None,
        archiver: Archiver | None = None,
        stop_message: str | None = None,
        watched_version: Callable[[], str] | None = None,
    ) -> None:
        self.api = api
        # The eval's resourceVersion as the operator's watch of evals last showed it (kopf's
        # live body); None: every pass GETs the eval (`_read_eval`).
        self._watched_version = watched_version
        # Set: the pass stops the eval (`passhat operator drain`), as its deadline would.
        self._stop_message = stop_message
        self.ref = ref
        self.config = config or OperatorConfig()
        self._clock = clock
        self._post_event = post_event
        self._on_recorded = on_recorded
        self._on_status = on_status
        self._archiver = archiver
        self._signer = PodSigner(self.config.pod_key)
        self._resolved: tuple[int, _Resolved] | None = None
        # Retry backoff per slot: kept in status.timing too, read back at the first pass.
        self._not_before: dict[tuple[int, int], float] = {}
        self._timing_restored = False
        # In memory only (a restart forgets them; see the module docstring):
        self._ended: set[tuple[int, int, int]] = set()
        self._start_failures: set[tuple[int, int, int]] = set()
        self._start_failure_message = ""
        self._pod_refused: str | None = None
        # Creates that found their pod's name taken by a pod no pass counts (see _taken_slots).
        self._taken: dict[PodKey, str] = {}
        # The eval's resourceVersion this loop last read or wrote: the next pass reads the
        # eval not older than it, from the API server's watch cache ("" = from etcd).
        self._read_rv = ""
        # The eval at `_read_rv`, as this loop read or wrote it (a write's answer is the
        # whole eval, its managed fields left out), and when; None when not known.
        self._known: Mapping[str, Any] | None = None
        self._known_at = float("-inf")
        # When this loop last wrote status, and how long that write took (`_defer_write`).
        self._written_at = float("-inf")
        self._write_s = 0.0
        # Pods this loop created that no LIST has shown yet (when): live, never created
        # again while the pod list (a watch-fed cache) lags (`_expected_slots`).
        self._expected: dict[PodKey, float] = {}
        # Slow start and backoff of this eval's creates (quota, throttling).
        self._pacer = CreatePacer(config=self.config, clock=clock)
        # uid -> resourceVersion of the pods the last pass found still running with
        # nothing a later clock could change (`_unended`): not classified again until
        # the pod changes.
        self._running: dict[str, str] = {}
        self._reported: set[str] = set()
        # This pass's unschedulable pods (name, waited_s, message); the last event's time.
        self._unschedulable: dict[str, tuple[float, str]] = {}
        self._unschedulable_reported_at: float | None = None
        # Look-alike pods reported (a ForeignTrialPod event each, up to a cap).
        self._foreign: set[str] = set()
        # spec.grading.stabilityCheck, run once the trials are final (gradercheck.py).
        self._checker = StabilityChecker(
            ref,
            store_transcripts(archiver.store, ref)
            if archiver is not None
            else pod_log_transcripts(
                api,
                ref,
                limit=self.config.archive_log_limit_bytes,
                owns=lambda pod: self._signer.owns(pod, ref.uid),
            ),
            api,
            owns=lambda pod: self._signer.owns(pod, ref.uid),
        )

    # -- spec and tasks -------------------------------------------------------------------

    def _resolve(self, body: Mapping[str, Any], started: bool) -> _Resolved:
        generation = int((body.get("metadata") or {}).get("generation") or 0)
        if self._resolved is not None and self._resolved[0] == generation:
            return self._resolved[1]
        try:
            spec = parse_spec(body.get("spec"))
        except SpecError as err:
            raise _ConfigProblem(str(err), reason=cond.REASON_INVALID_SPEC, terminal=True) from None
        problems = self.config.trial_policy.problems(
            spec.trial.template, namespace=self.ref.namespace
        )
        if problems:
            raise _ConfigProblem(
                "; ".join(problems), reason=cond.REASON_UNSAFE_TEMPLATE, terminal=True
            )
        objects = {
            name: self.api.get_config_map(self.ref.namespace, name)
            for name in config_map_names(spec)
        }
        # NB: the ConfigMaps as the eval started with them (taskpin.py): never other tasks
        pinned = (body.get("status") or {}).get("taskSources") or []
        changed = pin_problems(spec, pinned, objects) if pinned else []
        if changed:
            raise _ConfigProblem(
                _tasks_changed_message(changed), reason=cond.REASON_TASKS_CHANGED, terminal=True
            )
        config_maps = {
            name: dict(obj.get("data") or {}) for name, obj in objects.items() if obj is not None
        }
        try:
            tasks = resolve_tasks(spec, config_maps)
        except SpecError as err:
            # NB: before any trial ran the user may still create or fix the ConfigMap.
            raise _ConfigProblem(
                str(err), reason=cond.REASON_TASKS_UNAVAILABLE, terminal=started
            ) from None
        pins = [dict(pin) for pin in pinned] or pins_of(
            spec, {name: obj for name, obj in objects.items() if obj is not None}
        )
        check = PinCheck(self.api, self.ref.namespace, spec, pins) if pins else None
        resolved = _Resolved(spec, tasks, pins, check)
        self._resolved = (generation, resolved)
        return resolved

    # -- the pass ---------------------------------------------------------------------------

    def _read_eval(self) -> Mapping[str, Any] | None:
        """The eval, not older than the version this loop last read or wrote (`_read_rv`):
        that version as it was read or written, without a request, while the watch of evals
        shows that same version (nobody wrote since, as far as the watch has seen: what a
        GET answered from the API server's watch cache could say too); else a GET, from
        the watch cache when there is a `_read_rv` (docs/operator.md, *Why it is exact*).
        At 10,000 inline tasks each GET was ~670 KB of JSON to encode and parse (#22)."""
        known, watched, rv = self._known, self._watched_version, self._read_rv
        fresh = self._clock() - self._known_at < self.config.eval_reread_s
        if known is not None and watched is not None and rv and fresh and rv == watched():
            return known
        body = self.api.get_eval(self.ref.namespace, self.ref.name, not_older_than=self._read_rv)
        self._remember(body)
        return body

    def _remember(self, body: dict[str, Any] | None) -> None:
        """Keep `body` (the eval as read or as a write returned it) and its
        resourceVersion for `_read_eval`, without its managed fields, which no pass reads
        (~480 KB of JSON at 10,000 inline tasks: the creator's entry lists every task).
        None (a 409: someone else wrote): the next pass reads theirs from etcd."""
        meta = (body.get("metadata") or {}) if body is not None else {}
        meta.pop("managedFields", None)
        self._read_rv = str(meta.get("resourceVersion") or "")
        self._known, self._known_at = body, self._clock()

    def run_pass(self) -> PassResult:
        """One pass: read, fold finished pods in, write status once, clean up, create."""
        api, ref, now = self.api, self.ref, self._clock()
        body = self._read_eval()
        meta = (body or {}).get("metadata") or {}
        if body is None or meta.get("uid") != ref.uid or meta.get("deletionTimestamp"):
            return PassResult(PassState.DONE)
        rv = str(meta.get("resourceVersion"))  # NB: `_remember` holds it as `_read_rv`
        generation = int(meta.get("generation") or 0)
        previous: Mapping[str, Any] = body.get("status") or {}
        pods = self._own_pods(body, api.list_pods(ref.namespace, ref.uid))

        if is_terminal(previous):
            # Finished before (maybe by an earlier process): only clean up leftovers.
            ledger_before = _ledger_of(previous)
            keep, release = _dispose(
                self._fresh(pods, ledger_before), ledger_before, self._retention(body)
            )
            if pods:
                before = self._archive_hook(body, ledger_before, [], now)
                api.settle(ref.namespace, keep=keep, release=release, create=[], before=before)
            return PassResult(PassState.DONE, released=len(pods))

        packed = previous.get("ledger")
        try:
            resolved = self._resolve(body, started=bool(packed))
            ledger = self._load_ledger(packed, resolved)
            if self._pod_refused is not None:
                raise _ConfigProblem(
                    f"spec.trial.template: the API server refused the trial pod: "
                    f"{self._pod_refused}",
                    reason=cond.REASON_INVALID_SPEC,
                    terminal=True,
                )
        except _ConfigProblem as problem:
            return self._config_error(body, rv, generation, previous, pods, problem, now)

        spec, tasks = resolved.spec, resolved.tasks
        plan = RetryPlan.from_policy(spec.retry)
        if not self._timing_restored:
            # NB: a new leader (or a restarted operator) waits out the backoffs in status
            self._timing_restored = True
            self._not_before.update(restore(previous, self._pacer, now=now))
        # Pods to let go once status is written: recorded (now or before) or unexplainable.
        done: list[Mapping[str, Any]] = []
        live: set[tuple[int, int]] = set()
        # Live slots whose pod waits for admission (a scheduling gate: queueing.py).
        waiting: set[tuple[int, int]] = set()
        recorded: list[Recorded] = []
        # The pods of `recorded` (held until a status write holds their outcome).
        folded: list[Mapping[str, Any]] = []
        # Pods whose attempt an earlier pass recorded and that are still held: their
        # archive or release failed (the store is down?) or the operator restarted.
        held = 0
        # NB: grader pods (the stability check's) are the checker's, never trial attempts
        grader_pods = [pod for pod in pods if is_grader_pod(pod)]
        pods = [pod for pod in pods if not is_grader_pod(pod)]
        pods, taken = self._taken_holders(pods, ledger, now)
        was_running, self._running = self._running, {}

        for pod in pods:
            key = pod_key(pod)
            if key is None or key.task >= ledger.n_tasks or key.trial >= ledger.trials:
                logger.warning("%s: pod %s has no valid slot labels", ref.name, _name(pod))
                done.append(pod)
                continue
            if _name(pod) != pod_name(ref, key):
                # NB: its labels were changed: they no longer name the attempt it runs.
                logger.warning("%s: pod %s has another attempt's labels", ref.name, _name(pod))
                done.append(pod)
                continue
            slot = (key.task, key.trial)
            current = ledger.next_attempt(*slot)
            if ledger.is_final(*slot) or key.attempt < current:
                done.append(pod)  # recorded before, not yet released: only release it
                held += 1
                continue
            if key.attempt > current:
                # NB: cannot happen (attempt a+1 is created only after a is in status);
                # such a pod is not explainable by this ledger, so it is not counted.
                logger.warning("%s: pod %s is ahead of the ledger", ref.name, _name(pod))
                done.append(pod)
                continue
            verdict = self._unended(pod, spec, now, was_running)
            if verdict is None:
                live.add(slot)
                if waiting_for_admission(pod):
                    waiting.add(slot)
                else:
                    self._note_unschedulable(body, pod, now)
                continue
            recorded.append(_fold(ledger, plan, tasks, key, verdict, _duration(pod), pod))
            done.append(pod)
            folded.append(pod)

        self._report_unschedulable(body, now)
        live |= self._expected_slots()
        for key, name, holder in self._taken_slots(ledger, live, taken):
            # The attempt's pod name is taken by a pod no pass lists: that attempt is lost,
            # the next one gets a new name.
            if holder is None or self._signer.owns(holder, ref.uid):
                # Our pod, whose labels were changed or removed: released (if not gone).
                message = (
                    f"pod {name} is no longer recognisable as this attempt's pod "
                    "(its labels were changed); it is released"
                )
                if holder is not None:
                    done.append(holder)
            else:
                # NB: someone took the name first: never counted, never touched.
                message = (
                    f"pod {name} holds this attempt's name but was not created by the "
                    "operator; it is not touched"
                )
                task_id = tasks[key.task].id
                self._emit_once(
                    body,
                    events.trial_name_taken(
                        pod=name, task_id=task_id, trial=key.trial, attempt=key.attempt
                    ),
                )
            verdict = Verdict(Outcome.INFRA_ERROR, LOST, message)
            recorded.append(_fold(ledger, plan, tasks, key, verdict, None))

        start_problem = self._note_start_failures(
            recorded, spec, ledger, [task.id for task in tasks]
        )
        # NB: past spec.activeDeadlineSeconds the eval ends as a Job does (deadline.py),
        # also while its grader stability check runs (it is active until complete)
        checking = spec.grading.stability_check is not None and not _check_done(previous)
        active = not ledger.complete or checking
        late = deadline_message(body, now) if active else None
        drained = self._stop_message if active and not late else None
        usage = usage_after(previous, recorded, n_tasks=len(tasks))
        allowance = check_budget(
            spec.budget,
            attempts=ledger.attempts_recorded,
            live=len(live),
            cost_usd=usage.total.cost_usd,
            pending=ledger.pending,
        )
        exhausted = allowance.exhausted if active and not (late or drained) else None
        changed = (
            None if ledger.complete or late or drained or exhausted else _pins_broken(resolved)
        )
        stopping = start_problem is not None or any(
            why is not None for why in (late, drained, exhausted, changed)
        )
        archiving = self._archiver is not None
        archive_error = self._archiver.failing(ref.uid) if self._archiver is not None else None
        # NB: with a record store, held pods waiting for their archive count against
        # parallelism (and, once the store is failing, so do this pass's records): while
        # the store is down the eval pauses instead of piling up held pods.
        waiting_now = held + (len(recorded) if archive_error is not None else 0)
        capacity = spec.parallelism - len(live) - (waiting_now if archiving else 0)
        running = len(live) - len(waiting)
        queued = queue_of(spec) is not None
        if queued:
            # NB: never more pods in the queue than it admits (queueing.py)
            capacity = min(capacity, ahead_capacity(running=running, waiting=len(waiting)))
        if allowance.may_start is not None:
            # NB: spec.budget.maxAttempts: never a pod past it (passhat.trials.budget)
            capacity = min(capacity, allowance.may_start)
        # NB: finished pods whose keep or release has not gone out yet count against
        # new pods beyond `release_backlog_max` or `parallelism`, whichever is larger: a
        # release is two writes to a create's one, so on a saturated API server the
        # backlog (pods holding our finalizer, and the operator's memory) grew without
        # bound (#22: 5,000 after 8 minutes); below `parallelism` it stalled every wave
        releasing = api.releasing(ref.namespace, ref.uid)
        backlog_max = max(self.config.release_backlog_max, spec.parallelism)
        capacity = min(capacity, backlog_max - releasing)
        create_budget = self._pacer.budget(capacity)
        may_create = not stopping and self._pacer.may_create(pods_ended=bool(recorded))
        # NB: a retry recorded by this pass waits its backoff from now, this pass included
        waits = dict(self._not_before)
        for item in recorded:
            slot = (item.key.task, item.key.trial)
            if item.final:
                waits.pop(slot, None)
            else:
                waits[slot] = now + item.retry_delay_s
        to_create = (
            self._plan_creates(ledger, live, create_budget, now, waits) if may_create else []
        )
        conditions = previous.get("conditions") or []
        archive_waiting = len(recorded) + held + releasing if archiving else 0
        check = self._check(
            spec,
            tasks,
            ledger,
            previous,
            grader_pods,
            now,
            ready=not (stopping or live or (archive_waiting and "graderCheck" not in previous)),
        )
        if grader_pods and spec.grading.stability_check is None:
            done.extend(grader_pods)  # NB: cannot be: no check, no grader pod of ours
        # NB: as a Job is Complete only once no pod holds its tracking finalizer, the
        # eval is not Complete while a pod is let go after this pass's write or in flight:
        # `kubectl wait --for=condition=Complete` then finds every pod as it stays (kept
        # and labelled recorded, a grader pod's transcript emptied) or gone. The release
        # wakes the daemon (Kube.on_released), whose next pass writes Complete. A pod with
        # nothing left to release (ours out, Terminating for someone else's finalizer or
        # its grace) is let go already: `Kube.settle` sends nothing for it.
        letting_go = releasing + sum(
            1
            for pod in (*done, *(check.keep if check else ()), *(check.release if check else ()))
            if not let_go_already(pod)
        )

        status: dict[str, Any] | None = None
        creating = 0 if self._pacer.refusal else len(to_create)
        progress = previous.get("progress") or {}
        idle = (
            not recorded
            and not to_create
            and not stopping
            and (previous.get("taskSources") or []) == resolved.pins
            and "ledger" in previous
            and previous.get("observedGeneration") == generation
            and progress.get("running") == running
            and progress.get("waiting", 0) == len(waiting)
            and self._pacer.conditions(conditions, generation=generation, now=now) == conditions
            and not (
                archiving
                and (
                    archive_waiting
                    or ledger.complete
                    or condition_status(previous, cond.ARCHIVE_PENDING) == "True"
                )
            )
        )
        checked = check.done if check is not None else spec.grading.stability_check is None
        finished = (
            ledger.complete and not live and not archive_waiting and not letting_go and checked
        )
        if finished or (
            check is not None
            and (check.status != previous.get("graderCheck") or check.create or check.keep)
        ):
            # NB: a finishing pass always writes status: the daemon stops after it
            idle = False
        defer = self._defer_write(
            recorded,
            now,
            # NB: the pass that makes every slot final writes now: Complete waits for it
            plain=not (stopping or ledger.complete or start_problem) and check is None,
        )
        if defer is not None:
            # NB: nothing of this pass's outcomes leaves memory: their pods stay held and
            # are folded in again by the pass that writes; only creates that need none of
            # them go out now (fresh slots, not the retries of what was just recorded)
            just = {(item.key.task, item.key.trial) for item in recorded}
            to_create = (
                self._plan_creates(ledger, live | just, create_budget, now, waits)
                if may_create
                else []
            )
            held_now = {id(pod) for pod in folded}
            done = [pod for pod in done if id(pod) not in held_now]
            recorded, idle = [], True
        # NB: when idle nothing changed; skip recomputing the summary (CPU on big evals).
        if start_problem is not None:
            status = config_error_status(
                previous=previous,
                message=start_problem,
                reason=cond.REASON_FIRST_ATTEMPTS_FAILED,
                terminal=True,
                generation=generation,
                now=now,
            )
            status["ledger"] = ledger.pack()
            if not usage.empty:
                status["usage"] = usage.as_status(n_tasks=len(tasks))
        elif not idle:
            status = build_status(
                StatusInputs(
                    spec=spec,
                    task_ids=[task.id for task in tasks],
                    ledger=ledger,
                    # NB: a queued pod starts gated: it waits until Kueue admits it
                    running=running + (0 if queued else creating),
                    waiting=len(waiting) + (creating if queued else 0),
                    generation=generation,
                    previous=previous,
                    now=now,
                    infra_error_threshold=self.config.infra_error_threshold,
                    max_listed=self.config.max_listed_tasks,
                    infra_errors_by_reason=infra_errors_by_reason(
                        previous,
                        [(item.verdict.reason, item.verdict.is_infra_error) for item in recorded],
                    ),
                    archive_waiting=archive_waiting,
                    letting_go=letting_go,
                    archive_error=archive_error,
                    task_sources=resolved.pins,
                    grader_check=check.status if check is not None else previous.get("graderCheck"),
                    grader_condition=check.condition() if check is not None else None,
                    suite=suite_of(body),
                )
            )
            status["conditions"] = self._pacer.conditions(
                status["conditions"], generation=generation, now=now
            )
            timing = timing_status(waits, self._pacer, now=now)
            if timing is not None:
                status["timing"] = timing
            if not usage.empty:
                status["usage"] = usage.as_status(n_tasks=len(tasks))
            if late is not None:
                status = deadline_exceeded_status(
                    status, message=late, generation=generation, now=now
                )
            elif drained is not None:
                status = ended_status(
                    status,
                    condition=cond.STOPPED,
                    reason=cond.REASON_DRAINED,
                    message=drained,
                    generation=generation,
                    now=now,
                )
            elif exhausted is not None:
                status = budget_exhausted_status(
                    status,
                    message=exhausted,
                    reason=allowance.reason,
                    has_gate=spec.gate is not None,
                    generation=generation,
                    now=now,
                )
            elif changed is not None:
                status = config_error_status(
                    previous=status,
                    message=changed,
                    reason=cond.REASON_TASKS_CHANGED,
                    terminal=True,
                    generation=generation,
                    now=now,
                )
        patch = _status_patch(status, previous) if status is not None else None
        stored: Mapping[str, Any] = previous
        if status is None or patch is None:
            status = None
        else:
            sent = self._clock()
            try:
                written = api.patch_eval_status(ref.namespace, ref.name, rv, patch)
            except Conflict:
                self._remember(None)  # NB: someone else wrote: read theirs
                return PassResult(PassState.CONFLICT)
            self._remember(written)
            stored = written.get("status") or {}
            self._written_at, self._write_s = now, max(0.0, self._clock() - sent)
            self._after_write(
                body, previous, status, recorded, start_problem or changed, now, tasks=len(tasks)
            )
        if check is not None and not _check_stored(stored, check):
            # NB: an older CRD prunes status.graderCheck: without its ledger in status no
            # grader pod may be made (exactly once rests on it)
            self._emit_once(body, events.grader_check_pruned())
            check, finished = None, False

        # From here on the recorded outcomes are safe in status.
        # NB: a stopped eval lets every pod go, also the live ones (they are deleted).
        keep, release = _dispose(
            self._fresh([*pods, *grader_pods] if stopping else done, ledger),
            ledger,
            self._retention(body),
        )
        let_go = len(keep) + len(release)
        created = 0
        if let_go or to_create:
            # NB: pod bodies are built one slow-start batch at a time (pacing.py)
            try:
                paced = create_paced(
                    api,
                    ref.namespace,
                    to_create,
                    lambda k: self._signer.sign(
                        build_pod(eval_ref=ref, spec=spec, task=tasks[k.task], key=k)
                    ),
                    self._pacer,
                    keep=keep,
                    release=release,
                    before=self._archive_hook(body, ledger, recorded, now) if let_go else None,
                )
            except ApiError as err:
                if not _refused_for_good(err):
                    raise
                # NB: the next pass, right away, stops the eval with a ConfigError naming
                # the cause.
                self._pod_refused = str(err)
                return PassResult(PassState.CONFLICT, recorded, 0, let_go, status)
            created = paced.created
            names = {pod_name(ref, key): key for key in to_create}
            self._taken = {names[name]: name for name in paced.taken if name in names}
            for key in to_create[: paced.created]:
                if key not in self._taken:
                    self._expected[key] = now
            event = self._pacer.event() if paced.report else None
            if event is not None:
                self._emit(body, event)
            if paced.refusal is not None:
                return PassResult(PassState.CONTINUE, recorded, created, let_go, status)
        if check is not None and (check.create or check.keep or check.release):
            settled = self._settle_check(check)
            if settled is None:
                return PassResult(PassState.CONFLICT, recorded, created, let_go, status)
            created += settled
        if stopping:
            return PassResult(PassState.DONE, recorded, 0, let_go, status)
        more = created < len(to_create) or len(to_create) == create_budget < capacity
        state = PassState.DONE if finished else PassState.CONFLICT if more else PassState.CONTINUE
        return PassResult(state, recorded, created, let_go, status, again_in_s=defer)

    # -- pieces of the pass -------------------------------------------------------------------

    def _defer_write(self, recorded: list[Recorded], now: float, *, plain: bool) -> float | None:
        """Seconds until this pass's outcomes must be written, when it leaves them unwritten
        (None: it writes now). A pass that only recorded outcomes (nothing stops, finishes
        or checks) writes at most once per `status_interval_s`, as the Job controller
        batches a Job's pod events for a second (`syncJobBatchPeriod`): the creates of
        fresh slots go out at once, the outcomes wait, their pods held, for the pass that
        writes. Nothing leaves memory unwritten: that pass folds the same pods in again.

        A slow write stretches the interval to its duration over `status_write_share`
        (at most `status_interval_max_s`): a large eval's status write costs the API
        server and the pass in proportion to the whole object, not to what changed."""
        config = self.config
        interval = config.status_interval_s
        if interval > 0 and config.status_write_share > 0:
            stretched = min(self._write_s / config.status_write_share, config.status_interval_max_s)
            interval = max(interval, stretched)
        due = self._written_at + interval - now
        if not recorded or not plain or interval <= 0 or due <= 0:
            return None
        if any(item.verdict.reason == LOST for item in recorded):
            return None  # NB: read from a taken name once (_taken_holders), not from a pod
        if self._pacer.refusal is not None:
            return None  # NB: an ended pod frees quota once: a quota retry per end, not per pass
        return due

    def _fresh(
        self, pods: Sequence[Mapping[str, Any]], ledger: SlotLedger | None
    ) -> list[Mapping[str, Any]]:
        """`pods`, where one whose attempt `ledger` holds is listed as not ended read again
        (a GET; left out when gone): whether it is kept or deleted must not rest on a
        lagging list's older copy (a pod an earlier pass recorded, listed as running)."""
        fresh: list[Mapping[str, Any]] = []
        for pod in pods:
            if _recorded_in(ledger, pod) and not _ended(pod):
                current = self.api.get_pod(self.ref.namespace, _name(pod))
                if current is None or _uid(current) != _uid(pod):
                    continue
                pod = current
            fresh.append(pod)
        return fresh

    def _retention(self, body: Mapping[str, Any]) -> str:
        """The eval's `spec.podRetention` (read raw: also for an eval whose spec no longer
        parses), `all` where the pods are still needed: without a record store the grader
        stability check reads its sampled attempts' transcripts from their kept pods."""
        spec = body.get("spec") or {}
        retention = spec.get("podRetention") or RETAIN_ALL
        if retention not in _RETENTIONS:
            return RETAIN_ALL
        if self._archiver is None and (spec.get("grading") or {}).get("stabilityCheck"):
            return RETAIN_ALL
        return str(retention)

    def _check(
        self,
        spec: EvalSpec,
        tasks: list[Task],
        ledger: SlotLedger,
        previous: Mapping[str, Any],
        grader_pods: list[dict[str, Any]],
        now: float,
        *,
        ready: bool,
    ) -> CheckStep | None:
        """The stability check's pass (None: the spec asks for none, or the trials are not
        all final and archived yet)."""
        if spec.grading.stability_check is None or not ledger.complete or not ready:
            return None
        return self._checker.step(
            spec=spec,
            tasks=tasks,
            ledger=ledger,
            previous=previous.get("graderCheck"),
            pods=grader_pods,
            now=now,
        )

    def _settle_check(self, check: CheckStep) -> int | None:
        """Create, keep and release the check's grader pods (after the status write);
        the pods created, None when the API server refused them for good (the next pass
        records those gradings as grader errors)."""
        try:
            paced = create_paced(
                self.api,
                self.ref.namespace,
                check.create,
                lambda key: self._signer.sign(check.build(key)),
                self._pacer,
                keep=check.keep,
                release=check.release,
            )
        except ApiError as err:
            if not _refused_for_good(err):
                raise
            self._checker.note_refused(str(err))
            return None
        self._checker.note_taken(paced.taken, check.create)
        return paced.created

    def _own_pods(
        self, body: Mapping[str, Any], pods: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """The listed pods the operator made for this eval; each other one (our labels
        copied onto a pod someone else created) is reported once and left alone."""
        own: list[dict[str, Any]] = []
        foreign: list[str] = []
        for pod in pods:
            if self._signer.owns(pod, self.ref.uid):
                own.append(pod)
            else:
                foreign.append(_name(pod))
        for name in foreign:
            if len(self._foreign) >= _MAX_FOREIGN_REPORTED:
                break  # NB: events are not a log: a flood of look-alikes is not echoed
            if name not in self._foreign:
                self._foreign.add(name)
                self._emit_once(body, events.foreign_pod(pod=name))
        return own

    def _archive_hook(
        self,
        body: Mapping[str, Any],
        ledger: SlotLedger | None,
        recorded: list[Recorded],
        now: float,
    ) -> Callable[[Mapping[str, Any]], None] | None:
        """What runs before each pod is let go: archive its attempt if the ledger holds it.

        Attempts recorded by this pass are archived without looking for an earlier copy
        (none can exist: an attempt is archived only once its outcome is in status);
        attempts an earlier pass recorded are looked up first and archived only if absent.
        """
        archiver = self._archiver
        if archiver is None or ledger is None:
            return None
        resolved = self._resolved[1] if self._resolved is not None else None
        if resolved is None:
            try:
                resolved = self._resolve(body, started=True)
            except _ConfigProblem:
                resolved = None
        task_ids = (
            [task.id for task in resolved.tasks]
            if resolved is not None
            else [f"task-{index}" for index in range(ledger.n_tasks)]
        )
        spec = resolved.spec if resolved is not None else None
        main = str(spec.main_container.get("name")) if spec is not None else ""
        manifest = manifest_of(body, task_ids)
        fresh = {
            item.key: RecordedAttempt(item.task_id, item.key, item.verdict, item.final)
            for item in recorded
        }
        ref = self.ref

        def archive(pod: Mapping[str, Any]) -> None:
            key = pod_key(pod)
            if key is None or not _recorded_in(ledger, pod) or key.task >= len(task_ids):
                return  # NB: not a recorded attempt of this eval: nothing to archive
            attempt = fresh.get(key) or self._recorded_before(pod, key, ledger, spec, task_ids, now)
            archiver.archive(
                ref,
                pod=pod if "status" in pod else None,
                attempt=attempt,
                manifest=manifest,
                main_container=main,
                fresh=key in fresh,
            )

        return archive

    def _recorded_before(
        self,
        pod: Mapping[str, Any],
        key: PodKey,
        ledger: SlotLedger,
        spec: EvalSpec | None,
        task_ids: list[str],
        now: float,
    ) -> RecordedAttempt:
        """An attempt an earlier pass recorded, described again from its pod.

        A terminal pod classifies as it did then. Otherwise (the classifier's grace
        periods, a spec that no longer resolves) the ledger says what it can: a final
        attempt's slot state, else an infra error (only those are retried).
        """
        slot = (key.task, key.trial)
        final = ledger.is_final(*slot) and key.attempt == ledger.attempts(*slot) - 1
        verdict = self._classify(pod, spec, now) if spec is not None and "status" in pod else None
        if verdict is None:
            state = ledger.state(*slot) if final else SlotState.INFRA_ERROR
            outcome = {
                SlotState.PASS: Outcome.PASS,
                SlotState.FAIL: Outcome.FAIL,
            }.get(state, Outcome.INFRA_ERROR)
            verdict = Verdict(
                outcome, "recorded", "recorded by an earlier pass; its pod no longer says why"
            )
        return RecordedAttempt(task_ids[key.task], key, verdict, final)

    def _load_ledger(self, packed: Any, resolved: _Resolved) -> SlotLedger:
        n_tasks, trials = len(resolved.tasks), resolved.spec.trials
        if not packed:
            return SlotLedger(n_tasks, trials)
        try:
            ledger = SlotLedger.unpack(str(packed))
        except LedgerError as err:
            raise _ConfigProblem(
                f"status.ledger: {err}", reason=cond.REASON_INVALID_SPEC, terminal=True
            ) from None
        if (ledger.n_tasks, ledger.trials) != (n_tasks, trials):
            raise _ConfigProblem(
                f"spec: the eval has {n_tasks} tasks x {trials} trials but its recorded "
                f"ledger has {ledger.n_tasks} x {ledger.trials} (tasks changed after start)",
                reason=cond.REASON_INVALID_SPEC,
                terminal=True,
            )
        return ledger

    def _unended(
        self, pod: Mapping[str, Any], spec: EvalSpec, now: float, running: Mapping[str, str]
    ) -> Verdict | None:
        """`_classify`, skipped for a pod the last pass found running (in `running`) that
        has not changed since (same uid and resourceVersion: the same object).

        Safe because such a pod's verdict (None) depended on the pod alone: it was not
        being deleted and had no container waiting on an image or config error, the only
        states whose verdict changes with the clock (grace periods); and while no rule
        applies, the spec's grading and timeout settings shape no verdict. At 1,000 pods
        in flight this saves classifying each of them again on every pass (#22)."""
        meta = pod.get("metadata") or {}
        uid, version = str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")
        stamped = bool(uid and version)
        if stamped and running.get(uid) == version:
            self._running[uid] = version
            return None
        facts = self._facts(pod, spec, now)
        verdict = self._verdict(pod, facts, now)
        if verdict is None and stamped and not facts.deleting and facts.waiting is None:
            self._running[uid] = version
        return verdict

    def _classify(self, pod: Mapping[str, Any], spec: EvalSpec, now: float) -> Verdict | None:
        return self._verdict(pod, self._facts(pod, spec, now), now)

    def _facts(self, pod: Mapping[str, Any], spec: EvalSpec, now: float) -> PodFacts:
        return pod_facts(
            dict(pod),
            grading=spec.grading,
            timeout_is=spec.trial.timeout_is,
            now=now,
            image_error_grace_s=self.config.image_error_grace_s,
        )

    def _verdict(self, pod: Mapping[str, Any], facts: PodFacts, now: float) -> Verdict | None:
        verdict = classify_facts(facts, POD_RULES)
        if verdict is not None:
            return verdict
        deleted_at = parse_timestamp((pod.get("metadata") or {}).get("deletionTimestamp"))
        if deleted_at is not None and now > deleted_at + self.config.deleted_pod_grace_s:
            # NB: deletionTimestamp already includes the grace period; a pod still not
            # terminal well past it lost its kubelet (or was deleted by someone else).
            return verdict_for_vanished_pod()
        return None

    def _note_start_failures(
        self, recorded: list[Recorded], spec: EvalSpec, ledger: SlotLedger, task_ids: list[str]
    ) -> str | None:
        """The ConfigError message when no attempt can start its containers.

        True when every attempt that ended in this process hit an image or container-config
        error, at least min(parallelism, slots) of them did, and no slot was ever graded
        (a single pass or fail in the ledger proves the template can run). Counting every
        attempt, not only first ones, keeps the rule working after an operator restart,
        when only retries may be left to observe.
        """
        for item in recorded:
            attempt = (item.key.task, item.key.trial, item.key.attempt)
            self._ended.add(attempt)
            if item.verdict.reason in (IMAGE_ERROR, CONFIG_ERROR):
                self._start_failures.add(attempt)
                self._start_failure_message = item.verdict.message or item.verdict.reason
        needed = min(spec.parallelism, ledger.slots)
        ended, failed = len(self._ended), len(self._start_failures)
        if not ended or failed != ended or failed < needed:
            return None
        if any(tally.graded for tally in ledger.tallies(task_ids)):
            return None
        return (
            f"spec.trial.template: every trial attempt so far ({failed}) failed to start: "
            f"{self._start_failure_message}"
        )

    def _plan_creates(
        self,
        ledger: SlotLedger,
        live: set[tuple[int, int]],
        capacity: int,
        now: float,
        waits: Mapping[tuple[int, int], float],
    ) -> list[PodKey]:
        keys: list[PodKey] = []
        if capacity <= 0:
            return keys
        for slot in ledger.pending_slots():
            if slot in live:
                continue
            if waits.get(slot, 0.0) > now:
                continue
            keys.append(PodKey(slot[0], slot[1], ledger.next_attempt(*slot)))
            if len(keys) >= capacity:
                break
        return keys

    def _after_write(
        self,
        body: Mapping[str, Any],
        previous: Mapping[str, Any],
        status: Mapping[str, Any],
        recorded: list[Recorded],
        config_message: str | None,
        now: float,
        *,
        tasks: int,
    ) -> None:
        """Side effects that must follow a successful status write, once per recorded item."""
        retried: list[events.RetryNote] = []
        exhausted: list[events.RetryNote] = []
        for item in recorded:
            slot = (item.key.task, item.key.trial)
            if item.final:
                self._not_before.pop(slot, None)
            else:
                self._not_before[slot] = now + item.retry_delay_s
            if self._on_recorded is not None:
                self._on_recorded(self.ref, item)
            if item.verdict.is_infra_error:
                note = events.RetryNote(
                    task_id=item.task_id,
                    trial=item.key.trial,
                    attempt=item.key.attempt,
                    reason=item.verdict.reason,
                    delay_s=item.retry_delay_s,
                    message=item.verdict.message,
                )
                (exhausted if item.final else retried).append(note)
        if not previous.get("startTime") and status.get("startTime"):
            spec = body.get("spec") or {}
            self._emit(
                body,
                events.started(
                    tasks=tasks,
                    trials=int(spec.get("trials") or 0),
                    parallelism=int(spec.get("parallelism") or 0),
                    gate=spec.get("gate"),
                ),
            )
        # NB: one event per burst (this pass's attempts), not one per pod
        if retried:
            progress = status.get("progress") or {}
            total = int(progress.get("retries") or len(retried))
            self._emit(body, events.trials_retried(retried, retries_total=total))
        if exhausted:
            self._emit(body, events.retries_exhausted(exhausted))
        refused = [
            f"task {item.task_id} trial {item.key.trial} attempt {item.key.attempt}: "
            f"result JSON {item.spend_problem}"
            for item in recorded
            if item.spend_problem is not None
        ]
        if refused:
            self._emit(body, events.spend_invalid(refused))
        if self._on_status is not None:
            self._on_status(self.ref, status)
        if config_message is not None:
            self._emit(body, events.config_error(field="", message=config_message))
        elif condition_status(status, cond.FAILED) == "True" and not is_terminal(previous):
            self._emit(body, events.deadline_exceeded(str(status.get("message") or "")))
        elif condition_status(status, cond.STOPPED) == "True" and not is_terminal(previous):
            self._emit(body, events.stopped(str(status.get("message") or "")))
        elif condition_status(status, cond.BUDGET_EXHAUSTED) == "True" and not is_terminal(
            previous
        ):
            self._emit(body, events.budget_exhausted(str(status.get("message") or "")))
        elif is_terminal(status) and not is_terminal(previous):
            self._emit(body, events.completed(status))
            gate = status.get("gate")
            if isinstance(gate, Mapping):
                self._emit(
                    body,
                    events.gate_result(
                        metric=str(gate["metric"]),
                        k=int(gate["k"]),
                        minimum=float(gate["min"]),
                        value=float(gate["value"]),
                        passed=bool(gate["passed"]),
                    ),
                )

    def _config_error(
        self,
        body: Mapping[str, Any],
        rv: str,
        generation: int,
        previous: Mapping[str, Any],
        pods: list[dict[str, Any]],
        problem: _ConfigProblem,
        now: float,
    ) -> PassResult:
        # NB: an eval waiting for its tasks' ConfigMap waits no longer than its deadline
        late = None if problem.terminal else deadline_message(body, now)
        status = config_error_status(
            previous=previous,
            message=problem.message,
            reason=problem.reason,
            terminal=problem.terminal or late is not None,
            generation=generation,
            now=now,
        )
        if late is not None:
            status = deadline_exceeded_status(status, message=late, generation=generation, now=now)
        written: dict[str, Any] | None = None
        patch = _status_patch(status, previous)
        if patch is not None:
            try:
                stored = self.api.patch_eval_status(self.ref.namespace, self.ref.name, rv, patch)
            except Conflict:
                self._remember(None)
                return PassResult(PassState.CONFLICT)
            self._remember(stored)
            written = status
            if self._on_status is not None:
                self._on_status(self.ref, status)
            if late is not None:
                self._emit(body, events.deadline_exceeded(late))
            else:
                self._emit(body, events.config_error(field="", message=problem.message))
        if pods:
            ledger = _ledger_of(previous)
            keep, release = _dispose(self._fresh(pods, ledger), ledger, self._retention(body))
            before = self._archive_hook(body, ledger, [], now)
            self.api.settle(
                self.ref.namespace, keep=keep, release=release, create=[], before=before
            )
        state = PassState.DONE if problem.terminal or late else PassState.CONTINUE
        return PassResult(state, released=len(pods), status=written)

    def _taken_holders(
        self, pods: list[dict[str, Any]], ledger: SlotLedger, now: float
    ) -> tuple[list[dict[str, Any]], dict[PodKey, tuple[str, dict[str, Any] | None]]]:
        """(pods, taken) where the pod list and the creates disagree, decided by a GET.

        The pod list may lag the API server (a watch-fed cache, `podcache.py`). Two things
        show it: a create of the last pass found its name taken (409), and a pod this loop
        created is still not listed `expectation_grace_s` later. For each such name one
        GET, a consistent read, decides: a pod the list should show (ours, the eval's
        labels naming that attempt, not recorded) is that attempt's own pod, added to
        `pods` and counted as usual; an expected pod that is gone (its finalizer stripped
        by hand) was simply not created, and its slot is created again; any other holder
        goes into `taken` (a pod no pass counts: `_taken_slots`)."""
        listed = {_name(pod) for pod in pods}
        self._expected = {
            key: at
            for key, at in self._expected.items()
            if pod_name(self.ref, key) not in listed and _current(ledger, key)
        }
        grace = self.config.expectation_grace_s
        overdue = {key for key, at in self._expected.items() if now - at >= grace}
        names = {key: pod_name(self.ref, key) for key in overdue}
        names.update(self._taken)
        self._taken = {}
        taken: dict[PodKey, tuple[str, dict[str, Any] | None]] = {}
        found: list[dict[str, Any]] = []
        for key, name in sorted(names.items()):
            if name in listed:
                continue
            holder = self.api.get_pod(self.ref.namespace, name)
            if holder is not None and self._is_listable(holder, key):
                found.append(holder)
                self._expected[key] = now  # NB: live; asked again only if still not listed
            elif holder is None and key in overdue:
                self._expected.pop(key, None)  # NB: never an outcome: created again
            else:
                self._expected.pop(key, None)
                taken[key] = (name, holder)
        return [*pods, *found], taken

    def _is_listable(self, pod: Mapping[str, Any], key: PodKey) -> bool:
        """Whether `pod` is attempt `key`'s own pod as the pod list selects it: ours, the
        eval's uid label, labels naming `key`, not labelled recorded."""
        labels = (pod.get("metadata") or {}).get("labels") or {}
        return (
            self._signer.owns(pod, self.ref.uid)
            and labels.get(LABEL_EVAL_UID) == self.ref.uid
            and LABEL_RECORDED not in labels
            and pod_key(pod) == key
        )

    def _expected_slots(self) -> set[tuple[int, int]]:
        """Slots whose current attempt this loop created and no pod list has shown yet
        (not yet `expectation_grace_s` old, or found by a GET): they count as live, so a
        lagging list neither gets them created again nor `parallelism` exceeded. The Job
        controller's expectations, with a consistent GET where it would wait."""
        return {(key.task, key.trial) for key in self._expected}

    def _taken_slots(
        self,
        ledger: SlotLedger,
        live: set[tuple[int, int]],
        taken: Mapping[PodKey, tuple[str, dict[str, Any] | None]],
    ) -> list[tuple[PodKey, str, dict[str, Any] | None]]:
        """The attempts whose create found the name taken in the last pass and that are
        still their slot's current attempt with no pod of theirs listed since, with the
        holder a GET read (`_taken_holders`).

        A pass creates only what its pod list did not show, and a holder that is the
        attempt's own pod was counted by `_taken_holders`, so these names belong to a pod
        no pass counts: a trial pod whose labels were changed or removed (or one labelled
        recorded by hand), or someone else's. Without this the slot would stall,
        re-creating a name that is taken, forever.
        """
        return [
            (key, name, holder)
            for key, (name, holder) in sorted(taken.items())
            if (key.task, key.trial) not in live
            and key.task < ledger.n_tasks
            and key.trial < ledger.trials
            and not ledger.is_final(key.task, key.trial)
            and ledger.next_attempt(key.task, key.trial) == key.attempt
        ]

    def _note_unschedulable(
        self, body: Mapping[str, Any], pod: Mapping[str, Any], now: float
    ) -> None:
        """Note a pod the scheduler has not placed for a while (reported once per pass)."""
        condition = next(
            (
                item
                for item in (pod.get("status") or {}).get("conditions") or []
                if item.get("type") == "PodScheduled"
            ),
            None,
        )
        if not condition or condition.get("status") != "False":
            return
        if condition.get("reason") != "Unschedulable":
            return
        created = parse_timestamp((pod.get("metadata") or {}).get("creationTimestamp"))
        if created is None or now - created < self.config.unschedulable_grace_s:
            return
        message = str(condition.get("message") or "no node fits the pod")
        self._unschedulable[_name(pod)] = (now - created, message)

    def _report_unschedulable(self, body: Mapping[str, Any], now: float) -> None:
        """One TrialPodUnschedulable event for the pods this pass noted, at most one per
        `unschedulable_event_interval_s` per eval (a quota-less 5,000-pod eval on a full
        cluster would otherwise post 5,000 events)."""
        noted, self._unschedulable = self._unschedulable, {}
        if not noted:
            return
        last = self._unschedulable_reported_at
        if last is not None and now - last < self.config.unschedulable_event_interval_s:
            return
        self._unschedulable_reported_at = now
        name, (waited, message) = max(noted.items(), key=lambda item: (item[1][0], item[0]))
        self._emit(
            body,
            events.unschedulable(pods=len(noted), pod=name, waited_s=waited, message=message),
        )

    def _emit_once(self, body: Mapping[str, Any], event: events.Event) -> None:
        """Post `event` (and log it) unless this loop posted the same one before."""
        if event.message not in self._reported:
            self._reported.add(event.message)
            logger.warning("%s: %s", self.ref.name, event.message)
            self._emit(body, event)

    def _emit(self, body: Mapping[str, Any], event: events.Event) -> None:
        if self._post_event is not None:
            self._post_event(body, event)


def _current(ledger: SlotLedger, key: PodKey) -> bool:
    """Whether `key` is its slot's current attempt in `ledger` (not recorded, not final)."""
    return (
        key.task < ledger.n_tasks
        and key.trial < ledger.trials
        and not ledger.is_final(key.task, key.trial)
        and ledger.next_attempt(key.task, key.trial) == key.attempt
    )


def _check_done(status: Mapping[str, Any]) -> bool:
    """Whether status.graderCheck says the stability check ended."""
    check = status.get("graderCheck")
    return isinstance(check, Mapping) and check.get("phase") == "Done"


def _check_stored(stored: Mapping[str, Any], check: CheckStep) -> bool:
    """Whether the API server kept the check's ledger that this pass wrote (or read)."""
    kept = stored.get("graderCheck")
    return isinstance(kept, Mapping) and kept.get("ledger") == check.status["ledger"]


def _pins_broken(resolved: _Resolved) -> str | None:
    """The ConfigError message when a pinned tasksFrom ConfigMap changed since the start."""
    problems = resolved.pin_check.problems() if resolved.pin_check is not None else []
    return _tasks_changed_message(problems) if problems else None


def _tasks_changed_message(problems: list[str]) -> str:
    return (
        f"spec.tasksFrom: {'; '.join(problems)}; the eval runs only the tasks it started "
        "with: restore the ConfigMap's data, or create a new eval"
    )


def _refused_for_good(err: ApiError) -> bool:
    """Whether a pod create failed in a way no retry can fix: a body the API server cannot
    decode (400: a field of the wrong type the CRD and the model let through, e.g.
    `hostNetwork: "true"`), one too large (413), an invalid pod (422), PodSecurity (403)."""
    if err.verb != "create":
        return False
    if err.status in (400, 413, 422):
        return True
    return err.status == 403 and "violates PodSecurity" in str(err)


def _fold(
    ledger: SlotLedger,
    plan: RetryPlan,
    tasks: list[Task],
    key: PodKey,
    verdict: Verdict,
    duration_s: float | None,
    pod: Mapping[str, Any] | None = None,
) -> Recorded:
    """Record attempt `key`'s verdict in `ledger` (final unless the retry plan retries it),
    with what its result JSON says it spent (`pod`: the attempt's, when it has one)."""
    final = plan.is_final(verdict, key.attempt)
    ledger.record(key.task, key.trial, key.attempt, verdict, final=final)
    delay = 0.0 if final else plan.delay(key.attempt)
    result = pod_result(pod) if pod is not None else None
    spend, problem = spend_of(result)
    return Recorded(
        tasks[key.task].id,
        key,
        verdict,
        final,
        duration_s,
        delay,
        spend=spend,
        resources=resources_of(result),
        spend_problem=problem,
    )


def _uid(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid"))


def _name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name"))


def _status_patch(new: Mapping[str, Any], old: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch turning status `old` into `new` (None when they are equal).

    A merge patch merges nested objects, so keys of `old` that `new` lacks (at any depth)
    are set to null, which deletes them.
    """
    if dict(new) == dict(old):
        return None
    return _merge_diff(new, old)


def _merge_diff(new: Mapping[str, Any], old: Mapping[str, Any]) -> dict[str, Any]:
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            patch[key] = _merge_diff(value, before)
        else:
            patch[key] = value
    return patch
