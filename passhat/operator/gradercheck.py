"""The grader stability check on a cluster: grader pods regrade a sample of transcripts.

`spec.grading.stabilityCheck` asks, once every trial slot is final (and archived), for a
seeded sample of the **graded** attempts (`passhat.grading.sample_graded`, the sample
`passhat regrade NAME --sample N --seed S` draws) to be regraded `times` times each, by
pods of `spec.grading.grader.image` running its `command`, before the eval completes.
The numbers are `passhat.grading.GraderCheck`'s, so the CLI and the operator count alike.

Exactly once, by the argument of the trial ledger (docs/operator.md): the check's own
ledger is in status (`status.graderCheck.ledger`: one mark per grading, `.` until its
verdict is in), written before any grader pod is created; a grader pod is named for its
grading (deterministic: a re-create after a restart is a harmless 409), holds the trial
finalizer until its verdict is in status, and is then only released (kept, labelled
recorded). A grading already marked is never marked again; a pod of a grading not yet
marked is classified. An operator killed anywhere finds the same ledger and the same pods.

The grader pod (`build_grader_pod`) is built by the operator alone: restricted pod
security, no service-account token unless the trial template names a service account,
the trial template's scheduling fields and the trial container's resources (all already
held to the cluster admin's grants, `policy.TrialPolicy`), `activeDeadlineSeconds` = the
grading timeout, the operator's creation mark. So it may do no more than the eval's own
trial pods. The transcript travels in a pod annotation (at most `MAX_TRANSCRIPT_BYTES`),
mounted as a file by a downward-API volume: no Secret or ConfigMap, no new RBAC, and
nothing a tenant could not already read (the transcript is its own trial's log). A
`/bin/sh` wrapper gives it on stdin as well (the contract of `passhat trial --grader`).
The verdict is the grader's last log line (a result JSON) or its exit code; a grader that
hangs (the deadline), crashes, exits 75 or never starts is a grader error, never a pass or
a fail.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from passhat.api import conditions as cond
from passhat.api.spec import API_VERSION, KIND, EvalSpec, StabilityCheck, Task
from passhat.grading import GraderCheck, TranscriptGrades, grade_of, sample_graded
from passhat.grading.grader import GRADER_ERROR, Grade
from passhat.grading.noise import Sample
from passhat.operator.archive import LogUnavailable, read_transcript
from passhat.operator.pods import (
    ANNOTATION_TASK_ID,
    ANNOTATION_TRANSCRIPT,
    FINALIZER,
    LABEL_EVAL,
    LABEL_EVAL_UID,
    LABEL_GRADING,
    QUEUE_NAME_LABEL,
    EvalRef,
    PodKey,
    pod_name,
    restrict_container,
    restrict_pod,
)
from passhat.operator.queueing import ahead_capacity, queue_of, waiting_for_admission
from passhat.records import RecordStore, StoreLayout
from passhat.records.record import AttemptRecord
from passhat.trials.classify_pod import parse_timestamp
from passhat.trials.ledger import SlotLedger, SlotState
from passhat.trials.outcomes import Outcome

__all__ = [
    "ANNOTATION_TRANSCRIPT",
    "GRADER_CONTAINER",
    "LABEL_GRADING",
    "MAX_TRANSCRIPT_BYTES",
    "CheckLedger",
    "CheckStep",
    "GradingKey",
    "StabilityChecker",
    "Transcripts",
    "build_grader_pod",
    "grader_pod_name",
    "grading_key",
    "is_grader_pod",
    "pod_log_transcripts",
    "start_ledger",
    "store_transcripts",
]

logger = logging.getLogger(__name__)

# The largest transcript passed to a grader pod: the API server caps all of a pod's
# annotations together at 256 KiB; the rest is left to the creation mark and the task id.
MAX_TRANSCRIPT_BYTES = 192 * 1024
GRADER_CONTAINER = "grader"
TRANSCRIPT_DIR = "/var/run/passhat"
TRANSCRIPT_PATH = f"{TRANSCRIPT_DIR}/transcript"
# Runs the grader's argv with the transcript on stdin (what `passhat regrade` does with
# `sh -c`); `exec` keeps the grader's exit code the container's.
_STDIN_WRAPPER = 'exec "$@" < "$PASSHAT_TRANSCRIPT"'
# How long past its timeout a grader pod that never ended (unschedulable, never started)
# is given before it counts as a grader error and is deleted.
DEADLINE_SLACK_S = 120.0
# What of a grader's log is read for its verdict (the result JSON is its last line).
LOG_TAIL_LINES = 20
LOG_TAIL_BYTES = 64 * 1024
# Bounds of status.graderCheck.
MAX_NOISY = 20
MAX_ERROR_MESSAGES = 5
_MESSAGE_CHARS = 200

# Grading marks in the ledger.
PENDING, PASS, FAIL, ERROR = ".", "p", "f", "e"
# Whole-entry marks: the sampled attempt has no archived transcript, or one too large.
MISSING, TOO_LARGE = "x", "L"

# The transcript of a recorded attempt (None: none archived).
Transcripts = Callable[[PodKey], bytes | None]


class GraderLogs(Protocol):
    """What the check asks of the API server: a grader pod, the tail of its log."""

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod as stored now; None when it does not exist."""
        ...

    def read_pod_log(
        self,
        namespace: str,
        name: str,
        container: str,
        limit_bytes: int,
        tail_lines: int | None = None,
    ) -> bytes:
        """Up to `limit_bytes` of the container's last `tail_lines` log lines."""
        ...


