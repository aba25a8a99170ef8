"""`passhat operator drain`: stop serving for good, leaving no finalizer behind.

An eval that runs holds kopf's finalizer and its live trial pods hold ours
(`passhat.dev/trial-accounting`) until their outcomes are recorded: only an operator lets
them go. Uninstalled while evals run, the operator used to leave both behind, and the
namespaces of those evals hung in Terminating until someone stripped finalizers by hand.
The Job controller never has this problem because it is never uninstalled; passhat is. So
the chart's pre-delete hook (and anyone removing an install made without Helm) runs this:

1. **Take the operator's Lease** (`--lease NS/NAME`): write the drain in as its holder
   with a long duration (a conditional update, like any candidate), then wait the old
   holder's lease duration. A leader stops within its renew deadline after its last
   renew, which came before this write (`leader.py`): after the wait no operator of the
   release drives an eval, and the standbys stay standbys.
2. **Stop every eval that still runs** in the served namespaces with one pass each
   (`EvalLoop(stop_message=...)`): the pods that finished are folded in (and archived),
   the status gets `Stopped=True`, reason `OperatorDrained`, phase Failed, with what was
   scored kept, and every live pod is released and deleted. A stopped eval is final: no
   operator starts a daemon for it again.
3. **Let go of every finalizer**: kopf's on every eval, ours on every pod the operator
   made (the pods of evals already gone included: the start-up sweep's job).
4. **Release the namespace claims**, so another release may serve them, and the finalizer
   of the operator's RoleBinding in each served namespace (`rights.py`), so Helm can
   delete them. A namespace already gone (or going, our rights in it gone) is skipped.

Every step is safe to repeat (the hook's Job retries): a pass over a stopped eval only
cleans up, a finalizer already gone is skipped.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from passhat.operator.archive import Archiver
from passhat.operator.config import OperatorConfig
from passhat.operator.kube import ApiError, Conflict, OperatorApi
from passhat.operator.leader import (
    LeaseApi,
    LeaseTimings,
    NamespaceClaims,
    lease_holder,
    micro_time,
)
from passhat.operator.loop import EvalLoop, PassState
from passhat.operator.ownership import PodSigner
from passhat.operator.pods import EVAL_FINALIZER, FINALIZER, EvalRef
from passhat.operator.rights import RightsApi, let_go_of_rights
from passhat.operator.status import is_terminal

__all__ = ["DRAIN_HOLDER", "DRAIN_HOLD_S", "DrainApi", "DrainReport", "drain", "take_lease"]

logger = logging.getLogger(__name__)

# The holder the drain writes into the operator's Lease.
DRAIN_HOLDER = "passhat-operator-drain"
# How long the drain holds the Lease (the chart's uninstall deletes it right after).
DRAIN_HOLD_S = 3600
STOP_MESSAGE = "the operator was drained (passhat operator drain, or helm uninstall)"
# Passes per eval before the drain gives up on it (each 409 means someone wrote in between).
_PASS_ATTEMPTS = 10


T = TypeVar("T")


class DrainApi(OperatorApi, LeaseApi, RightsApi, Protocol):
    """What a drain asks of the API server (`kube.Kube`): the loop's calls, Leases, and
    the evals of a namespace and their finalizers."""

    def remove_eval_finalizer(
        self, namespace: str, body: Mapping[str, Any], finalizer: str
    ) -> bool:
        """Remove `finalizer` from eval `body` (checked by uid); False when not there."""
        ...


@dataclass
class DrainReport:
    """What a drain did."""

    stopped: list[str] = field(default_factory=list)
    eval_finalizers_removed: int = 0
    pods_released: int = 0
    waited_s: float = 0.0

    def summary(self) -> str:
        """One line for the log and the hook Job's output."""
        stopped = ", ".join(self.stopped) if self.stopped else "none"
        return (
            f"drained: evals stopped: {stopped}; kopf finalizers removed from "
            f"{self.eval_finalizers_removed} evals; {self.pods_released} trial pods let go"
        )


