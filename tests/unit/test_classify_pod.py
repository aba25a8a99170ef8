"""classify_pod on hand-made pod dicts: every row of the pod table, and its order."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from passhat.api.spec import Grading
from passhat.operator.kube import slim_pod
from passhat.trials import Outcome
from passhat.trials.classify_pod import (
    POD_RULES,
    classify_pod,
    parse_timestamp,
    verdict_for_vanished_pod,
)

CREATED = "2026-01-01T00:00:00Z"
T0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
PASS, FAIL, INFRA = Outcome.PASS, Outcome.FAIL, Outcome.INFRA_ERROR


def pod(
    phase: str = "Running",
    *,
    main: dict[str, Any] | None = None,
    sidecar: dict[str, Any] | None = None,
    reason: str | None = None,
    conditions: list[dict[str, Any]] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    """A trial pod as the API returns it; `main`/`sidecar` are container `state`s."""
    statuses = [{"name": "agent", "state": main or {"running": {}}}]
    if sidecar is not None:
        statuses.append({"name": "proxy", "state": sidecar})
    metadata: dict[str, Any] = {"name": "e-0-0-0", "creationTimestamp": CREATED}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:05:00Z"
        metadata["deletionGracePeriodSeconds"] = 0
    status: dict[str, Any] = {"phase": phase, "containerStatuses": statuses}
    if reason:
        status["reason"] = reason
    if conditions:
        status["conditions"] = conditions
    return {
        "metadata": metadata,
        "spec": {"containers": [{"name": "agent"}, {"name": "proxy"}]},
        "status": status,
    }


def ended(code: int, reason: str = "Error", message: str | None = None) -> dict[str, Any]:
    terminated: dict[str, Any] = {"exitCode": code, "reason": reason}
    if message is not None:
        terminated["message"] = message
    return {"terminated": terminated}


def disruption(reason: str) -> list[dict[str, Any]]:
    return [{"type": "DisruptionTarget", "status": "True", "reason": reason, "message": "m"}]


def classify(p: dict[str, Any], *, after_s: float = 5, timeout_is: Any = "infra_error") -> Any:
    """(outcome, reason) of `p`; also checks the operator's slimmed pod gets the same."""
    verdict = classify_pod(p, grading=Grading(), timeout_is=timeout_is, now=T0 + after_s)
    slim = classify_pod(slim_pod(p), grading=Grading(), timeout_is=timeout_is, now=T0 + after_s)
    assert slim == verdict
    return None if verdict is None else (verdict.outcome, verdict.reason)


RESULT_PASS = '{"outcome": "pass"}'


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        (pod("Pending", main={"waiting": {"reason": "ContainerCreating"}}), None),
        (pod("Running"), None),
        (pod("Succeeded", main=ended(0, "Completed")), (PASS, "exit_code")),
        (pod("Failed", main=ended(1)), (FAIL, "exit_code")),
        (pod("Failed", main=ended(75)), (INFRA, "reported")),
        (pod("Failed", main=ended(3)), (FAIL, "exit_3")),
        (pod("Failed", main=ended(139)), (FAIL, "exit_139")),
        (pod("Running", main=ended(0, "Completed"), sidecar={"running": {}}), (PASS, "exit_code")),
        (pod("Failed", main=ended(1, message=RESULT_PASS)), (PASS, "result")),
        (pod("Succeeded", main=ended(0, message='{"outcome": "fail"}')), (FAIL, "result")),
        (pod("Failed", main=ended(1, message="Traceback: boom")), (FAIL, "exit_code")),
        (pod("Failed", main=ended(0, message='{"outcome": "infra_error"}')), (INFRA, "reported")),
    ],
)
def test_exit_and_result(p: dict[str, Any], expected: Any) -> None:
    """Exit codes and the termination-message result JSON grade an ended trial container."""
    assert classify(p) == expected