@dataclass(frozen=True, order=True)
class GradingKey:
    """One grading: the sampled transcript's index in the ledger, and which regrade."""

    index: int
    number: int


def is_grader_pod(pod: Mapping[str, Any]) -> bool:
    """Whether `pod` carries the grading label (a grader pod, not a trial pod)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return isinstance(labels, Mapping) and LABEL_GRADING in labels


def grading_key(pod: Mapping[str, Any]) -> GradingKey | None:
    """The grading a grader pod's label names; None when missing or malformed."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    index, _, number = str(labels.get(LABEL_GRADING, "")).partition("-")
    if not (index.isdigit() and number.isdigit()):
        return None
    return GradingKey(int(index), int(number))


def grader_pod_name(eval_ref: EvalRef, key: GradingKey) -> str:
    """`<eval>-<hash6>-g<index>-<number>`, at most 63 characters (as `pods.pod_name`)."""
    digest = hashlib.sha256(eval_ref.uid.encode()).hexdigest()[:6]
    suffix = f"-{digest}-g{key.index}-{key.number}"
    prefix = eval_ref.name.replace(".", "-")[: 63 - len(suffix)].rstrip("-")
    return f"{prefix or 'eval'}{suffix}"


# -- the check's ledger ---------------------------------------------------------------------


@dataclass
class Entry:
    """A sampled attempt and its gradings' marks."""

    key: PodKey
    marks: list[str]

    def pack(self) -> str:
        return f"{self.key.task}.{self.key.trial}.{self.key.attempt}:{''.join(self.marks)}"


@dataclass
class CheckLedger:
    """status.graderCheck.ledger: every sampled attempt and the marks of its gradings."""

    times: int
    entries: list[Entry] = field(default_factory=list)

    def pack(self) -> str:
        return ";".join(entry.pack() for entry in self.entries)

    @classmethod
    def unpack(cls, text: str, times: int) -> CheckLedger:
        """The ledger packed in `text`; ValueError when it cannot be read."""
        ledger = cls(times)
        for part in text.split(";") if text else []:
            where, _, marks = part.partition(":")
            task, trial, attempt = (int(n) for n in where.split("."))
            if marks not in (MISSING, TOO_LARGE) and (
                len(marks) != times or set(marks) - {PENDING, PASS, FAIL, ERROR}
            ):
                raise ValueError(f"bad grader check ledger entry {part!r}")
            ledger.entries.append(Entry(PodKey(task, trial, attempt), list(marks)))
        return ledger

    def pending(self) -> list[GradingKey]:
        """The gradings without a mark yet, in order."""
        return [
            GradingKey(index, number)
            for index, entry in enumerate(self.entries)
            for number, mark in enumerate(entry.marks)
            if mark == PENDING
        ]

    def is_pending(self, key: GradingKey) -> bool:
        if not 0 <= key.index < len(self.entries):
            return False
        marks = self.entries[key.index].marks
        return 0 <= key.number < len(marks) and marks[key.number] == PENDING

    def mark(self, key: GradingKey, mark: str) -> bool:
        """Record `mark` for a pending grading; False when it was not pending (recorded)."""
        if not self.is_pending(key):
            return False
        self.entries[key.index].marks[key.number] = mark
        return True

    def set_entry(self, index: int, mark: str) -> None:
        """The sampled attempt `index` cannot be regraded (MISSING, TOO_LARGE)."""
        self.entries[index].marks = [mark]

    @property
    def done(self) -> bool:
        return not self.pending()

    @property
    def done_gradings(self) -> int:
        """Gradings of regraded transcripts that ended (missing ones are not gradings)."""
        return sum(
            sum(1 for mark in entry.marks if mark in (PASS, FAIL, ERROR)) for entry in self.entries
        )