def take_lease(
    api: DrainApi,
    namespace: str,
    name: str,
    *,
    hold_s: int = DRAIN_HOLD_S,
    wall: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Hold the Lease `namespace/name` as the drain; return how long it waited for the
    holder it replaced to stop (that holder's lease duration; 0 when there was none)."""
    while True:
        now = micro_time(wall())
        lease = api.get_lease(namespace, name)
        spec = {
            "holderIdentity": DRAIN_HOLDER,
            "leaseDurationSeconds": hold_s,
            "acquireTime": now,
            "renewTime": now,
        }
        try:
            if lease is None:
                body = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": {**spec, "leaseTransitions": 0},
                }
                api.create_lease(namespace, body)
                return 0.0
            before = dict(lease.get("spec") or {})
            transitions = int(before.get("leaseTransitions") or 0)
            holder = lease_holder(lease)
            changed = holder != DRAIN_HOLDER
            spec["leaseTransitions"] = transitions + 1 if changed else transitions
            api.update_lease(namespace, name, {**lease, "spec": spec})
        except Conflict:
            continue  # NB: a leader renewed in between: read it again
        if not holder or holder == DRAIN_HOLDER:
            return 0.0
        # NB: the holder renewed last before this write; it stops leading within its renew
        # deadline of that, and its renew deadline is shorter than its lease duration
        wait = float(before.get("leaseDurationSeconds") or 0)
        logger.info(
            "took Lease %s/%s from %s; waiting %gs for it to stop", namespace, name, holder, wait
        )
        sleep(wait)
        return wait


def drain(
    api: DrainApi,
    *,
    namespaces: Sequence[str],
    config: OperatorConfig,
    lease: tuple[str, str] | None = None,
    archiver: Archiver | None = None,
    timings: LeaseTimings | None = None,
    rights_binding: str | None = None,
    hold_s: int = DRAIN_HOLD_S,
    sleep: Callable[[float], None] = time.sleep,
) -> DrainReport:
    """Stop every eval in `namespaces` (none: every namespace) and let go of every finalizer
    the operator put there; see the module docstring. Raises ApiError when the API server
    keeps failing (the hook's Job retries)."""
    report = DrainReport()
    if lease is not None:
        report.waited_s = take_lease(api, *lease, hold_s=hold_s, sleep=sleep)
    scopes: list[str | None] = list(namespaces) or [None]
    evals = [body for scope in scopes for body in _evals_in(api, scope)]
    for body in evals:
        if not is_terminal(body.get("status") or {}):
            if _stop(api, body, config, archiver):
                report.stopped.append(_describe(body))
        else:
            _pass(api, body, config, archiver, stop=False)  # NB: leftovers of a finished one
    _wait_releases(api, evals, sleep)
    for body in evals:
        fresh = api.get_eval(*_key(body))
        if fresh is not None and api.remove_eval_finalizer(_key(body)[0], fresh, EVAL_FINALIZER):
            report.eval_finalizers_removed += 1
    report.pods_released = _release_held(api, scopes, config)
    if lease is not None:
        # NB: cluster-wide mode claimed the namespaces where it served an eval
        claimed = list(namespaces) or sorted({_key(body)[0] for body in evals})
        NamespaceClaims(
            api, namespaces=claimed, release=f"{lease[0]}/{lease[1]}", timings=timings
        ).release()
    if rights_binding is not None:
        for namespace in namespaces:
            _gone_is_fine(
                functools.partial(let_go_of_rights, api, namespace, rights_binding), namespace
            )
    logger.info(report.summary())
    return report


def _evals_in(api: DrainApi, scope: str | None) -> list[dict[str, Any]]:
    """The evals of a served namespace; none when it is gone or being deleted without our
    rights in it any more (403, 404)."""
    return _gone_is_fine(lambda: api.list_evals(scope), scope) or []


def _gone_is_fine(call: Callable[[], T], namespace: str | None) -> T | None:
    try:
        return call()
    except ApiError as err:
        if err.status not in (403, 404):
            raise
        logger.warning("namespace %s skipped: %s", namespace, err)
        return None


def _key(body: Mapping[str, Any]) -> tuple[str, str]:
    meta = body.get("metadata") or {}
    return str(meta.get("namespace")), str(meta.get("name"))


def _describe(body: Mapping[str, Any]) -> str:
    namespace, name = _key(body)
    return f"{namespace}/{name}"


def _ref(body: Mapping[str, Any]) -> EvalRef:
    meta = body.get("metadata") or {}
    return EvalRef(str(meta.get("namespace")), str(meta.get("name")), str(meta.get("uid")))


def _pass(
    api: DrainApi,
    body: Mapping[str, Any],
    config: OperatorConfig,
    archiver: Archiver | None,
    *,
    stop: bool,
) -> PassState:
    loop = EvalLoop(
        api,
        _ref(body),
        config=config,
        archiver=archiver,
        stop_message=STOP_MESSAGE if stop else None,
    )
    state = PassState.CONFLICT
    for _ in range(_PASS_ATTEMPTS):
        state = loop.run_pass().state
        if state is not PassState.CONFLICT:
            break
    return state


def _stop(
    api: DrainApi, body: Mapping[str, Any], config: OperatorConfig, archiver: Archiver | None
) -> bool:
    """Stop one eval; True when this drain stopped it (not already final)."""
    state = _pass(api, body, config, archiver, stop=True)
    if state is PassState.CONFLICT:
        raise ApiError("patch", 409, f"eval {_describe(body)} kept changing; drain again")
    fresh = api.get_eval(*_key(body))
    return fresh is not None and is_terminal(fresh.get("status") or {})


def _wait_releases(
    api: DrainApi, evals: Sequence[Mapping[str, Any]], sleep: Callable[[float], None]
) -> None:
    """Until the keeps and releases the passes left in flight are done (bounded)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if not any(api.releasing(_ref(body).namespace, _ref(body).uid) for body in evals):
            return
        sleep(0.2)


def _release_held(api: DrainApi, scopes: Sequence[str | None], config: OperatorConfig) -> int:
    """Let go of every pod the operator made that still holds our finalizer: the pods of
    evals gone (nothing else would release them), and any a pass left (then once more)."""
    signer = PodSigner(config.pod_key)
    released = 0
    for scope in scopes:
        held: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for pod in _gone_is_fine(functools.partial(api.list_held_pods, scope), scope) or []:
            meta = pod.get("metadata") or {}
            uid = signer.owner_uid(pod)
            if uid is not None and FINALIZER in (meta.get("finalizers") or []):
                held.setdefault((str(meta.get("namespace") or scope), uid), []).append(pod)
        for (namespace, _), pods in held.items():
            api.release_pods(namespace, pods)
            released += len(pods)
    return released