@pytest.mark.parametrize(
    "p",
    [
        pod("Failed", main=ended(137, "OOMKilled")),
        pod("Succeeded", main=ended(0, "OOMKilled")),
        pod("Succeeded", main=ended(0, "OOMKilled", message=RESULT_PASS)),
        pod("Running", main={"running": {}}, sidecar=ended(137, "OOMKilled")),
        pod("Failed", main=ended(137, "OOMKilled"), reason="DeadlineExceeded"),
    ],
)
def test_oom_killed_wins(p: dict[str, Any]) -> None:
    """Any OOMKilled container is infra_error/oom_killed, even with exit 0 or a pass result."""
    assert classify(p) == (INFRA, "oom_killed")


def test_deadline_exceeded() -> None:
    """status.reason DeadlineExceeded is a timeout, or a fail when timeoutIs is fail."""
    p = pod("Failed", main=ended(137), reason="DeadlineExceeded")
    assert classify(p) == (INFRA, "timeout")
    assert classify(p, timeout_is="fail") == (FAIL, "timeout")
    with_result = pod("Failed", main=ended(143, message=RESULT_PASS), reason="DeadlineExceeded")
    assert classify(with_result) == (PASS, "result")


@pytest.mark.parametrize(
    ("condition", "reason"),
    [
        ("EvictionByEvictionAPI", "evicted"),
        ("TerminationByKubelet", "evicted"),
        ("PreemptionByScheduler", "preempted"),
        ("DeletionByTaintManager", "node_lost"),
        ("DeletionByPodGC", "node_lost"),
        ("SomethingNew", "evicted"),
    ],
)
def test_disruption_target(condition: str, reason: str) -> None:
    """A DisruptionTarget decides once the pod ended or is being deleted, even if running."""
    assert classify(pod("Failed", main=ended(143), conditions=disruption(condition))) == (
        INFRA,
        reason,
    )
    running_deleted = pod("Running", conditions=disruption(condition), deleting=True)
    assert classify(running_deleted) == (INFRA, reason)


def test_stale_disruption_target_on_live_pod_waits() -> None:
    """A DisruptionTarget on a running pod that is not being deleted is not an end."""
    assert classify(pod("Running", conditions=disruption("PreemptionByScheduler"))) is None


def test_kueue_termination_target() -> None:
    """Kueue's TerminationTarget condition counts like DisruptionTarget."""
    conditions = [{"type": "TerminationTarget", "status": "True", "reason": "Preempted"}]
    assert classify(pod("Failed", main=ended(143), conditions=conditions)) == (INFRA, "preempted")
    conditions = [{"type": "TerminationTarget", "status": "True", "reason": "StoppedByKueue"}]
    assert classify(pod("Failed", main=ended(143), conditions=conditions)) == (INFRA, "evicted")


@pytest.mark.parametrize(
    ("status_reason", "reason"),
    [
        ("Evicted", "evicted"),
        ("Preempted", "preempted"),
        ("NodeShutdown", "node_lost"),
        ("Terminated", "node_lost"),
        ("NodeLost", "node_lost"),
        ("UnexpectedAdmissionError", "rejected"),
        ("OutOfcpu", "rejected"),
    ],
)
def test_status_reasons(status_reason: str, reason: str) -> None:
    """A failed pod's status.reason names the infra error."""
    assert classify(pod("Failed", main=ended(137), reason=status_reason)) == (INFRA, reason)
    assert classify(pod("Failed", reason=status_reason)) == (INFRA, reason)


