"""spec.podRetention: which finished trial pods stay once their outcome is in status.

`all` (the default) is pinned by test_operator_loop.py; here `failed` and `none` leave
exactly the pods they promise, count exactly what `all` counts, also when the operator is
killed at random API calls, and never delete a pod before its outcome is in status.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from passhat.operator.loop import EvalLoop
from passhat.operator.pods import FINALIZER, LABEL_RECORDED, EvalRef, pod_key
from passhat.trials.ledger import SlotLedger, SlotState
from tests.unit.test_operator_loop import (
    CONFIG,
    N_TASKS,
    TRIALS,
    Harness,
    comparable,
    spec,
)


def attempts_left(harness: Harness) -> list[tuple[int, int, int]]:
    """(task, trial, attempt) of every pod still in the fake API server."""
    return sorted(
        (key.task, key.trial, key.attempt)
        for pod in harness.api.pods.values()
        if (key := pod_key(pod)) is not None
    )


def not_passed(status: dict[str, Any]) -> list[tuple[int, int, int]]:
    """Every recorded attempt but the final one of a slot that passed."""
    ledger = SlotLedger.unpack(status["ledger"])
    return sorted(
        (task, trial, attempt)
        for task in range(N_TASKS)
        for trial in range(TRIALS)
        for attempt in range(ledger.attempts(task, trial))
        if not (
            ledger.state(task, trial) == SlotState.PASS
            and attempt == ledger.attempts(task, trial) - 1
        )
    )


def test_retention_none_deletes_every_pod_and_counts_the_same() -> None:
    """`none`: the same status as `all`, no pod left; each attempt's pod is released
    (finalizer out) and deleted, once."""
    reference = Harness(0)
    reference.run()
    harness = Harness(0, body=spec(podRetention="none"))
    harness.run()
    assert comparable(harness.status) == comparable(reference.status)
    assert harness.api.pods == {}
    recorded = len(harness.recorded)
    assert harness.api.writes["keep"] == 0
    assert harness.api.writes["release"] == harness.api.writes["delete"] == recorded


def test_retention_failed_keeps_only_pods_of_attempts_that_did_not_pass() -> None:
    """`failed`: fails, infra errors (retried or not) stay, labelled recorded and released;
    the pod of every slot's passing attempt is deleted."""
    harness = Harness(0, body=spec(podRetention="failed"))
    harness.run()
    left = attempts_left(harness)
    assert left == not_passed(harness.status)
    assert 0 < len(left) < len(harness.recorded)
    for pod in harness.api.pods.values():
        assert pod["metadata"]["labels"][LABEL_RECORDED] == "true"
        assert FINALIZER not in pod["metadata"].get("finalizers", [])


@pytest.mark.parametrize("retention", ["none", "failed"])
@pytest.mark.parametrize("seed", [21, 22, 23, 24])
def test_killed_at_random_api_calls_retention_counts_exactly(retention: str, seed: int) -> None:
    """Kills at random API calls with pods being deleted: the uninterrupted status, each
    attempt created once, no finalizer left, and the pods left are exactly the promised."""
    reference = Harness(0)
    reference.run()
    harness = Harness(seed, body=spec(podRetention=retention))
    harness.run(kill_chance=0.35)
    assert harness.kills >= 5
    assert comparable(harness.status) == comparable(reference.status)
    assert harness.api.pods_with_finalizer() == []
    assert len(harness.api.created_names) == len(set(harness.api.created_names))
    expected = [] if retention == "none" else not_passed(harness.status)
    assert attempts_left(harness) == expected


def test_no_pod_is_deleted_before_its_outcome_is_in_status() -> None:
    """Every pod gone from the API server is an attempt the stored ledger holds."""
    harness = Harness(5, body=spec(podRetention="none"))
    created: set[str] = set()

    def check() -> None:
        created.update(harness.api.created_names)
        gone = created - set(harness.api.pods)
        ledger = SlotLedger.unpack(harness.status["ledger"]) if harness.status else None
        for name in gone:
            _, _, task, trial, attempt = name.rsplit("-", 4)
            slot = (int(task[1:]), int(trial))
            assert ledger is not None and int(attempt[1:]) < ledger.attempts(*slot), name

    harness.run(between=check, kill_chance=0.2)
    assert harness.api.pods == {}


def test_a_stability_check_without_a_record_store_keeps_every_pod() -> None:
    """Without a record store the grader stability check reads its sample's transcripts
    from the kept pods, so `none` keeps them (they are needed); with a store it does not."""
    grading = {
        "grader": {"image": "judge:1", "command": ["judge"]},
        "stabilityCheck": {"sample": 10, "times": 2},
    }
    body = {"spec": spec(podRetention="none", grading=grading)}
    loop = EvalLoop(Harness(0).api, EvalRef("ns", "demo", "uid"), config=CONFIG)
    assert loop._retention(body) == "all"
    assert loop._retention({"spec": spec(podRetention="none")}) == "none"
    assert loop._retention({"spec": spec(podRetention="bogus")}) == "all"
    assert loop._retention({"spec": spec()}) == "all"


class LaggingList:
    """A pod list that lags the API server as a watch-fed cache does: each call returns
    the truth as of one of the last `lag` calls, never older than what an earlier call
    returned (a cache only moves forward)."""

    def __init__(self, harness: Harness, lag: int, seed: int) -> None:
        self.truth = harness.api.list_pods
        self.snapshots: list[list[dict[str, Any]]] = []
        self.shown = 0
        self.lag = lag
        self.rng = random.Random(seed)

    def __call__(self, namespace: str, eval_uid: str) -> list[dict[str, Any]]:
        self.snapshots.append(self.truth(namespace, eval_uid))
        newest = len(self.snapshots) - 1
        self.shown = max(self.shown, newest - self.rng.randint(0, self.lag))
        return self.snapshots[self.shown]


