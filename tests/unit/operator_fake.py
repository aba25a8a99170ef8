"""An in-memory API server and kubelet for the reconcile loop's unit tests.

`FakeApi` implements `passhat.operator.kube.EvalApi` over dicts with the semantics the
exactly-once argument relies on: resourceVersions and 409 on a stale status write, merge
patches of status, finalizers that keep a deleted pod around (deletionTimestamp) until
the last one is removed, AlreadyExists on a second create of a name, LIST leaving out pods
labelled recorded (the loop's kept pods), and like `Kube` it keeps or releases only pods
the operator made (`foreign_touches` names the others it was asked to) and only the pod
with the uid it was given (a pod of the same name created since is left alone). It can "kill the
operator" at the N-th API call, before or after that call takes effect (a lost
response), by raising `Killed`, which no code under test catches.

`FakeKubelet` ends pods by a script: outcome per (task, trial, attempt); it never starts
a pod that carries a scheduling gate.
"""

from __future__ import annotations

import copy
import itertools
import json
import random
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from passhat.operator.config import OperatorConfig
from passhat.operator.kube import ApiError, Conflict, slim_pod
from passhat.operator.ownership import PodSigner
from passhat.operator.pods import FINALIZER, LABEL_EVAL_UID, LABEL_RECORDED, pod_key


class Killed(BaseException):
    """The operator process died at this API call (never caught by the code under test)."""


