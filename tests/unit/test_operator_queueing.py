"""A queued eval (Kueue's plain-pod integration): a gated pod waits, it does not run; the
queue's quota and `parallelism` together bound what runs, and the eval never keeps more
than max(1, running) pods waiting for admission."""

from __future__ import annotations

from typing import Any

from passhat.api.load import parse_spec
from passhat.operator.queueing import KUEUE_ADMISSION_GATE, ahead_capacity, queue_of
from passhat.trials.ledger import SlotLedger
from tests.unit.test_operator_loop import Harness, expected_ledger, script, spec

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


class FakeKueue:
    """Gates each queued pod at creation (the webhook) and admits gated pods, oldest first,
    while fewer than `quota` admitted pods are live (one Workload per pod)."""

    def __init__(self, harness: Harness, quota: int) -> None:
        self.api = harness.api
        self.quota = quota
        self.api.on_create = self.gate

    def gate(self, pod: dict[str, Any]) -> None:
        if QUEUE_LABEL in pod["metadata"]["labels"]:
            pod["spec"]["schedulingGates"] = [{"name": KUEUE_ADMISSION_GATE}]

    def live(self) -> list[dict[str, Any]]:
        return [
            pod
            for pod in self.api.pods.values()
            if pod["status"]["phase"] in ("Pending", "Running")
            and not pod["metadata"].get("deletionTimestamp")
        ]

    def gated(self) -> list[dict[str, Any]]:
        return [pod for pod in self.live() if pod["spec"].get("schedulingGates")]

    def admitted(self) -> list[dict[str, Any]]:
        return [pod for pod in self.live() if not pod["spec"].get("schedulingGates")]

    def admit(self) -> None:
        room = self.quota - len(self.admitted())
        for pod in self.gated()[: max(0, room)]:
            del pod["spec"]["schedulingGates"]


def queued_harness(**overrides: Any) -> Harness:
    return Harness(3, body=spec(queueName="team-a", **overrides))


def test_quota_and_parallelism_bound_what_runs_and_the_queue_is_not_flooded() -> None:
    """Parallelism 8, quota 2: never more than 2 admitted, never more than 2 waiting (not
    the 6 a flood would park in the queue), and the ledger is exactly the script's."""
    harness = queued_harness(parallelism=8)
    kueue = FakeKueue(harness, quota=2)
    most: dict[str, int] = {"admitted": 0, "waiting": 0}

    def between() -> None:
        kueue.admit()
        most["admitted"] = max(most["admitted"], len(kueue.admitted()))
        most["waiting"] = max(most["waiting"], len(kueue.gated()))

    harness.run(between=between)
    assert most == {"admitted": 2, "waiting": 2}
    status = harness.status
    assert SlotLedger.unpack(status["ledger"]) == expected_ledger(script)
    assert status["progress"]["waiting"] == 0 and status["progress"]["running"] == 0


def test_a_gated_pod_waits_past_its_timeout_and_is_neither_running_nor_judged() -> None:
    """With no quota the eval's one pod waits, gated, far past timeoutSeconds: status says
    1 waiting, 0 running, phase Pending, nothing recorded; admitted, it runs and ends."""
    harness = queued_harness(parallelism=4)
    kueue = FakeKueue(harness, quota=0)
    for _ in range(5):
        harness.clock.now += 100.0  # NB: timeoutSeconds is 60
        harness.kubelet.step()
        harness.loop.run_pass()
    assert len(harness.api.pods) == 1
    progress = harness.status["progress"]
    assert (progress["running"], progress["waiting"]) == (0, 1)
    assert harness.status["phase"] == "Pending"
    assert harness.recorded == []
    kueue.quota = 2
    harness.run(between=kueue.admit)
    assert SlotLedger.unpack(harness.status["ledger"]) == expected_ledger(script)


def test_an_eval_without_a_queue_is_not_held_back() -> None:
    """No queue name: the first pass creates `parallelism` pods at once (the pacer's first
    batch allowing)."""
    harness = Harness(3, body=spec(parallelism=4))
    harness.loop.run_pass()
    assert len(harness.api.pods) == 4


def test_ahead_capacity_and_queue_of() -> None:
    """At most max(1, running) wait; the queue comes from spec.queueName or the label."""
    assert [ahead_capacity(running=r, waiting=w) for r, w in [(0, 0), (0, 1), (3, 1), (2, 5)]] == [
        1,
        0,
        2,
        0,
    ]
    labelled = spec()
    labelled["trial"]["template"]["metadata"] = {"labels": {QUEUE_LABEL: "team-b"}}
    assert queue_of(parse_spec(labelled)) == "team-b"
    assert queue_of(parse_spec(spec(queueName="team-a"))) == "team-a"
    assert queue_of(parse_spec(spec())) is None