@pytest.mark.parametrize("retention", ["all", "none"])
@pytest.mark.parametrize("seed", [31, 32, 33, 34, 35])
def test_a_lagging_pod_list_under_kills_counts_exactly(retention: str, seed: int) -> None:
    """The pod list behind by up to 4 passes (pods missing, finished pods shown running,
    released pods shown unreleased) and kills at random API calls: the uninterrupted
    status, no attempt lost or counted twice, each attempt's pod created once."""
    reference = Harness(0)
    reference.run()
    harness = Harness(seed, body=spec(podRetention=retention))
    harness.api.list_pods = LaggingList(harness, lag=4, seed=seed)  # type: ignore[method-assign]
    harness.run(kill_chance=0.2)
    assert harness.kills >= 3
    assert comparable(harness.status) == comparable(reference.status)
    assert harness.api.pods_with_finalizer() == []
    assert len(harness.api.created_names) == len(set(harness.api.created_names))
    expected = (
        []
        if retention == "none"
        else sorted(
            (task, trial, attempt)
            for task in range(N_TASKS)
            for trial in range(TRIALS)
            for attempt in range(SlotLedger.unpack(harness.status["ledger"]).attempts(task, trial))
        )
    )
    assert attempts_left(harness) == expected


@pytest.mark.parametrize("seed", [41, 42, 43, 44])
def test_deferred_status_writes_under_kills_and_a_lagging_list_count_exactly(seed: int) -> None:
    """status_interval_s=3 (passes every second): most passes that record write nothing,
    their pods stay held and are folded in again by the pass that writes; with kills and a
    lagging pod list the status is the uninterrupted one, each attempt created once, no
    pod released before its outcome is in status, and far fewer status writes."""
    reference = Harness(0)
    reference.run()
    deferred = dataclasses.replace(CONFIG, status_interval_s=3.0)
    harness = Harness(seed, body=spec(podRetention="none"), config=deferred)
    harness.api.list_pods = LaggingList(harness, lag=2, seed=seed)  # type: ignore[method-assign]
    created: set[str] = set()

    def check() -> None:
        created.update(harness.api.created_names)
        ledger = SlotLedger.unpack(harness.status["ledger"]) if harness.status else None
        for name in created - set(harness.api.pods):
            _, _, task, trial, attempt = name.rsplit("-", 4)
            slot = (int(task[1:]), int(trial))
            assert ledger is not None and int(attempt[1:]) < ledger.attempts(*slot), name

    harness.run(between=check, kill_chance=0.2)
    assert comparable(harness.status) == comparable(reference.status)
    assert len(harness.api.created_names) == len(set(harness.api.created_names))
    assert harness.api.pods == {}
    assert harness.api.writes["status"] < reference.api.writes["status"]


def test_a_deferring_pass_creates_fresh_slots_but_not_the_retry_of_what_it_recorded() -> None:
    """The pass that defers its write creates pods for slots that never ran, never the next
    attempt of an outcome it has not written."""
    deferred = dataclasses.replace(CONFIG, status_interval_s=10.0)
    harness = Harness(7, body=spec(parallelism=2), config=deferred)
    harness.loop.run_pass()  # NB: creates t0-0 and t0-1; writes status
    first = sorted(harness.api.pods)
    for name in first:
        harness.finish(name, 75)  # NB: exit 75: infra error, retried
    harness.clock.now += 1
    result = harness.loop.run_pass()
    assert result.again_in_s is not None and result.status is None
    names = sorted(set(harness.api.pods) - set(first))
    assert len(names) == 2 and all(name.endswith("-a0") for name in names)
    assert all(FINALIZER in harness.api.pods[name]["metadata"]["finalizers"] for name in first)


def test_a_slow_status_write_stretches_the_interval_to_its_share() -> None:
    """A status write that took 0.5 s (share 0.1) defers the next write of outcomes for
    5 s, not 1; one that took 2 s for at most `status_interval_max_s` (10 s, not 20); a fast
    one leaves `status_interval_s`."""
    config = dataclasses.replace(CONFIG, status_interval_s=1.0)
    harness = Harness(7, body=spec(parallelism=2), config=config)
    patch = harness.api.patch_eval_status
    slow = {"s": 0.5}

    def slow_patch(*args: Any, **kwargs: Any) -> Any:
        harness.clock.now += slow["s"]
        return patch(*args, **kwargs)

    harness.api.patch_eval_status = slow_patch  # type: ignore[method-assign]
    harness.loop.run_pass()  # NB: creates the first two pods

    def end_what_runs() -> None:
        harness.kubelet.step(share=1.0)  # NB: starts the pending pods
        harness.kubelet.step(share=1.0)  # NB: ends them

    for write_s, deferred_for in ((0.5, 5.0), (2.0, 10.0), (0.0, 1.0)):
        slow["s"] = write_s
        end_what_runs()
        harness.clock.now += 60
        written = harness.loop.run_pass()
        assert written.recorded and written.status is not None
        end_what_runs()
        harness.clock.now += 0.2
        result = harness.loop.run_pass()
        assert result.status is None and result.again_in_s is not None, (write_s, result.recorded)
        # NB: due = written_at (the pass's start) + interval - now
        assert result.again_in_s == pytest.approx(deferred_for - 0.2 - write_s, abs=1e-6)