def merge_patch(target: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7386 merge patch (null deletes a key)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


# What the API server decodes strictly (a wrong JSON type is a 400, never coerced), in part.
_POD_SPEC_TYPES: dict[str, type] = {
    "hostNetwork": bool,
    "hostPID": bool,
    "hostIPC": bool,
    "automountServiceAccountToken": bool,
    "terminationGracePeriodSeconds": int,
    "activeDeadlineSeconds": int,
}
# The API server's limit on a request body (3 MiB): a larger pod is a 413.
MAX_REQUEST_BYTES = 3 * 1024 * 1024


def decode_refusal(pod: Mapping[str, Any]) -> ApiError | None:
    """The error the API server answers a create of `pod` with before validating it: 413
    for a body over 3 MiB, 400 for a field of the wrong JSON type (a subset of them)."""
    if len(json.dumps(pod)) > MAX_REQUEST_BYTES:
        return ApiError("create", 413, "Request entity too large: limit is 3145728")
    for field, kind in _POD_SPEC_TYPES.items():
        value = pod["spec"].get(field)
        if value is not None and (
            not isinstance(value, kind) or isinstance(value, bool) != (kind is bool)
        ):
            return ApiError(
                "create",
                400,
                f'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal '
                f"{type(value).__name__} into Go struct field PodSpec.spec.{field} of type "
                f"{'bool' if kind is bool else 'int64'}",
            )
    return None


class FakeApi:
    """A dict-backed API server for one namespace's evals, pods and ConfigMaps."""

    def __init__(self, *, rng: random.Random | None = None, clock: Callable[[], float]) -> None:
        self.evals: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.config_maps: dict[str, dict[str, Any]] = {}
        self.clock = clock
        self.rng = rng or random.Random(0)
        self._rv = itertools.count(1)
        self._uid = itertools.count(1)
        self.calls = 0
        # The loop's eval reads: the resourceVersion each asked "not older than" ("" for a
        # quorum read). With `lagging_cache`, a read not older than X returns the eval as
        # it was at X (once per X): a watch cache that has seen nothing since, the most a
        # real one may lag under that guarantee.
        self.eval_reads: list[str] = []
        self.lagging_cache = False
        self.lagged_reads = 0
        self._eval_at: dict[str, dict[str, Any] | None] = {}
        self.kill_at: int | None = None
        self.writes: dict[str, int] = {
            "create": 0,
            "status": 0,
            "keep": 0,
            "release": 0,
            "delete": 0,
        }
        self.created_names: list[str] = []
        self.logs: dict[str, bytes] = {}
        # Pods the operator was asked to keep or release but did not make (never touched).
        self.foreign_touches: list[str] = []
        # Mutating admission run on each created pod (e.g. Kueue's scheduling gate).
        self.on_create: Callable[[dict[str, Any]], None] | None = None
        self._signer = PodSigner(OperatorConfig().pod_key)

    # -- fault injection ------------------------------------------------------------------

    def _call(self) -> bool:
        """Count a call; raise Killed before it applies, or return True = kill after it."""
        self.calls += 1
        if self.kill_at is not None and self.calls >= self.kill_at:
            self.kill_at = None
            if self.rng.random() < 0.5:
                raise Killed("before")
            return True
        return False

    def _next_rv(self) -> str:
        return str(next(self._rv))

    # -- test setup ---------------------------------------------------------------------------

    def add_eval(self, namespace: str, name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Store a new eval and return it."""
        body = {
            "apiVersion": "passhat.dev/v1alpha1",
            "kind": "ConsistencyEval",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{next(self._uid)}",
                "generation": 1,
                "resourceVersion": self._next_rv(),
            },
            "spec": copy.deepcopy(dict(spec)),
        }
        self.evals[name] = body
        return body

    def bump_eval(self, name: str) -> None:
        """Another writer touched the eval (e.g. kopf's annotations): new resourceVersion."""
        self.evals[name]["metadata"]["resourceVersion"] = self._next_rv()

    # -- EvalApi ------------------------------------------------------------------------------

    def get_eval(
        self, namespace: str, name: str, *, not_older_than: str = ""
    ) -> dict[str, Any] | None:
        self._call()
        self.eval_reads.append(not_older_than)
        if self.lagging_cache and not_older_than in self._eval_at:
            stale = self._eval_at.pop(not_older_than)
            current = self.evals.get(name)
            if current is None or current["metadata"]["resourceVersion"] != not_older_than:
                self.lagged_reads += 1
            return stale
        body = self.evals.get(name)
        if body is None:
            return None
        self._remember(body)
        return copy.deepcopy(body)

    def _remember(self, body: Mapping[str, Any]) -> None:
        """The eval as it is at its resourceVersion now (what a lagging cache may show)."""
        if self.lagging_cache:
            self._eval_at[str(body["metadata"]["resourceVersion"])] = copy.deepcopy(dict(body))

    def list_pods(self, namespace: str, eval_uid: str) -> list[dict[str, Any]]:
        self._call()
        # NB: slimmed, as Kube lists them: the loop must not read what a LIST drops
        return [
            slim_pod(self._versioned(pod))
            for pod in self.pods.values()
            if pod["metadata"]["labels"].get(LABEL_EVAL_UID) == eval_uid
            and LABEL_RECORDED not in pod["metadata"]["labels"]
        ]

    @staticmethod
    def _versioned(pod: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of a stored pod whose resourceVersion changes with everything else in it,
        as the API server's does with every write (tests change pods in place without a new
        version): the loop skips classifying a running pod whose version it saw."""
        out = copy.deepcopy(dict(pod))
        meta = out.setdefault("metadata", {})
        stored = meta.pop("resourceVersion", "")
        data = json.dumps(out, sort_keys=True, default=str)
        meta["resourceVersion"] = f"{stored}-{zlib.crc32(data.encode())}"
        return out

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._call()
        pod = self.pods.get(name)
        return self._versioned(pod) if pod is not None else None

    def get_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._call()
        body = self.config_maps.get(name)
        return self._config_map_with_metadata(name, body) if body is not None else None

    def get_config_map_meta(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._call()
        body = self.config_maps.get(name)
        return self._config_map_with_metadata(name, body)["metadata"] if body is not None else None

    @staticmethod
    def _config_map_with_metadata(name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """A stored ConfigMap as the API server returns it: a test may store only `data`;
        then its uid is fixed by its name and its resourceVersion changes with its data."""
        out = copy.deepcopy(dict(body))
        meta = out.setdefault("metadata", {})
        meta.setdefault("name", name)
        meta.setdefault("uid", f"cm-uid-{name}")
        data = json.dumps(out.get("data") or {}, sort_keys=True)
        meta.setdefault("resourceVersion", str(zlib.crc32(data.encode())))
        return out

    def patch_eval_status(
        self, namespace: str, name: str, resource_version: str, status: Mapping[str, Any]
    ) -> dict[str, Any]:
        kill_after = self._call()
        body = self.evals[name]
        if body["metadata"]["resourceVersion"] != resource_version:
            raise Conflict("patch", 409, "the object has been modified")
        body.setdefault("status", {})
        merge_patch(body["status"], status)
        body["metadata"]["resourceVersion"] = self._next_rv()
        self.writes["status"] += 1
        self._remember(body)
        if kill_after:
            raise Killed("after status write")
        return copy.deepcopy(body)

    def settle(
        self,
        namespace: str,
        *,
        keep: Sequence[Mapping[str, Any]],
        release: Sequence[Mapping[str, Any]],
        create: Sequence[Mapping[str, Any]],
        before: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> list[str]:
        """Like the real one, in a random order (it runs them in parallel). A `before`
        that raises an Exception leaves its pod held, as the real one does."""
        taken = [pod["metadata"]["name"] for pod in create if pod["metadata"]["name"] in self.pods]
        ops: list[tuple[str, Mapping[str, Any]]] = [("keep", pod) for pod in keep]
        ops += [("release", pod) for pod in release]
        ops += [("create", pod) for pod in create]
        self.rng.shuffle(ops)
        for kind, pod in ops:
            if kind != "create" and before is not None:
                try:
                    before(pod)
                except Exception:
                    continue
            if kind == "keep":
                self.keep_pods(namespace, [pod])
            elif kind == "release":
                self.release_pods(namespace, [pod])
            else:
                self.create_pods(namespace, [pod])
        return taken

    def _target(self, pod: Mapping[str, Any]) -> dict[str, Any] | None:
        """The stored pod a keep or release of `pod` applies to: None when gone, replaced
        (another uid: the precondition fails) or not made by the operator."""
        if self._signer.owner_uid(pod) is None:
            self.foreign_touches.append(pod["metadata"]["name"])
            return None
        stored = self.pods.get(pod["metadata"]["name"])
        if stored is None or stored["metadata"].get("uid") != pod["metadata"].get("uid"):
            return None
        return stored

    def keep_pods(self, namespace: str, pods: Sequence[Mapping[str, Any]]) -> None:
        """One patch per pod: our finalizer out, the recorded label in (the pod stays)."""
        for pod in pods:
            name = pod["metadata"]["name"]
            kill_after = self._call()
            stored = self._target(pod)
            if stored is not None:
                finalizers = stored["metadata"].get("finalizers", [])
                if FINALIZER in finalizers:
                    finalizers.remove(FINALIZER)
                stored["metadata"]["labels"][LABEL_RECORDED] = "true"
                stored["metadata"]["resourceVersion"] = self._next_rv()
                self.writes["keep"] += 1
                self._maybe_remove(name)
            if kill_after:
                raise Killed("after keep")

    def create_pods(self, namespace: str, pods: Sequence[Mapping[str, Any]]) -> None:
        for pod in pods:
            kill_after = self._call()
            refusal = decode_refusal(pod)
            if refusal is not None:
                raise refusal
            name = pod["metadata"]["name"]
            if name not in self.pods:
                stored = copy.deepcopy(dict(pod))
                stored["metadata"]["uid"] = f"pod-uid-{next(self._uid)}"
                stored["metadata"]["resourceVersion"] = self._next_rv()
                stored["metadata"]["creationTimestamp"] = _timestamp(self.clock())
                stored["status"] = {"phase": "Pending"}
                if self.on_create is not None:
                    self.on_create(stored)
                self.pods[name] = stored
                self.created_names.append(name)
                self.writes["create"] += 1
            if kill_after:
                raise Killed("after create")

    def release_pods(self, namespace: str, pods: Sequence[Mapping[str, Any]]) -> None:
        for pod in pods:
            name = pod["metadata"]["name"]
            kill_after = self._call()
            stored = self._target(pod)
            if stored is not None and FINALIZER in stored["metadata"].get("finalizers", []):
                stored["metadata"]["finalizers"].remove(FINALIZER)
                self.writes["release"] += 1
                self._maybe_remove(name)
            if kill_after:
                raise Killed("after release")
            kill_after = self._call()
            stored = self._target(pod)
            if stored is not None and not stored["metadata"].get("deletionTimestamp"):
                self.delete_pod(name)
            if kill_after:
                raise Killed("after delete")

    def releasing(self, namespace: str, eval_uid: str) -> int:
        """Releases here are done when settle returns: none is ever in flight."""
        return 0

    def read_pod_log(
        self,
        namespace: str,
        name: str,
        container: str,
        limit_bytes: int,
        tail_lines: int | None = None,
    ) -> bytes:
        """The log the fake kubelet wrote for the pod (an API call: it may kill)."""
        kill_after = self._call()
        stored = self.pods.get(name)
        log = b"" if stored is None else self.logs.get(name, b"")
        if tail_lines is not None:
            log = b"".join(log.splitlines(keepends=True)[-tail_lines:])
        log = log[:limit_bytes]
        if kill_after:
            raise Killed("after reading a log")
        return log

    # -- the rest of the cluster ---------------------------------------------------------------

    def delete_pod(self, name: str) -> None:
        """DELETE: with finalizers left the pod only gets a deletionTimestamp."""
        stored = self.pods[name]
        self.writes["delete"] += 1
        stored["metadata"].setdefault("deletionTimestamp", _timestamp(self.clock()))
        self._maybe_remove(name)

    def _maybe_remove(self, name: str) -> None:
        stored = self.pods[name]
        if stored["metadata"].get("deletionTimestamp") and not stored["metadata"].get("finalizers"):
            del self.pods[name]

    def kept_pods(self) -> list[str]:
        """Names of pods labelled recorded (released and kept until the eval goes)."""
        return [
            name
            for name, pod in self.pods.items()
            if pod["metadata"]["labels"].get(LABEL_RECORDED) == "true"
        ]

    def pods_with_finalizer(self) -> list[str]:
        """Names of pods still holding the trial-accounting finalizer."""
        return [
            name
            for name, pod in self.pods.items()
            if FINALIZER in pod["metadata"].get("finalizers", [])
        ]


def parse_time(text: str) -> float:
    from datetime import UTC, datetime

    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def _timestamp(when: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# An attempt's scripted end: "pass", "fail", "infra" (exit 75) or "oom".
Script = Callable[[int, int, int], str]
# A grader pod's scripted end from the pod (its env, its transcript annotation): (exit
# code, log), or None for a grader that hangs (until its activeDeadlineSeconds).
GraderScript = Callable[[Mapping[str, Any]], tuple[int, str] | None]


def terminated(code: int, *, reason: str, now: float, start: float) -> dict[str, Any]:
    """A containerStatuses entry whose container terminated with `code` and `reason`."""
    return {
        "name": "agent",
        "state": {
            "terminated": {
                "exitCode": code,
                "reason": reason,
                "startedAt": _timestamp(start),
                "finishedAt": _timestamp(now),
            }
        },
    }


class FakeKubelet:
    """Ends a random subset of running pods per step, each by the script's outcome."""

    def __init__(
        self,
        api: FakeApi,
        script: Script,
        *,
        rng: random.Random,
        grader: GraderScript | None = None,
    ) -> None:
        self.api = api
        self.script = script
        self.rng = rng
        self.grader = grader

    def _grade(self, pod: dict[str, Any], now: float, share: float) -> int:
        """End a running grader pod by the grader script, or by its deadline."""
        status = pod["status"]
        started = parse_time(status["startTime"])
        deadline = pod["spec"].get("activeDeadlineSeconds")
        if deadline is not None and now >= started + deadline:
            status.update(phase="Failed", reason="DeadlineExceeded")
            status["containerStatuses"] = [
                dict(terminated(137, reason="Error", now=now, start=started), name="grader")
            ]
            pod["metadata"]["resourceVersion"] = self.api._next_rv()
            return 1
        if self.grader is None or self.rng.random() > share:
            return 0
        ending = self.grader(pod)
        if ending is None:
            return 0
        code, log = ending
        status["phase"] = "Succeeded" if code == 0 else "Failed"
        status["containerStatuses"] = [
            dict(terminated(code, reason="Completed", now=now, start=started), name="grader")
        ]
        self.api.logs[pod["metadata"]["name"]] = log.encode()
        pod["metadata"]["resourceVersion"] = self.api._next_rv()
        return 1

    def step(self, *, share: float = 0.5) -> int:
        """Start pending pods, end about `share` of the running ones; return how many ended."""
        ended = 0
        now = self.api.clock()
        for pod in list(self.api.pods.values()):
            status = pod["status"]
            if status["phase"] == "Pending":
                if pod["spec"].get("schedulingGates"):
                    continue  # NB: a gated pod is never scheduled, so never started
                status["phase"] = "Running"
                status["startTime"] = _timestamp(now)
                continue
            if status["phase"] != "Running":
                continue
            if "passhat.dev/grading" in pod["metadata"]["labels"]:
                ended += self._grade(pod, now, share)
                continue
            if self.rng.random() > share:
                continue
            key = pod_key(pod)
            assert key is not None
            if pod["metadata"].get("deletionTimestamp"):
                outcome = "killed"
            else:
                outcome = self.script(key.task, key.trial, key.attempt)
            code, reason = {
                "pass": (0, "Completed"),
                "fail": (1, "Error"),
                "infra": (75, "Error"),
                "oom": (137, "OOMKilled"),
                "killed": (137, "Error"),
            }[outcome]
            status["phase"] = "Succeeded" if code == 0 else "Failed"
            status["containerStatuses"] = [terminated(code, reason=reason, now=now, start=now)]
            name = pod["metadata"]["name"]
            self.api.logs[name] = f"agent output of {name}: {outcome}\n".encode()
            pod["metadata"]["resourceVersion"] = self.api._next_rv()
            ended += 1
        return ended