def graded_records(ledger: SlotLedger, task_ids: Sequence[str]) -> tuple[list[AttemptRecord], int]:
    """(the graded attempts as records, the infra attempts' count) from the trial ledger:
    a slot's graded attempt is its last, when the slot ended pass or fail."""
    records: list[AttemptRecord] = []
    infra = 0
    for task, task_id in enumerate(task_ids):
        for trial in range(ledger.trials):
            attempts = ledger.attempts(task, trial)
            state = ledger.state(task, trial)
            graded = ledger.is_final(task, trial) and state in (SlotState.PASS, SlotState.FAIL)
            if graded:
                outcome = Outcome.PASS if state is SlotState.PASS else Outcome.FAIL
                records.append(_record(task_id, trial, attempts - 1, outcome.value))
            infra += attempts - (1 if graded else 0)
    return records, infra


def _record(task_id: str, trial: int, attempt: int, outcome: str) -> AttemptRecord:
    return AttemptRecord(task_id=task_id, trial=trial, attempt=attempt, outcome=outcome)


def start_ledger(
    ledger: SlotLedger, task_ids: Sequence[str], check: StabilityCheck
) -> tuple[CheckLedger, Sample]:
    """The check's first ledger: `check.sample` graded attempts drawn with `check.seed`."""
    records, infra = graded_records(ledger, task_ids)
    sample = sample_graded(records, sample=check.sample, seed=check.seed)
    index = {task_id: number for number, task_id in enumerate(task_ids)}
    entries = [
        Entry(
            PodKey(index[record["task_id"]], record["trial"], record["attempt"]),
            [PENDING] * check.times,
        )
        for record in sample.chosen
    ]
    return CheckLedger(check.times, entries), Sample(sample.chosen, sample.graded, infra)


# -- where transcripts come from ------------------------------------------------------------


def store_transcripts(store: RecordStore, ref: EvalRef) -> Transcripts:
    """Transcripts from the record store the archiver wrote them to (StoreError raises:
    the pass fails and is run again)."""
    layout = StoreLayout(ref.namespace, ref.name, ref.uid)

    def read(key: PodKey) -> bytes | None:
        return store.get(layout.transcript_key(key.task, key.trial, key.attempt))

    return read


def pod_log_transcripts(
    api: GraderLogs, ref: EvalRef, *, limit: int, owns: Callable[[Mapping[str, Any]], bool]
) -> Transcripts:
    """Transcripts read from the kept trial pods (no record store: a finished pod is kept,
    with its logs, until its eval is deleted), in the archive's format; only from a pod
    the operator made (`owns`): a pod someone else made under a deleted trial pod's name
    has no transcript of this eval (as missing)."""

    def read(key: PodKey) -> bytes | None:
        pod = api.get_pod(ref.namespace, pod_name(ref, key))
        if pod is None or not owns(pod):
            return None
        try:
            return read_transcript(api, ref.namespace, pod, limit=limit)[0]
        except LogUnavailable as err:
            logger.warning("%s: transcript of %s: %s", ref.name, key, err)
            return None

    return read


# -- the grader pod -------------------------------------------------------------------------

# Fields of the trial template's pod spec a grader pod shares: where it may run and as whom,
# all already held to the cluster admin's grants (policy.TrialPolicy).
_SHARED_POD_FIELDS = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "priorityClassName",
    "runtimeClassName",
    "imagePullSecrets",
    "serviceAccountName",
    "automountServiceAccountToken",
    "securityContext",
    "schedulerName",
    "topologySpreadConstraints",
)


