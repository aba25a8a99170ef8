"""Grader pods of a queued eval are held to the queue as its trial pods are (Kueue's
plain-pod integration): they join the queue the template names too (before, only
`spec.queueName` was copied, so a template's queue label let grader pods run outside the
queue's quota), and they wait for admission max(1, running) at a time (before, up to
`parallelism` grader pods were parked in the queue at once)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from passhat.operator.gradercheck import LABEL_GRADING
from passhat.operator.pods import QUEUE_NAME_LABEL
from tests.unit.test_operator_loop import Harness
from tests.unit.test_operator_loop_gradercheck import check_spec, honest
from tests.unit.test_operator_queueing import FakeKueue


def checked(**overrides: Any) -> dict[str, Any]:
    """The stability check's spec (every graded attempt, 3 gradings) with `overrides`."""
    return {**check_spec(), **overrides}


def grader_pods(harness: Harness) -> list[dict[str, Any]]:
    return [p for p in harness.api.pods.values() if LABEL_GRADING in p["metadata"]["labels"]]


def queued_by_template(body: dict[str, Any], queue: str) -> dict[str, Any]:
    template = body["trial"]["template"]
    template.setdefault("metadata", {}).setdefault("labels", {})[QUEUE_NAME_LABEL] = queue
    return body


def run_queued(body: dict[str, Any], quota: int) -> tuple[Harness, dict[str, int]]:
    """Run the eval through a fake Kueue of `quota`; the most grader pods ever admitted and
    ever waiting at once."""
    harness = Harness(3, body=body, grader=honest)
    kueue = FakeKueue(harness, quota=quota)
    most = {"admitted": 0, "waiting": 0}

    def graders(pods: list[dict[str, Any]]) -> int:
        return sum(1 for pod in pods if LABEL_GRADING in pod["metadata"]["labels"])

    def between() -> None:
        kueue.admit()
        most["admitted"] = max(most["admitted"], graders(kueue.admitted()))
        most["waiting"] = max(most["waiting"], graders(kueue.gated()))

    harness.run(between=between)
    return harness, most


def check_done(status: Mapping[str, Any]) -> bool:
    check = status.get("graderCheck") or {}
    return check.get("phase") == "Done" and check.get("doneGradings") == check.get("gradings")


def test_grader_pods_join_the_queue_the_template_names() -> None:
    """The queue named by the template's label (no spec.queueName): every grader pod carries
    it, so Kueue gates and admits it within the queue's quota like the trial pods."""
    harness, most = run_queued(queued_by_template(checked(parallelism=8), "team-a"), quota=2)
    pods = grader_pods(harness)
    assert pods, "the check made no grader pod"
    assert {p["metadata"]["labels"].get(QUEUE_NAME_LABEL) for p in pods} == {"team-a"}
    assert most["admitted"] <= 2
    assert check_done(harness.status)


def test_grader_pods_do_not_flood_the_queue() -> None:
    """Parallelism 8, quota 2: never more than 2 grader pods wait for admission at once
    (not the 6 a flood would park in the queue), and every grading still ends."""
    harness, most = run_queued(checked(parallelism=8, queueName="team-a"), quota=2)
    assert grader_pods(harness)
    assert most["admitted"] == 2
    assert most["waiting"] <= 2, f"{most['waiting']} grader pods waited in the queue at once"
    assert check_done(harness.status)


def test_a_grader_pod_waiting_for_admission_is_not_a_grader_error() -> None:
    """A grader pod the queue has not admitted yet waits far past its timeout and slack,
    as a gated trial pod does (its clock has not started); admitted, it grades."""
    harness = Harness(3, body=checked(parallelism=8, queueName="team-a"), grader=honest)
    kueue = FakeKueue(harness, quota=2)
    for _ in range(3000):
        if grader_pods(harness):
            break
        kueue.admit()
        harness.kubelet.step()
        harness.loop.run_pass()
        harness.clock.now += 1.0
    kueue.quota = 0
    for _ in range(5):
        harness.clock.now += 1000.0  # NB: timeoutSeconds 30 + 120 s slack
        harness.kubelet.step()
        harness.loop.run_pass()
    assert harness.status["graderCheck"]["graderErrors"] == 0
    kueue.quota = 2
    harness.run(between=kueue.admit)
    assert check_done(harness.status)
    assert harness.status["graderCheck"]["graderErrors"] == 0
