"""Trial pods: the one pure function from (eval, task, trial, attempt) to a pod manifest.

Everything the exactly-once argument needs from a pod is fixed here and nowhere else: the
deterministic name (a re-create after an operator restart is a harmless 409), the labels
the reconcile loop reads back (task index, trial, attempt, eval uid; `recorded` once the
outcome is in status), the finalizer that keeps a finished pod around until its outcome is
in the eval's status, and the owner reference that lets garbage collection remove pods
(kept after they finish, like a Job's) with their eval. The shared-cluster
safety defaults (restricted pod security where the template is silent, no service-account
token unless asked for) are filled in here too, so the whole pod shape is one read.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from passhat.api.spec import API_VERSION, KIND, EvalSpec, Task

__all__ = [
    "ANNOTATION_TASK_ID",
    "ANNOTATION_TRANSCRIPT",
    "EVAL_FINALIZER",
    "FINALIZER",
    "LABEL_ATTEMPT",
    "LABEL_EVAL",
    "LABEL_EVAL_UID",
    "LABEL_GRADING",
    "LABEL_RECORDED",
    "LABEL_TASK",
    "LABEL_TRIAL",
    "QUEUE_NAME_LABEL",
    "RESULT_PATH",
    "RUN_AS_USER",
    "EvalRef",
    "PodKey",
    "build_pod",
    "eval_owner",
    "let_go_already",
    "pod_key",
    "pod_name",
    "restrict_container",
    "restrict_pod",
]

# Held by every trial pod until its outcome is recorded in the eval's status.
FINALIZER = "passhat.dev/trial-accounting"
# kopf's finalizer on evals (held while an eval's daemon runs, that is until it is final).
EVAL_FINALIZER = "passhat.dev/operator"
LABEL_EVAL = "passhat.dev/eval"
LABEL_EVAL_UID = "passhat.dev/eval-uid"
LABEL_TASK = "passhat.dev/task"
LABEL_TRIAL = "passhat.dev/trial"
LABEL_ATTEMPT = "passhat.dev/attempt"
# Set (with the finalizer's removal, in one patch) on a finished pod whose outcome is in
# the eval's status: the pod is kept until its eval is deleted, but no pass lists it again.
LABEL_RECORDED = "passhat.dev/recorded"
# Task ids need not be valid label values, so the id travels in an annotation.
ANNOTATION_TASK_ID = "passhat.dev/task-id"
# On grader pods (gradercheck.py): "<sample index>-<grading number>" (trial pods never
# carry it), and the transcript a grader pod grades (emptied once the pod is kept).
LABEL_GRADING = "passhat.dev/grading"
ANNOTATION_TRANSCRIPT = "passhat.dev/transcript"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
# Where a trial writes its result JSON: the container's termination-message file.
RESULT_PATH = "/dev/termination-log"
# The user a trial runs as when its template names none (the "nonroot" uid of distroless).
RUN_AS_USER = 65532

_MAX_NAME = 63
_LABEL_VALUE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class EvalRef:
    """The identity of the eval a pod belongs to: namespace, name, uid."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True, order=True)
class PodKey:
    """Which attempt a pod runs: task index, trial index, attempt number (all 0-based)."""

    task: int
    trial: int
    attempt: int


def pod_name(eval_ref: EvalRef, key: PodKey) -> str:
    """`<eval>-<hash6>-t<task>-<trial>-a<attempt>`, at most 63 characters.

    The hash of the eval's uid keeps the names of a deleted-and-recreated eval apart;
    the eval name is shortened (never the suffix) to fit.
    """
    digest = hashlib.sha256(eval_ref.uid.encode()).hexdigest()[:6]
    suffix = f"-{digest}-t{key.task}-{key.trial}-a{key.attempt}"
    prefix = eval_ref.name.replace(".", "-")[: _MAX_NAME - len(suffix)].rstrip("-")
    return f"{prefix or 'eval'}{suffix}"