def build_grader_pod(
    *,
    eval_ref: EvalRef,
    spec: EvalSpec,
    task: Task,
    attempt: PodKey,
    key: GradingKey,
    transcript: str,
    timeout_seconds: int | None = None,
) -> dict[str, Any]:
    """The pod of one grading: the grader's image and command, the transcript mounted at
    `$PASSHAT_TRANSCRIPT` and given on stdin; unsigned (the loop adds the creation mark).
    `timeout_seconds`: its deadline (default: the stability check's)."""
    grader = spec.grading.grader
    check = spec.grading.stability_check
    assert grader is not None and grader.image
    if timeout_seconds is None:
        assert check is not None
        timeout_seconds = check.timeout_seconds
    template_spec = spec.trial.template.get("spec") or {}
    pod_spec: dict[str, Any] = copy.deepcopy(
        {name: template_spec[name] for name in _SHARED_POD_FIELDS if name in template_spec}
    )
    main = spec.main_container
    container: dict[str, Any] = {
        "name": GRADER_CONTAINER,
        "image": grader.image,
        "command": ["/bin/sh", "-c", _STDIN_WRAPPER, "passhat-grader", *grader.command],
        "env": [
            {"name": "PASSHAT_EVAL", "value": eval_ref.name},
            {"name": "PASSHAT_TASK_ID", "value": task.id},
            {"name": "PASSHAT_TRIAL", "value": str(attempt.trial)},
            {"name": "PASSHAT_ATTEMPT", "value": str(attempt.attempt)},
            {"name": "PASSHAT_GRADING", "value": str(key.number)},
            {"name": "PASSHAT_TRANSCRIPT", "value": TRANSCRIPT_PATH},
        ],
        "volumeMounts": [{"name": "transcript", "mountPath": TRANSCRIPT_DIR, "readOnly": True}],
        "terminationMessagePolicy": "File",
    }
    if grader.env:
        # NB: the author's first; the model refuses PASSHAT_ names, so ours are never shadowed
        container["env"][:0] = [e.model_dump(by_alias=True, exclude_none=True) for e in grader.env]
    if grader.env_from:
        container["envFrom"] = [
            e.model_dump(by_alias=True, exclude_none=True) for e in grader.env_from
        ]
    if isinstance(main.get("resources"), Mapping):
        container["resources"] = copy.deepcopy(main["resources"])
    if isinstance(main.get("imagePullPolicy"), str):
        container["imagePullPolicy"] = main["imagePullPolicy"]
    pod_spec.update(
        restartPolicy="Never",
        activeDeadlineSeconds=timeout_seconds,
        terminationGracePeriodSeconds=5,
        enableServiceLinks=False,
        containers=[container],
        volumes=[
            {
                "name": "transcript",
                "downwardAPI": {
                    "items": [
                        {
                            "path": "transcript",
                            "fieldRef": {
                                "fieldPath": f"metadata.annotations['{ANNOTATION_TRANSCRIPT}']"
                            },
                        }
                    ]
                },
            }
        ],
    )
    if not pod_spec.get("serviceAccountName"):
        pod_spec["automountServiceAccountToken"] = False
    restrict_pod(pod_spec)
    restrict_container(container)
    labels = {
        LABEL_EVAL: _label_value(eval_ref.name),
        LABEL_EVAL_UID: eval_ref.uid,
        LABEL_GRADING: f"{key.index}-{key.number}",
    }
    queue = queue_of(spec)
    if queue:
        # NB: the queue the template's label names too: without it a grader pod would run
        # outside the queue's quota (Kueue admits only labelled pods)
        labels[QUEUE_NAME_LABEL] = queue
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": grader_pod_name(eval_ref, key),
            "namespace": eval_ref.namespace,
            "labels": labels,
            "annotations": {ANNOTATION_TASK_ID: task.id, ANNOTATION_TRANSCRIPT: transcript},
            "finalizers": [FINALIZER],
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": KIND,
                    "name": eval_ref.name,
                    "uid": eval_ref.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": pod_spec,
    }


