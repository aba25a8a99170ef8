"""One reconcile pass of one eval: the level-triggered loop that makes accounting exact.

A pass reads everything it decides on from the API server, never from memory:

1. GET the eval (spec, `status.ledger`, resourceVersion).
2. LIST its unrecorded pods: eval-uid label, no `recorded` label (a consistent read, not
   a cache).
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
same name. An outcome is never inferred from a missing pod. The only in-memory state is
retry backoff, the create pacing and the image-error ConfigError counts; losing them on a
restart means retrying sooner, never counting differently.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from passhat.api import conditions as cond
from passhat.api.errors import SpecError
from passhat.api.load import config_map_names, parse_spec, resolve_tasks
from passhat.api.spec import EvalSpec, Task
from passhat.operator import events
from passhat.operator.archive import Archiver, RecordedAttempt, manifest_of
from passhat.operator.config import OperatorConfig
from passhat.operator.deadline import deadline_exceeded_status, deadline_message
from passhat.operator.kube import ApiError, Conflict, EvalApi
from passhat.operator.ownership import PodSigner
from passhat.operator.pacing import CreatePacer, create_paced
from passhat.operator.pods import (
    EvalRef,
    PodKey,
    build_pod,
    pod_key,
    pod_name,
)
from passhat.operator.status import (
    StatusInputs,
    build_status,
    condition_status,
    config_error_status,
    infra_errors_by_reason,
    is_terminal,
)
from passhat.operator.taskpin import PinCheck, pin_problems, pins_of
from passhat.trials.classify_pod import (
    classify_pod,
    parse_timestamp,
    verdict_for_vanished_pod,
)
from passhat.trials.ledger import LedgerError, SlotLedger, SlotState
from passhat.trials.outcomes import CONFIG_ERROR, IMAGE_ERROR, LOST, Outcome, Verdict
from passhat.trials.retry import RetryPlan

__all__ = ["EvalLoop", "PassResult", "PassState", "Recorded"]

logger = logging.getLogger(__name__)

# ForeignTrialPod events per eval and operator process, at most.
_MAX_FOREIGN_REPORTED = 10


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


@dataclass
class PassResult:
    """What a pass did; `status` is the status it wrote (None when it wrote none)."""

    state: PassState
    recorded: list[Recorded] = field(default_factory=list)
    created: int = 0
    released: int = 0
    status: dict[str, Any] | None = None


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
    pods: list[Mapping[str, Any]], ledger: SlotLedger | None
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(keep, release): finished pods whose attempt `ledger` holds are kept (released and
    labelled recorded); every other pod is released and deleted."""
    keep = [pod for pod in pods if _ended(pod) and _recorded_in(ledger, pod)]
    kept = {id(pod) for pod in keep}
    return keep, [pod for pod in pods if id(pod) not in kept]


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
    ) -> None:
        self.api = api
        self.ref = ref
        self.config = config or OperatorConfig()
        self._clock = clock
        self._post_event = post_event
        self._on_recorded = on_recorded
        self._on_status = on_status
        self._archiver = archiver
        self._signer = PodSigner(self.config.pod_key)
        self._resolved: tuple[int, _Resolved] | None = None
        # In memory only (a restart forgets them; see the module docstring):
        self._not_before: dict[tuple[int, int], float] = {}
        self._ended: set[tuple[int, int, int]] = set()
        self._start_failures: set[tuple[int, int, int]] = set()
        self._start_failure_message = ""
        self._pod_refused: str | None = None
        # Creates that found their pod's name taken by a pod no pass counts (see _taken_slots).
        self._taken: dict[PodKey, str] = {}
        # Slow start and backoff of this eval's creates (quota, throttling).
        self._pacer = CreatePacer(config=self.config, clock=clock)
        self._reported: set[str] = set()
        # This pass's unschedulable pods (name, waited_s, message); the last event's time.
        self._unschedulable: dict[str, tuple[float, str]] = {}
        self._unschedulable_reported_at: float | None = None
        # Look-alike pods reported (a ForeignTrialPod event each, up to a cap).
        self._foreign: set[str] = set()

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

    def run_pass(self) -> PassResult:
        """One pass: read, fold finished pods in, write status once, clean up, create."""
        api, ref, now = self.api, self.ref, self._clock()
        body = api.get_eval(ref.namespace, ref.name)
        meta = (body or {}).get("metadata") or {}
        if body is None or meta.get("uid") != ref.uid or meta.get("deletionTimestamp"):
            return PassResult(PassState.DONE)
        rv = str(meta.get("resourceVersion"))
        generation = int(meta.get("generation") or 0)
        previous: Mapping[str, Any] = body.get("status") or {}
        pods = self._own_pods(body, api.list_pods(ref.namespace, ref.uid))

        if is_terminal(previous):
            # Finished before (maybe by an earlier process): only clean up leftovers.
            ledger_before = _ledger_of(previous)
            keep, release = _dispose(list(pods), ledger_before)
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
        # Pods to let go once status is written: recorded (now or before) or unexplainable.
        done: list[Mapping[str, Any]] = []
        live: set[tuple[int, int]] = set()
        recorded: list[Recorded] = []
        # Pods whose attempt an earlier pass recorded and that are still held: their
        # archive or release failed (the store is down?) or the operator restarted.
        held = 0

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
            verdict = self._classify(pod, spec, now)
            if verdict is None:
                live.add(slot)
                self._note_unschedulable(body, pod, now)
                continue
            recorded.append(_fold(ledger, plan, tasks, key, verdict, _duration(pod)))
            done.append(pod)

        self._report_unschedulable(body, now)
        for key, name in self._taken_slots(ledger, live):
            # The attempt's pod name is taken by a pod no pass lists: that attempt is lost,
            # the next one gets a new name.
            holder = api.get_pod(ref.namespace, name)
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
        # NB: past spec.activeDeadlineSeconds the eval ends as a Job does (deadline.py).
        late = None if ledger.complete else deadline_message(body, now)
        changed = None if ledger.complete or late else _pins_broken(resolved)
        stopping = start_problem is not None or late is not None or changed is not None
        archiving = self._archiver is not None
        archive_error = self._archiver.failing(ref.uid) if self._archiver is not None else None
        # NB: with a record store, held pods waiting for their archive count against
        # parallelism (and, once the store is failing, so do this pass's records): while
        # the store is down the eval pauses instead of piling up held pods.
        waiting_now = held + (len(recorded) if archive_error is not None else 0)
        capacity = spec.parallelism - len(live) - (waiting_now if archiving else 0)
        budget = self._pacer.budget(capacity)
        may_create = not stopping and self._pacer.may_create(pods_ended=bool(recorded))
        to_create = self._plan_creates(ledger, live, budget, now) if may_create else []
        conditions = previous.get("conditions") or []
        archive_waiting = (
            len(recorded) + held + api.releasing(ref.namespace, ref.uid) if archiving else 0
        )

        status: dict[str, Any] | None = None
        progress = previous.get("progress") or {}
        idle = (
            not recorded
            and not to_create
            and not stopping
            and (previous.get("taskSources") or []) == resolved.pins
            and "ledger" in previous
            and previous.get("observedGeneration") == generation
            and progress.get("running") == len(live)
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
        elif not idle:
            status = build_status(
                StatusInputs(
                    spec=spec,
                    task_ids=[task.id for task in tasks],
                    ledger=ledger,
                    running=len(live) + (0 if self._pacer.refusal else len(to_create)),
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
                    archive_error=archive_error,
                    task_sources=resolved.pins,
                )
            )
            status["conditions"] = self._pacer.conditions(
                status["conditions"], generation=generation, now=now
            )
            if late is not None:
                status = deadline_exceeded_status(
                    status, message=late, generation=generation, now=now
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
        if status is None or patch is None:
            status = None
        else:
            try:
                api.patch_eval_status(ref.namespace, ref.name, rv, patch)
            except Conflict:
                return PassResult(PassState.CONFLICT)
            self._after_write(body, previous, status, recorded, start_problem or changed, now)

        # From here on the recorded outcomes are safe in status.
        # NB: a stopped eval lets every pod go, also the live ones (they are deleted).
        keep, release = _dispose(list(pods) if stopping else done, ledger)
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
            event = self._pacer.event() if paced.report else None
            if event is not None:
                self._emit(body, event)
            if paced.refusal is not None:
                return PassResult(PassState.CONTINUE, recorded, created, let_go, status)
        if stopping:
            return PassResult(PassState.DONE, recorded, 0, let_go, status)
        finished = ledger.complete and not live and not archive_waiting
        more = len(to_create) == budget < capacity
        state = PassState.DONE if finished else PassState.CONFLICT if more else PassState.CONTINUE
        return PassResult(state, recorded, created, let_go, status)

    # -- pieces of the pass -------------------------------------------------------------------

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

    def _classify(self, pod: Mapping[str, Any], spec: EvalSpec, now: float) -> Verdict | None:
        verdict = classify_pod(
            dict(pod),
            grading=spec.grading,
            timeout_is=spec.trial.timeout_is,
            now=now,
            image_error_grace_s=self.config.image_error_grace_s,
        )
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
        self, ledger: SlotLedger, live: set[tuple[int, int]], capacity: int, now: float
    ) -> list[PodKey]:
        keys: list[PodKey] = []
        if capacity <= 0:
            return keys
        for slot in ledger.pending_slots():
            if slot in live:
                continue
            if self._not_before.get(slot, 0.0) > now:
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
    ) -> None:
        """Side effects that must follow a successful status write, once per recorded item."""
        for item in recorded:
            slot = (item.key.task, item.key.trial)
            if item.final:
                self._not_before.pop(slot, None)
            else:
                self._not_before[slot] = now + item.retry_delay_s
            if self._on_recorded is not None:
                self._on_recorded(self.ref, item)
            if item.verdict.is_infra_error:
                if item.final:
                    event = events.retries_exhausted(
                        task_id=item.task_id,
                        trial=item.key.trial,
                        attempts=item.key.attempt + 1,
                        reason=item.verdict.reason,
                    )
                else:
                    event = events.trial_retried(
                        task_id=item.task_id,
                        trial=item.key.trial,
                        attempt=item.key.attempt,
                        reason=item.verdict.reason,
                        delay_s=item.retry_delay_s,
                        message=item.verdict.message,
                    )
                self._emit(body, event)
        if self._on_status is not None:
            self._on_status(self.ref, status)
        if config_message is not None:
            self._emit(body, events.config_error(field="", message=config_message))
        elif condition_status(status, cond.FAILED) == "True" and not is_terminal(previous):
            self._emit(body, events.deadline_exceeded(str(status.get("message") or "")))
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
                self.api.patch_eval_status(self.ref.namespace, self.ref.name, rv, patch)
            except Conflict:
                return PassResult(PassState.CONFLICT)
            written = status
            if self._on_status is not None:
                self._on_status(self.ref, status)
            if late is not None:
                self._emit(body, events.deadline_exceeded(late))
            else:
                self._emit(body, events.config_error(field="", message=problem.message))
        if pods:
            ledger = _ledger_of(previous)
            keep, release = _dispose(list(pods), ledger)
            before = self._archive_hook(body, ledger, [], now)
            self.api.settle(
                self.ref.namespace, keep=keep, release=release, create=[], before=before
            )
        state = PassState.DONE if problem.terminal or late else PassState.CONTINUE
        return PassResult(state, released=len(pods), status=written)

    def _taken_slots(
        self, ledger: SlotLedger, live: set[tuple[int, int]]
    ) -> list[tuple[PodKey, str]]:
        """The attempts whose create found the name taken in the last pass and that are
        still their slot's current attempt with no pod of theirs listed since.

        A pass creates only what its consistent LIST did not show, so a 409 means the
        name belongs to a pod no pass counts: a trial pod whose labels were changed or
        removed (or one labelled recorded by hand). Without this the slot would stall,
        re-creating a name that is taken, forever.
        """
        taken, self._taken = self._taken, {}
        return [
            (key, name)
            for key, name in sorted(taken.items())
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
) -> Recorded:
    """Record attempt `key`'s verdict in `ledger` (final unless the retry plan retries it)."""
    final = plan.is_final(verdict, key.attempt)
    ledger.record(key.task, key.trial, key.attempt, verdict, final=final)
    delay = 0.0 if final else plan.delay(key.attempt)
    return Recorded(tasks[key.task].id, key, verdict, final, duration_s, delay)


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