def pod_key(pod: Mapping[str, Any]) -> PodKey | None:
    """The (task, trial, attempt) a pod's labels name; None when they are missing/invalid."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    try:
        key = PodKey(int(labels[LABEL_TASK]), int(labels[LABEL_TRIAL]), int(labels[LABEL_ATTEMPT]))
    except (KeyError, TypeError, ValueError):
        return None
    return key if min(key.task, key.trial, key.attempt) >= 0 else None


def let_go_already(pod: Mapping[str, Any]) -> bool:
    """Whether releasing `pod` has nothing left to do: our finalizer is out and the pod is
    being deleted (it stays, Terminating, for someone else's finalizer or its grace)."""
    meta = pod.get("metadata") or {}
    return FINALIZER not in (meta.get("finalizers") or []) and bool(meta.get("deletionTimestamp"))


def eval_owner(meta: Mapping[str, Any], uid: str) -> str | None:
    """The name of the eval with `uid` when it is the pod's controller (it made the pod,
    see `build_pod`); None otherwise."""
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("uid") == uid and ref.get("controller"):
            return str(ref.get("name"))
    return None


def _label_value(text: str) -> str:
    return _LABEL_VALUE.sub("-", text)[:63].strip("-_.")


def build_pod(*, eval_ref: EvalRef, spec: EvalSpec, task: Task, key: PodKey) -> dict[str, Any]:
    """The pod manifest of one attempt, built from `spec.trial.template`.

    Template labels and annotations are kept (ours win on conflicts), the namespace is
    always the eval's, and the template's pod spec is passed through (nodeSelector,
    tolerations, affinity, priorityClassName, ...) with passhat's settings on top.
    """
    template = copy.deepcopy(spec.trial.template)
    meta = template.get("metadata") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    if spec.queue_name:
        labels[QUEUE_NAME_LABEL] = spec.queue_name
    labels.update(
        {
            LABEL_EVAL: _label_value(eval_ref.name),
            LABEL_EVAL_UID: eval_ref.uid,
            LABEL_TASK: str(key.task),
            LABEL_TRIAL: str(key.trial),
            LABEL_ATTEMPT: str(key.attempt),
        }
    )
    annotations[ANNOTATION_TASK_ID] = task.id

    pod_spec: dict[str, Any] = template["spec"]
    pod_spec["restartPolicy"] = "Never"
    pod_spec["activeDeadlineSeconds"] = spec.trial.timeout_seconds
    if not pod_spec.get("serviceAccountName") and not pod_spec.get("serviceAccount"):
        pod_spec["automountServiceAccountToken"] = False
    restrict_pod(pod_spec)
    env = [
        {"name": "PASSHAT_EVAL", "value": eval_ref.name},
        {"name": "PASSHAT_TASK_ID", "value": task.id},
        {"name": "PASSHAT_TASK", "value": json.dumps(task.params, sort_keys=True)},
        {"name": "PASSHAT_TRIAL", "value": str(key.trial)},
        {"name": "PASSHAT_ATTEMPT", "value": str(key.attempt)},
    ]
    for kind in ("initContainers", "containers"):
        containers = pod_spec.get(kind)
        for container in containers if isinstance(containers, list) else []:
            if not isinstance(container, dict):
                continue  # NB: the API server refuses the pod (400): a ConfigError
            restrict_container(container)
            container.setdefault("terminationMessagePath", RESULT_PATH)
            container.setdefault("terminationMessagePolicy", "File")
            ours = [*env, {"name": "PASSHAT_RESULT", "value": container["terminationMessagePath"]}]
            names = {item["name"] for item in ours}
            given = container.get("env") or []
            kept = [
                item
                for item in (given if isinstance(given, list) else [])
                if not isinstance(item, dict) or item.get("name") not in names
            ]
            container["env"] = kept + ours

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(eval_ref, key),
            "namespace": eval_ref.namespace,
            "labels": labels,
            "annotations": annotations,
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


def _object(parent: dict[str, Any], key: str) -> dict[str, Any] | None:
    """`parent[key]`, created empty when unset or null; None when it is not an object
    (the API server refuses such a pod: a ConfigError, never a crash here)."""
    if parent.get(key) is None:
        parent[key] = {}
    value = parent[key]
    return value if isinstance(value, dict) else None


def restrict_pod(pod_spec: dict[str, Any]) -> None:
    """Pod-level restricted defaults where the template is silent."""
    security = _object(pod_spec, "securityContext")
    if security is None:
        return
    containers = [
        c
        for kind in ("initContainers", "containers")
        for c in pod_spec.get(kind) or []
        if isinstance(c, dict)
    ]
    as_root = security.get("runAsUser") == 0 or any(
        isinstance(c.get("securityContext"), dict) and c["securityContext"].get("runAsUser") == 0
        for c in containers
    )
    if not as_root:
        # NB: a template that asks for uid 0 (allowed only in a privileged namespace)
        # would not start under runAsNonRoot.
        security.setdefault("runAsNonRoot", True)
    # NB: with runAsNonRoot an image whose user is root (or unnamed) would not start;
    # a container's own runAsUser still wins over this pod-level default.
    security.setdefault("runAsUser", RUN_AS_USER)
    security.setdefault("seccompProfile", {"type": "RuntimeDefault"})


def restrict_container(container: dict[str, Any]) -> None:
    """Container-level restricted defaults where the template is silent."""
    security = _object(container, "securityContext")
    if security is None:
        return
    if not security.get("privileged"):
        # NB: the API server refuses privileged with allowPrivilegeEscalation false.
        security.setdefault("allowPrivilegeEscalation", False)
    capabilities = _object(security, "capabilities")
    if capabilities is None:
        return
    if capabilities.get("drop") is None:
        capabilities["drop"] = []
    drop = capabilities["drop"]
    if isinstance(drop, list) and "ALL" not in drop:
        drop.append("ALL")