def test_killed_while_being_deleted_is_deleted_not_a_crash() -> None:
    """Exit 143/137 of a pod with a deletionTimestamp is infra_error/deleted."""
    assert classify(pod("Failed", main=ended(143), deleting=True)) == (INFRA, "deleted")
    assert classify(pod("Failed", main=ended(137), deleting=True)) == (INFRA, "deleted")
    # a normal end well before the deletion still counts as the agent's
    assert classify(pod("Failed", main=ended(1), deleting=True)) == (FAIL, "exit_code")
    before = ended(1)
    before["terminated"]["finishedAt"] = "2026-01-01T00:01:00Z"
    assert classify(pod("Failed", main=before, deleting=True)) == (FAIL, "exit_code")
    # ...but an agent that trapped SIGTERM and exited 1 after the deletion did not fail
    trapped = ended(1)
    trapped["terminated"]["finishedAt"] = "2026-01-01T00:04:50Z"
    assert classify(pod("Failed", main=trapped, deleting=True)) == (INFRA, "deleted")
    # not ended yet: the caller waits, then uses verdict_for_vanished_pod()
    assert classify(pod("Running", deleting=True)) is None
    assert verdict_for_vanished_pod().reason == "deleted"


def test_container_status_unknown() -> None:
    """A made-up 137 with ContainerStatusUnknown is infra_error/lost."""
    p = pod("Failed", main=ended(137, "ContainerStatusUnknown"))
    assert classify(p) == (INFRA, "lost")


def test_terminal_pod_without_container_end() -> None:
    """A failed pod whose trial container never ended (e.g. init failed) is lost."""
    p = pod("Failed", main={"waiting": {"reason": "PodInitializing"}})
    assert classify(p) == (INFRA, "lost")


@pytest.mark.parametrize(
    ("waiting", "reason"),
    [
        ("ErrImagePull", "image_error"),
        ("ImagePullBackOff", "image_error"),
        ("ErrImageNeverPull", "image_error"),
        ("InvalidImageName", "image_error"),
        ("CreateContainerConfigError", "config_error"),
        ("CreateContainerError", "config_error"),
    ],
)
def test_image_and_config_errors_after_grace(waiting: str, reason: str) -> None:
    """Stuck image/config errors count only once the pod is older than the grace period."""
    p = pod("Pending", main={"waiting": {"reason": waiting, "message": "x"}})
    assert classify(p, after_s=30) is None
    assert classify(p, after_s=61) == (INFRA, reason)


def test_now_as_datetime() -> None:
    """`now` may be an aware datetime as well as epoch seconds."""
    p = pod("Pending", main={"waiting": {"reason": "ErrImagePull"}})
    now = datetime(2026, 1, 1, 0, 2, tzinfo=UTC)
    verdict = classify_pod(p, grading=Grading(), now=now)
    assert verdict is not None and verdict.reason == "image_error"


def test_empty_and_odd_pods_do_not_raise() -> None:
    """Missing or malformed status parts mean "not ended yet", never an exception."""
    for p in ({}, {"status": None}, {"status": {"containerStatuses": "x"}}, {"metadata": 3}):
        assert classify(p) is None


def test_rows_are_named_and_unique() -> None:
    """Every pod rule is a named row; OOM comes first, the catch-all last."""
    names = [rule.name for rule in POD_RULES]
    assert len(names) == len(set(names))
    assert names[0] == "oom_killed" and names[-1] == "ended_without_exit_code"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "status",
                    "metadata",
                    "spec",
                    "phase",
                    "reason",
                    "containerStatuses",
                    "state",
                    "terminated",
                    "exitCode",
                    "message",
                    "conditions",
                    "type",
                    "name",
                    "containers",
                    "deletionTimestamp",
                    "creationTimestamp",
                    "waiting",
                    "lastState",
                ]
            ),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.dictionaries(st.sampled_from(["status", "metadata", "spec"]), _json, max_size=3))
def test_never_raises_on_any_json(p: dict[str, Any]) -> None:
    """Whatever JSON the API returns, the classifier answers without raising."""
    classify(p)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-01-01T00:00:00Z", T0),
        ("2026-01-01T00:00:05.250000Z", T0 + 5.25),
        ("2026-01-01T01:00:00+01:00", T0),
        ("yesterday", None),
        ("", None),
        (None, None),
        (1767225600, None),
    ],
)
def test_parse_timestamp(value: Any, expected: float | None) -> None:
    """Kubernetes timestamps to epoch seconds; anything else is None, never an exception."""
    assert parse_timestamp(value) == expected
