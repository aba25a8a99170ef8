"""`passhat operator drain` (#24): it takes the operator's Lease (waiting out the old
leader), stops a running eval with what was scored kept (Stopped, OperatorDrained), lets go
of every finalizer the operator put on evals and pods, and releases the namespace claims;
run twice it changes nothing more."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from passhat.api import conditions as cond
from passhat.operator.drain import DRAIN_HOLDER, drain
from passhat.operator.leader import CLAIM_LEASE, LeaseElector, LeaseTimings, NamespaceClaims
from passhat.operator.loop import PassState
from passhat.operator.pods import EVAL_FINALIZER, FINALIZER, LABEL_RECORDED
from passhat.operator.rights import RIGHTS_FINALIZER, settle_rights
from passhat.operator.status import is_terminal
from tests.unit.lease_fake import Leases
from tests.unit.operator_fake import FakeApi
from tests.unit.test_operator_loop import CONFIG, Harness, spec

TIMINGS = LeaseTimings()


class DrainFake(FakeApi):
    """FakeApi plus Leases, the eval list and kopf's finalizer (what a drain calls)."""

    def __init__(self, base: FakeApi) -> None:
        self.__dict__.update(base.__dict__)
        self.leases = Leases()
        # The operator's RoleBinding per namespace (rights.py), with its finalizer.
        self.bindings: dict[tuple[str, str], dict[str, Any]] = {
            ("ns", "op-served"): {
                "metadata": {"name": "op-served", "uid": "b1", "finalizers": [RIGHTS_FINALIZER]}
            }
        }

    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.leases.get_lease(namespace, name)

    def create_lease(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.leases.create_lease(namespace, body)

    def update_lease(self, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.leases.update_lease(namespace, name, body)

    def list_evals(self, namespace: str | None) -> list[dict[str, Any]]:
        return [copy.deepcopy(body) for body in self.evals.values()]

    def remove_eval_finalizer(
        self, namespace: str, body: Mapping[str, Any], finalizer: str
    ) -> bool:
        stored = self.evals.get(str(body["metadata"]["name"]))
        finalizers = (stored or {}).get("metadata", {}).get("finalizers") or []
        if stored is None or finalizer not in finalizers:
            return False
        finalizers.remove(finalizer)
        stored["metadata"]["resourceVersion"] = self._next_rv()
        return True

    def get_rbac(self, namespace: str, resource: str, name: str) -> dict[str, Any] | None:
        return self.bindings.get((namespace, name))

    def remove_rbac_finalizer(
        self, namespace: str, resource: str, body: Mapping[str, Any], finalizer: str
    ) -> bool:
        stored = self.bindings.get((namespace, str(body["metadata"]["name"])))
        if stored is None or finalizer not in stored["metadata"]["finalizers"]:
            return False
        stored["metadata"]["finalizers"].remove(finalizer)
        return True

    def list_held_pods(self, namespace: str | None) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(pod)
            for pod in self.pods.values()
            if LABEL_RECORDED not in pod["metadata"]["labels"]
        ]

    def watch_pods(self, namespace: str, on_event: Any) -> None:
        raise NotImplementedError


def running_eval() -> tuple[Harness, DrainFake]:
    """An eval of 4 tasks x 1 trial, 2 at a time: one pod finished, one running; kopf's
    finalizer on the eval; a leader holding the Lease and the claim."""
    body = spec(tasks=[{"id": f"t{i}"} for i in range(4)], trials=1, ks=[1], parallelism=2)
    harness = Harness(5, body=body)
    api = DrainFake(harness.api)
    harness.api = api
    harness.loop = harness.new_loop()
    harness.loop.api = api
    api.evals["demo"]["metadata"]["finalizers"] = [EVAL_FINALIZER]
    assert harness.loop.run_pass().state is PassState.CONTINUE
    first, _ = sorted(api.pods)
    harness.finish(first, 0)
    leader = LeaseElector(
        api, namespace="sys", name="op", identity="pod-a", timings=TIMINGS, clock=harness.clock
    )
    assert leader.try_acquire_or_renew()
    assert (
        NamespaceClaims(api, namespaces=["ns"], release="sys/op", timings=TIMINGS).acquire() == []
    )
    return harness, api


def test_drain_stops_a_running_eval_and_leaves_no_finalizer() -> None:
    """The finished pod is recorded and kept, the running one deleted; the eval is Stopped
    (phase Failed, Complete False) with its one scored slot; no finalizer is left; the old
    leader's Lease duration was waited out; the claim is released."""
    _, api = running_eval()
    waits: list[float] = []
    report = drain(
        api, namespaces=["ns"], config=CONFIG, lease=("sys", "op"), timings=TIMINGS,
        rights_binding="op-served", sleep=waits.append,
    )  # fmt: skip
    assert report.stopped == ["ns/demo"]
    assert report.eval_finalizers_removed == 1
    assert waits[0] == 10.0 and report.waited_s == 10.0
    status = api.evals["demo"]["status"]
    assert is_terminal(status)
    stopped = cond.find_condition(status["conditions"], cond.STOPPED)
    assert stopped is not None and stopped["status"] == "True"
    assert stopped["reason"] == cond.REASON_DRAINED
    complete = cond.find_condition(status["conditions"], cond.COMPLETE)
    assert complete is not None and complete["status"] == "False"
    assert status["phase"] == "Failed"
    assert status["progress"] == {"done": 1, "running": 0, "waiting": 0, "pending": 3, "retries": 0}
    assert status["summary"]["byK"][0]["tasksScored"] == 1
    assert api.pods_with_finalizer() == []
    assert list(api.pods) == api.kept_pods() and len(api.pods) == 1
    assert api.evals["demo"]["metadata"]["finalizers"] == []
    lease = api.leases.items[("sys", "op")]["spec"]
    assert lease["holderIdentity"] == DRAIN_HOLDER and lease["leaseDurationSeconds"] == 3600
    assert api.leases.items[("ns", CLAIM_LEASE)]["spec"]["holderIdentity"] == ""
    assert api.bindings[("ns", "op-served")]["metadata"]["finalizers"] == []
    # NB: a second drain (the hook's Job retried) changes nothing
    before = copy.deepcopy(api.evals["demo"])
    again = drain(api, namespaces=["ns"], config=CONFIG, lease=("sys", "op"), sleep=waits.append)
    assert again.stopped == [] and again.eval_finalizers_removed == 0 and again.waited_s == 0
    assert api.evals["demo"] == before
    assert api.writes["create"] == 2


def test_the_old_leader_stops_once_the_drain_holds_the_lease() -> None:
    """The leader's next renew sees the drain as holder: it no longer leads (its process
    exits), and a standby cannot take the Lease for the drain's hold."""
    harness, api = running_eval()
    leader = LeaseElector(
        api, namespace="sys", name="op", identity="pod-a", timings=TIMINGS, clock=harness.clock
    )
    assert leader.try_acquire_or_renew()
    drain(api, namespaces=["ns"], config=CONFIG, lease=("sys", "op"), sleep=lambda _: None)
    harness.clock.now += 1
    assert leader.leading()
    assert not leader.step()
    assert leader.holder == DRAIN_HOLDER and leader.held_by_other()
    assert leader.lost() and not leader.leading()  # NB: at once, not after the deadline
    standby = LeaseElector(
        api, namespace="sys", name="op", identity="pod-b", timings=TIMINGS, clock=harness.clock
    )
    assert not standby.try_acquire_or_renew()
    harness.clock.now += 60
    assert not standby.try_acquire_or_renew()


def test_pods_of_an_eval_already_gone_are_let_go() -> None:
    """A held pod whose eval was deleted (its finalizer stripped by hand) is released."""
    _, api = running_eval()
    del api.evals["demo"]
    assert len(api.pods_with_finalizer()) == 2
    report = drain(api, namespaces=["ns"], config=CONFIG, sleep=lambda _: None)
    assert report.pods_released == 2
    assert api.pods_with_finalizer() == []
    assert FINALIZER not in str(api.pods)


def test_a_namespace_being_deleted_keeps_the_operators_rights_until_it_let_go() -> None:
    """While its RoleBinding is being deleted, the leader keeps the binding's finalizer as
    long as an eval there holds kopf's finalizer or a pod holds ours; then removes it."""
    _, api = running_eval()
    binding = api.bindings[("ns", "op-served")]["metadata"]
    pod_key = CONFIG.pod_key
    assert not settle_rights(api, "ns", "op-served", pod_key=pod_key)  # NB: not being deleted
    binding["deletionTimestamp"] = "2026-12-04T18:00:00Z"
    assert not settle_rights(api, "ns", "op-served", pod_key=pod_key)  # the eval holds on
    api.evals["demo"]["metadata"]["finalizers"] = []
    assert not settle_rights(api, "ns", "op-served", pod_key=pod_key)  # its pods hold on
    api.release_pods("ns", list(api.pods.values()))
    assert settle_rights(api, "ns", "op-served", pod_key=pod_key)
    assert binding["finalizers"] == []
