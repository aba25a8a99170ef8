"""`passhat regrade NAME -n NS --pods`: each grading a pod in the eval's namespace.

The operator's stability check runs the eval's grader (`spec.grading.grader`: image,
command, env) as pods with the operator's rights; this runs the same pods
(`gradercheck.build_grader_pod`) with the **caller's** rights, so an LLM judge that needs
the cluster's network and Secrets is regraded where it runs for real, on demand, and a
user can do no more than they could with `kubectl run`: they need `create`, `get` and
`delete` on pods and `get` on `pods/log` in the namespace.

Each pod is named `<eval>-regrade-<run>-<n>` and labelled `passhat.dev/regrade=<run>`. It
carries no passhat finalizer, owner or eval label, so the operator neither counts nor
touches it (nor reports it as a look-alike); it keeps the Kueue queue label of the
eval's template, so a queue's quota holds. A pod is deleted once its verdict is read, and
every pod still there when the run ends (Ctrl-C included) is deleted then.

The verdict is the stability check's: the last log line when it is a result JSON, else
the exit code (0 pass, 1 fail, anything else a grader error); a pod past its deadline
(`activeDeadlineSeconds` = `--timeout`) or not ended `--timeout` + 120 s after it started
(or, not queued, after it was made) is a grader error, never a verdict.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from passhat.api.errors import UsageError
from passhat.api.spec import EvalSpec, Task
from passhat.grading.grader import Grade
from passhat.grading.noise import TranscriptGrades
from passhat.operator.gradercheck import (
    GRADER_CONTAINER,
    LOG_TAIL_BYTES,
    LOG_TAIL_LINES,
    MAX_TRANSCRIPT_BYTES,
    GradingKey,
    build_grader_pod,
    grader_error,
    grader_pod_grade,
)
from passhat.operator.kube import ApiError, Kube
from passhat.operator.pods import QUEUE_NAME_LABEL, EvalRef, PodKey

__all__ = ["LABEL_REGRADE", "PodGrader"]

LABEL_REGRADE = "passhat.dev/regrade"


class PodGrader:
    """Grades one transcript per call in a pod of the eval's grader (a `regrade.GradeOne`)."""

    def __init__(
        self,
        kube: Kube,
        *,
        namespace: str,
        name: str,
        uid: str,
        spec: EvalSpec,
        timeout_s: int,
        poll_s: float = 1.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        grader = spec.grading.grader
        if grader is None or not grader.image:
            raise UsageError(
                f"--pods: the eval {namespace}/{name} declares no spec.grading.grader with an "
                "image (what runs in the pods); regrade on this machine with --grader CMD"
            )
        self.kube = kube
        self.ref = EvalRef(namespace, name, uid)
        self.spec = spec
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.clock = clock
        self.sleep = sleep
        self.run = uuid.uuid4().hex[:6]
        self._numbers = itertools.count()
        self._lock = threading.Lock()
        self._live: set[str] = set()

    def __call__(self, grades: TranscriptGrades, number: int, path: str) -> Grade:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
        if len(text.encode()) > MAX_TRANSCRIPT_BYTES:
            return grader_error(
                f"the transcript is larger than {MAX_TRANSCRIPT_BYTES // 1024} KiB, more than "
                "a pod annotation holds: regrade it on this machine with --grader CMD"
            )
        pod = self._pod(grades, number, text)
        pod_name = str(pod["metadata"]["name"])
        try:
            self._create(pod)
            return self._await(pod_name)
        finally:
            self._delete(pod_name)

    def cleanup(self) -> None:
        """Delete every pod this run made that is still there."""
        with self._lock:
            names = sorted(self._live)
        for pod_name in names:
            self._delete(pod_name)

    # -- one pod ------------------------------------------------------------------------------

    def _pod(self, grades: TranscriptGrades, number: int, text: str) -> dict[str, Any]:
        with self._lock:
            serial = next(self._numbers)
        pod = build_grader_pod(
            eval_ref=self.ref,
            spec=self.spec,
            task=Task(id=grades.task_id),
            attempt=PodKey(0, grades.trial, grades.attempt),
            key=GradingKey(serial, number),
            transcript=text,
            timeout_seconds=self.timeout_s,
        )
        meta = pod["metadata"]
        # NB: not the operator's: no eval labels, finalizer or owner (it would count the
        # pod, or report it as a look-alike); the queue label stays (the quota holds)
        labels = {LABEL_REGRADE: self.run}
        if QUEUE_NAME_LABEL in meta["labels"]:
            labels[QUEUE_NAME_LABEL] = meta["labels"][QUEUE_NAME_LABEL]
        meta["labels"] = labels
        meta["name"] = f"{self.ref.name[:40].rstrip('-.')}-regrade-{self.run}-{serial}"
        del meta["finalizers"], meta["ownerReferences"]
        return pod

    def _create(self, pod: Mapping[str, Any]) -> None:
        namespace = self.ref.namespace
        try:
            self.kube._request(
                "create", "POST", f"/api/v1/namespaces/{namespace}/pods", body=dict(pod)
            )
        except ApiError as err:
            raise UsageError(
                f"--pods: cannot create the grader pod in namespace {namespace} "
                f"(regrading runs with your rights: create, get, delete pods, get pods/log): "
                f"{err}"
            ) from None
        with self._lock:
            self._live.add(str(pod["metadata"]["name"]))

    def _await(self, pod_name: str) -> Grade:
        namespace = self.ref.namespace

        def read_log(name: str) -> bytes:
            return self.kube.read_pod_log(
                namespace, name, GRADER_CONTAINER, LOG_TAIL_BYTES, tail_lines=LOG_TAIL_LINES
            )

        while True:
            pod = self.kube.get_pod(namespace, pod_name)
            if pod is None:
                return grader_error("the grader pod was deleted before it ended")
            grade = grader_pod_grade(
                pod, timeout_s=self.timeout_s, now=self.clock(), read_log=read_log
            )
            if grade is not None:
                return grade
            self.sleep(self.poll_s)

    def _delete(self, pod_name: str) -> None:
        try:
            self.kube._request(
                "delete",
                "DELETE",
                f"/api/v1/namespaces/{self.ref.namespace}/pods/{pod_name}",
                query={"gracePeriodSeconds": "0"},
                ok_statuses=(404,),
            )
        except ApiError:
            return  # NB: kept for the end-of-run sweep (cleanup)
        with self._lock:
            self._live.discard(pod_name)