def _label_value(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", text)[:63].strip("-_.")


def _ended(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _exit_code(pod: Mapping[str, Any]) -> int | None:
    for item in (pod.get("status") or {}).get("containerStatuses") or []:
        if isinstance(item, Mapping) and item.get("name") == GRADER_CONTAINER:
            terminated = (item.get("state") or {}).get("terminated") or {}
            code = terminated.get("exitCode")
            return code if isinstance(code, int) else None
    return None


# -- one pass of the check ------------------------------------------------------------------


@dataclass
class CheckStep:
    """What a pass of the check decided: the status block, and the grader pods to create
    (after the status write), keep and release."""

    status: dict[str, Any]
    done: bool
    stable: bool | None
    keep: list[Mapping[str, Any]] = field(default_factory=list)
    release: list[Mapping[str, Any]] = field(default_factory=list)
    create: list[GradingKey] = field(default_factory=list)
    build: Callable[[GradingKey], dict[str, Any]] = lambda key: {}

    def condition(self) -> tuple[str, str, str]:
        """GraderStable as (status, reason, message)."""
        numbers = self.status
        if not self.done:
            return (
                "Unknown",
                cond.REASON_REGRADING,
                f"regrading {numbers['transcripts']} transcripts {numbers['times']} times each: "
                f"{numbers['doneGradings']}/{numbers['gradings']} gradings done",
            )
        rate, limit = numbers["noiseRate"], numbers["maxNoiseRate"]
        low, high = numbers["noiseRateInterval"]
        text = (
            f"grader noise rate {rate:.3f} (95% interval {low:.3f}-{high:.3f}; "
            f"{numbers['noisyTotal']} of {numbers['judged']} transcripts got both pass and "
            f"fail), max {limit:g}; {numbers['graderErrors']} grader errors"
        )
        if not numbers["judged"]:
            return "False", cond.REASON_NO_VERDICTS, f"no transcript got two verdicts; {text}"
        if self.stable:
            return "True", cond.REASON_NOISE_WITHIN, text
        return "False", cond.REASON_NOISE_ABOVE, text


class StabilityChecker:
    """The stability check of one eval (one per EvalLoop); state lives in status, but for
    the names a create found taken in the last pass."""

    def __init__(
        self,
        ref: EvalRef,
        transcripts: Transcripts,
        logs: GraderLogs,
        *,
        owns: Callable[[Mapping[str, Any]], bool],
    ) -> None:
        self.ref = ref
        self._transcripts = transcripts
        self._logs = logs
        self._owns = owns
        self._taken: set[GradingKey] = set()
        self._refused: str | None = None

    def note_taken(self, names: Sequence[str], keys: Sequence[GradingKey]) -> None:
        """Creates of the last pass that found the grading's name taken."""
        by_name = {grader_pod_name(self.ref, key): key for key in keys}
        self._taken = {by_name[name] for name in names if name in by_name}

    def note_refused(self, message: str) -> None:
        """The API server refused grader pods for good (400, 413, 422, PodSecurity)."""
        self._refused = message

    def step(
        self,
        *,
        spec: EvalSpec,
        tasks: Sequence[Task],
        ledger: SlotLedger,
        previous: Mapping[str, Any] | None,
        pods: Sequence[Mapping[str, Any]],
        now: float,
    ) -> CheckStep:
        """One pass: start the check, fold ended grader pods in, plan the next creates."""
        check = spec.grading.stability_check
        assert check is not None
        task_ids = [task.id for task in tasks]
        block = dict(previous or {})
        try:
            book = CheckLedger.unpack(str(block["ledger"]), check.times)
            if any(e.key.task >= len(tasks) for e in book.entries):
                raise ValueError("a sampled task is out of range")
        except (KeyError, ValueError):
            book, sample = start_ledger(ledger, task_ids, check)
            block = {
                "gradedAttempts": sample.graded,
                "infraAttemptsSkipped": sample.infra_skipped,
                "startTime": cond.timestamp(now),
                "graderErrorMessages": [],
            }
        messages: list[str] = list(block.get("graderErrorMessages") or [])
        step = CheckStep(status={}, done=False, stable=None)

        def error(key: GradingKey, message: str) -> None:
            if book.mark(key, ERROR):
                _note(messages, message)

        live: set[GradingKey] = set()
        waiting = 0
        for pod in pods:
            key = grading_key(pod)
            name = str((pod.get("metadata") or {}).get("name"))
            if key is None or name != grader_pod_name(self.ref, key):
                step.release.append(pod)
                continue
            if not book.is_pending(key):
                (step.keep if _ended(pod) else step.release).append(pod)
                continue
            verdict = self._verdict(pod, check.timeout_seconds, now)
            if verdict is None:
                live.add(key)
                waiting += waiting_for_admission(pod)
                continue
            mark, message = verdict
            if mark == ERROR:
                error(key, message)
            else:
                book.mark(key, mark)
            (step.keep if _ended(pod) else step.release).append(pod)
        for key in sorted(self._taken - live):
            self._taken_name(key, book, error, check.timeout_seconds, now)
        self._taken = set()
        if self._refused is not None:
            for key in book.pending():
                if key not in live:
                    error(key, f"the API server refused the grader pod: {self._refused}")
            self._refused = None

        budget = spec.parallelism - len(live)
        if queue_of(spec) is not None:
            # NB: as the trial pods: never more grader pods in the queue than it admits
            budget = min(budget, ahead_capacity(running=len(live) - waiting, waiting=waiting))
        bodies: dict[int, str] = {}
        for key in book.pending():
            if budget <= 0:
                break
            if key in live:
                continue
            if key.index not in bodies:
                text = self._transcript(book, key.index)
                if text is None:
                    continue
                bodies[key.index] = text
            step.create.append(key)
            budget -= 1

        def build(key: GradingKey) -> dict[str, Any]:
            attempt = book.entries[key.index].key
            return build_grader_pod(
                eval_ref=self.ref,
                spec=spec,
                task=tasks[attempt.task],
                attempt=attempt,
                key=key,
                transcript=bodies[key.index],
            )

        step.build = build
        step.done = book.done and not live
        step.status = _block(
            book,
            block=block,
            messages=messages,
            check=check,
            tasks=tasks,
            ledger=ledger,
            done=step.done,
            now=now,
        )
        step.stable = step.status.get("stable") if step.done else None
        return step

    def _taken_name(
        self,
        key: GradingKey,
        book: CheckLedger,
        error: Callable[[GradingKey, str], None],
        timeout_s: int,
        now: float,
    ) -> None:
        """A create of pending grading `key` found its name taken: by our own grader pod,
        already kept (its verdict was in a ledger status lost since: an older CRD pruned
        it), whose verdict is read again; or by someone else's pod: a grader error."""
        name = grader_pod_name(self.ref, key)
        pod = self._logs.get_pod(self.ref.namespace, name)
        if pod is not None and self._owns(pod) and grading_key(pod) == key:
            verdict = self._verdict(pod, timeout_s, now)
            if verdict is not None:
                mark, message = verdict
                if mark == ERROR:
                    error(key, message)
                else:
                    book.mark(key, mark)
            return
        error(key, f"the grader pod's name {name} is taken by a pod the operator did not create")

    def _transcript(self, book: CheckLedger, index: int) -> str | None:
        """The transcript of sampled attempt `index` as annotation text; None (and the
        entry marked) when there is none or it is too large."""
        data = self._transcripts(book.entries[index].key)
        if data is None:
            book.set_entry(index, MISSING)
            return None
        text = data.decode("utf-8", "replace")
        if len(text.encode()) > MAX_TRANSCRIPT_BYTES:
            book.set_entry(index, TOO_LARGE)
            return None
        return text

    def _verdict(
        self, pod: Mapping[str, Any], timeout_s: int, now: float
    ) -> tuple[str, str] | None:
        """(mark, grader error message) of an ended grader pod; None while it runs."""

        def read_log(name: str) -> bytes:
            return self._logs.read_pod_log(
                self.ref.namespace,
                name,
                GRADER_CONTAINER,
                LOG_TAIL_BYTES,
                tail_lines=LOG_TAIL_LINES,
            )

        grade = grader_pod_grade(pod, timeout_s=timeout_s, now=now, read_log=read_log)
        if grade is None:
            return None
        if grade.outcome is Outcome.PASS:
            return PASS, ""
        if grade.outcome is Outcome.FAIL:
            return FAIL, ""
        return ERROR, grade.message or "the grader reported an infra error"


def grader_pod_grade(
    pod: Mapping[str, Any],
    *,
    timeout_s: int,
    now: float,
    read_log: Callable[[str], bytes],
) -> Grade | None:
    """The grade of a grader pod, None while it runs: the last log line when it is a
    result JSON (`read_log(name)`: its tail), else the exit code; a pod past its deadline,
    not ended `timeout_s` + DEADLINE_SLACK_S after it started (not queued: after it was
    made), or deleted and not ended DEADLINE_SLACK_S later is a grader error. Shared by the
    stability check and `passhat regrade --pods` (regrade_pods.py)."""
    status = pod.get("status") or {}
    meta = pod.get("metadata") or {}
    if not _ended(pod):
        if waiting_for_admission(pod):
            return None  # NB: gated by a queue: its clock has not started (queueing.py)
        # NB: a queued pod is counted from its start (it may be admitted long after it
        # was made); one admitted that never starts waits, as a trial pod does, for the
        # eval's activeDeadlineSeconds
        since = parse_timestamp(
            status.get("startTime")
            if QUEUE_NAME_LABEL in (meta.get("labels") or {})
            else meta.get("creationTimestamp")
        )
        if since is not None and now > since + timeout_s + DEADLINE_SLACK_S:
            return grader_error(
                f"the grader pod did not finish within {timeout_s} s + "
                f"{DEADLINE_SLACK_S:g} s (never scheduled or started?)"
            )
        deleted = parse_timestamp(meta.get("deletionTimestamp"))
        if deleted is not None and now > deleted + DEADLINE_SLACK_S:
            return grader_error("the grader pod was deleted before it ended")
        return None
    if status.get("reason") == "DeadlineExceeded":
        return grader_error(f"the grader timed out after {timeout_s} s (killed)")
    code = _exit_code(pod)
    try:
        log = read_log(str(meta.get("name")))
    except LogUnavailable:
        log = b""
    if code is None:
        return grader_error("the grader pod ended without an exit code")
    return grade_of(code, log.decode("utf-8", "replace"))


def grader_error(message: str) -> Grade:
    return Grade(Outcome.INFRA_ERROR, GRADER_ERROR, message=message)


def _note(messages: list[str], message: str) -> None:
    message = message[:_MESSAGE_CHARS]
    if message not in messages and len(messages) < MAX_ERROR_MESSAGES:
        messages.append(message)


def _block(
    book: CheckLedger,
    *,
    block: Mapping[str, Any],
    messages: list[str],
    check: StabilityCheck,
    tasks: Sequence[Task],
    ledger: SlotLedger,
    done: bool,
    now: float,
) -> dict[str, Any]:
    """status.graderCheck from the check's ledger (GraderCheck's numbers, camelCase)."""
    grades: list[TranscriptGrades] = []
    missing = 0
    for entry in book.entries:
        if entry.marks[0] in (MISSING, TOO_LARGE):
            missing += 1
            continue
        key = entry.key
        state = ledger.state(key.task, key.trial)
        original = Outcome.PASS.value if state is SlotState.PASS else Outcome.FAIL.value
        grades.append(
            TranscriptGrades(
                tasks[key.task].id,
                key.trial,
                key.attempt,
                original=original,
                verdicts=[
                    Outcome.PASS.value if m == PASS else Outcome.FAIL.value
                    for m in entry.marks
                    if m in (PASS, FAIL)
                ],
                errors=["" for m in entry.marks if m == ERROR],
            )
        )
    result = GraderCheck(
        times=book.times,
        transcripts=grades,
        graded_attempts=int(block.get("gradedAttempts") or 0),
        infra_skipped=int(block.get("infraAttemptsSkipped") or 0),
        missing=missing,
    ).as_json(max_noisy=MAX_NOISY)
    out: dict[str, Any] = {
        "phase": "Done" if done else "Running",
        "ledger": book.pack(),
        "transcripts": result["transcripts"],
        "times": result["times"],
        "gradings": result["gradings"],
        "doneGradings": book.done_gradings,
        "judged": result["judged"],
        "noiseRate": result["noise_rate"],
        "noiseRateInterval": result["noise_rate_interval"],
        "disagreeWithOriginal": result["disagree_with_original"],
        "noisy": [
            {
                "taskId": n["task_id"],
                "trial": n["trial"],
                "attempt": n["attempt"],
                "verdicts": n["verdicts"],
                "original": n["original"],
            }
            for n in result["noisy"]
        ],
        "noisyTotal": result["noisy_total"],
        "graderErrors": result["grader_errors"],
        "graderErrorMessages": messages,
        "gradedAttempts": result["graded_attempts"],
        "infraAttemptsSkipped": result["infra_attempts_skipped"],
        "missingTranscripts": result["missing_transcripts"],
        "maxNoiseRate": check.max_noise_rate,
        "startTime": block.get("startTime") or cond.timestamp(now),
    }
    if done:
        out["stable"] = bool(result["judged"]) and result["noise_rate"] <= check.max_noise_rate
        out["completionTime"] = block.get("completionTime") or cond.timestamp(now)
    return out
