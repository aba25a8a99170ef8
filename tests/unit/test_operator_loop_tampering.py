"""Pods a user changed, forged or could not get created: never miscounted, never stuck."""

from __future__ import annotations

import copy
from typing import Any

from passhat.operator import events
from passhat.operator.kube import ApiError
from passhat.operator.loop import PassState
from passhat.operator.pods import (
    FINALIZER,
    LABEL_EVAL_UID,
    LABEL_RECORDED,
    LABEL_TRIAL,
)
from passhat.trials.ledger import SlotLedger
from tests.unit.test_operator_loop import Harness, spec


def harness_of(trials: int, seed: int = 40) -> Harness:
    """One task x `trials` trials, all in flight at once, no retry backoff."""
    return Harness(seed, body=spec(tasks=[{"id": "only"}], trials=trials, ks=[1], parallelism=4))


def ledger_of(harness: Harness) -> SlotLedger:
    return SlotLedger.unpack(harness.status["ledger"])


def test_forged_pod_with_our_labels_is_never_counted_or_touched() -> None:
    """A user's pod carrying a slot's labels but not made by the eval changes nothing."""
    harness = harness_of(2)
    harness.loop.run_pass()
    real = next(name for name in harness.api.pods if name.endswith("-t0-1-a0"))
    forged = copy.deepcopy(harness.api.pods[real])
    forged["metadata"].update(name="forged", ownerReferences=[], finalizers=[])
    harness.api.pods["forged"] = forged
    harness.finish("forged", 0)
    harness.loop.run_pass()
    ledger = ledger_of(harness)
    assert ledger.attempts(0, 1) == 0 and not ledger.is_final(0, 1)
    assert "forged" in harness.api.pods and real in harness.api.pods
    assert LABEL_RECORDED not in harness.api.pods["forged"]["metadata"]["labels"]


def creates_first(ops: list[tuple[str, Any]]) -> None:
    """FakeApi.settle's order: creates before keeps and releases."""
    ops.sort(key=lambda op: op[0] != "create")


def test_relabelled_pod_is_released_and_its_trial_runs_again() -> None:
    """A trial pod relabelled as another trial is not counted for either; its own trial is
    retried under a new name and the other trial's real pod is untouched."""
    harness = harness_of(4)
    # NB: creates reach the API server before the pass's releases are through (the real
    # API wrapper releases in the background), so the create below finds its name taken.
    harness.api.rng.shuffle = creates_first  # type: ignore[method-assign,assignment]
    harness.loop.run_pass()
    moved = next(name for name in harness.api.pods if name.endswith("-t0-1-a0"))
    other = next(name for name in harness.api.pods if name.endswith("-t0-3-a0"))
    harness.api.pods[moved]["metadata"]["labels"][LABEL_TRIAL] = "3"
    harness.finish(moved, 1)
    harness.loop.run_pass()  # released, not counted; its slot's create finds the name taken
    assert ledger_of(harness).attempts(0, 3) == 0
    assert other in harness.api.pods
    harness.loop.run_pass()  # the attempt is lost, retried as a1
    ledger = ledger_of(harness)
    assert ledger.attempts(0, 1) == 1 and not ledger.is_final(0, 1)
    assert any(name.endswith("-t0-1-a1") for name in harness.api.pods)
    assert ledger.attempts(0, 3) == 0


def test_pod_hidden_from_the_list_does_not_stall_its_slot() -> None:
    """A trial pod whose eval-uid label was removed, or that was labelled recorded by hand,
    is released (no finalizer left behind) and its trial runs again."""
    for change in ("unlabel", "recorded"):
        harness = harness_of(1)
        harness.loop.run_pass()
        (name,) = harness.api.pods
        labels = harness.api.pods[name]["metadata"]["labels"]
        if change == "unlabel":
            del labels[LABEL_EVAL_UID]
        else:
            labels[LABEL_RECORDED] = "true"
        for _ in range(3):
            # NB: a pod the list does not show is asked for by a GET only once its create is
            # expectation_grace_s old (the list may be a lagging cache)
            harness.clock.now += harness.loop.config.expectation_grace_s
            harness.loop.run_pass()
        ledger = ledger_of(harness)
        assert ledger.attempts(0, 0) == 1, change
        assert any(pod.endswith("-t0-0-a1") for pod in harness.api.pods), change
        old = harness.api.pods.get(name)
        assert old is None or FINALIZER not in old["metadata"].get("finalizers", []), change


def test_quota_refusal_backs_off_is_reported_and_recovers() -> None:
    """A 403 "exceeded quota" on create keeps the eval running: one pod is tried, the eval
    backs off (no POST until the backoff ends, then one pod, doubling the wait), posts
    one QuotaExceeded event, shows CreateRefused=True with the quota's message, counts no
    phantom running pods, and recovers once the quota has room."""
    harness = harness_of(1)
    posted = harness.collect_events()
    real_settle = harness.api.settle
    posts: list[int] = []

    def refuse(namespace: str, *, keep: Any, release: Any, create: Any, **_: Any) -> list[str]:
        if create:
            posts.append(len(create))
            raise ApiError("create", 403, 'pods "x" is forbidden: exceeded quota: q')
        return real_settle(namespace, keep=keep, release=release, create=create)

    harness.api.settle = refuse  # type: ignore[method-assign]
    for _ in range(3):
        assert harness.loop.run_pass().state is PassState.CONTINUE
    assert posts == [1]  # NB: slow start: one pod, then the backoff (1 s) holds
    harness.clock.now += 1.0
    harness.loop.run_pass()
    harness.clock.now += 1.0  # NB: the backoff doubled to 2 s
    harness.loop.run_pass()
    assert posts == [1, 1]
    assert [event.reason for event in posted] == [events.QUOTA_EXCEEDED]
    assert "exceeded quota" in posted[0].message
    status = harness.status
    assert status["progress"]["running"] == 0
    refused = next(c for c in status["conditions"] if c["type"] == "CreateRefused")
    assert (refused["status"], refused["reason"]) == ("True", "QuotaExceeded")
    assert "exceeded quota: q" in refused["message"]
    assert harness.api.pods == {}
    harness.api.settle = real_settle  # type: ignore[method-assign]
    harness.clock.now += 1.0
    harness.loop.run_pass()
    assert len(harness.api.pods) == 1
    harness.loop.run_pass()
    refused = next(c for c in harness.status["conditions"] if c["type"] == "CreateRefused")
    assert (refused["status"], refused["reason"]) == ("False", "Created")


UNSCHEDULABLE = [
    {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/2 nodes are available: 2 Insufficient cpu.",
    }
]


def posting_harness(trials: int) -> tuple[Harness, list[events.Event]]:
    """harness_of(trials) whose loop keeps the events it posts."""
    harness = harness_of(trials)
    return harness, harness.collect_events()


def test_unschedulable_pod_is_reported_after_the_grace() -> None:
    """A pod Pending as unschedulable past the grace gets one TrialPodUnschedulable event."""
    harness, posted = posting_harness(1)
    harness.loop.run_pass()
    (name,) = harness.api.pods
    harness.api.pods[name]["status"]["conditions"] = UNSCHEDULABLE
    harness.loop.run_pass()
    assert posted == []
    harness.clock.now += harness.loop.config.unschedulable_grace_s + 1
    harness.loop.run_pass()
    harness.loop.run_pass()
    assert [event.reason for event in posted] == [events.UNSCHEDULABLE]
    assert "Insufficient cpu" in posted[0].message
    assert posted[0].message.startswith(f"trial pod {name} has not been scheduled for 61s")


def test_unschedulable_events_are_one_per_eval_per_interval_with_a_count() -> None:
    """Four unschedulable pods are one event that counts them and names the longest
    waiting; another comes only after unschedulable_event_interval_s (60 s), while they
    still wait; none once they are scheduled."""
    harness, posted = posting_harness(4)
    harness.loop.run_pass()
    names = sorted(harness.api.pods)
    assert len(names) == 4
    for name in names:
        harness.api.pods[name]["status"]["conditions"] = UNSCHEDULABLE
    harness.api.pods[names[2]]["metadata"]["creationTimestamp"] = "2023-11-14T22:10:00Z"
    harness.clock.now += harness.loop.config.unschedulable_grace_s + 1
    for _ in range(20):
        harness.clock.now += 1
        harness.loop.run_pass()
    assert [event.reason for event in posted] == [events.UNSCHEDULABLE]
    assert posted[0].message.startswith(
        f"4 trial pods have not been scheduled; the longest waiting, {names[2]}, for "
    )
    assert "Insufficient cpu" in posted[0].message
    harness.clock.now += harness.loop.config.unschedulable_event_interval_s
    harness.loop.run_pass()
    assert len(posted) == 2 and posted[1].message.startswith("4 trial pods")
    for name in names:
        harness.api.pods[name]["status"]["conditions"] = []
    harness.clock.now += 10 * harness.loop.config.unschedulable_event_interval_s
    harness.loop.run_pass()
    assert len(posted) == 2
