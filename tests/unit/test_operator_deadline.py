"""spec.activeDeadlineSeconds (#17 §2): past it the eval ends as a Job does, Failed with
reason DeadlineExceeded, its running pods deleted, no more created, what was scored kept."""

from __future__ import annotations

from typing import Any

from passhat.api import conditions as cond
from passhat.operator import events
from passhat.operator.deadline import deadline_message, seconds_left
from passhat.operator.loop import PassState
from passhat.operator.status import condition_status, is_terminal
from passhat.trials.ledger import SlotLedger
from tests.unit.test_operator_loop import Harness, spec

DEADLINE = 600


def harness_with_deadline(*, tasks: int = 4, **overrides: Any) -> tuple[Harness, list[Any]]:
    """`tasks` tasks x 1 trial, 2 at a time, a 600 s deadline; the loop keeps its events."""
    body = spec(
        tasks=[{"id": f"t{i}"} for i in range(tasks)],
        trials=1,
        ks=[1],
        parallelism=2,
        activeDeadlineSeconds=DEADLINE,
        **overrides,
    )
    harness = Harness(70, body=body)
    harness.api.evals["demo"]["metadata"]["creationTimestamp"] = "2023-11-14T22:13:20Z"
    posted = harness.collect_events()
    return harness, posted


def test_past_the_deadline_the_eval_fails_and_keeps_what_was_scored() -> None:
    """The pass after the deadline records the pod that finished, deletes the one still
    running, creates none, and ends Failed=True / Complete=False, reason DeadlineExceeded,
    with one DeadlineExceeded event; later passes change nothing."""
    harness, posted = harness_with_deadline()
    assert harness.loop.run_pass().state is PassState.CONTINUE
    running = sorted(harness.api.pods)
    assert len(running) == 2
    harness.clock.now += DEADLINE - 10
    harness.loop.run_pass()
    assert harness.status["phase"] != "Failed"
    harness.finish(running[0], 0)
    harness.clock.now += 10
    result = harness.loop.run_pass()
    assert result.state is PassState.DONE
    status = harness.status
    assert status["phase"] == "Failed"
    failed = cond.find_condition(status["conditions"], cond.FAILED)
    assert failed is not None and failed["status"] == "True"
    assert failed["reason"] == "DeadlineExceeded"
    assert failed["message"] == (
        "ConsistencyEval was active longer than specified deadline "
        "(spec.activeDeadlineSeconds: 600)"
    )
    complete = cond.find_condition(status["conditions"], cond.COMPLETE)
    assert complete is not None and complete["status"] == "False"
    assert complete["reason"] == "DeadlineExceeded"
    assert complete["message"].startswith("1/4 trial slots final; the rest never will: ")
    assert status["progress"] == {"done": 1, "running": 0, "waiting": 0, "pending": 3, "retries": 0}
    assert status["summary"]["byK"][0]["tasksScored"] == 1
    assert "completionTime" not in status
    ledger = SlotLedger.unpack(status["ledger"])
    assert ledger.done == 1 and ledger.is_final(0, 0)
    # the finished pod is kept (recorded), the running one deleted, none created
    assert list(harness.api.pods) == [running[0]]
    assert harness.api.kept_pods() == [running[0]]
    assert len(harness.api.created_names) == 2
    assert [event.reason for event in posted] == [events.DEADLINE_EXCEEDED]
    assert is_terminal(status)
    harness.clock.now += 100
    assert harness.loop.run_pass().state is PassState.DONE
    assert harness.status == status
    assert len(harness.api.created_names) == 2


def test_an_eval_done_before_its_deadline_completes() -> None:
    """An eval whose slots are all final before the deadline is Complete, not Failed."""
    harness, _ = harness_with_deadline(tasks=2)
    harness.loop.run_pass()
    for name in list(harness.api.pods):
        harness.finish(name, 0)
    harness.clock.now += 5
    assert harness.loop.run_pass().state is PassState.CONTINUE  # NB: lets the pods go
    assert harness.loop.run_pass().state is PassState.DONE
    assert condition_status(harness.status, cond.COMPLETE) == "True"
    assert condition_status(harness.status, cond.FAILED) is None
    harness.clock.now += 10 * DEADLINE
    assert harness.loop.run_pass().state is PassState.DONE
    assert harness.status["phase"] == "Succeeded"


def test_the_deadline_counts_from_the_start_time() -> None:
    """The deadline counts from status.startTime (the first pass), not from a later pass."""
    harness, _ = harness_with_deadline()
    harness.clock.now += 100  # created 100 s before the first pass
    harness.loop.run_pass()
    body = harness.api.evals["demo"]
    assert seconds_left(body, harness.clock.now) == DEADLINE
    assert deadline_message(body, harness.clock.now + DEADLINE - 1) is None
    assert deadline_message(body, harness.clock.now + DEADLINE) is not None


def test_an_eval_waiting_for_its_config_map_waits_no_longer_than_its_deadline() -> None:
    """Tasks from a ConfigMap that never comes: Pending with a ConfigError, then past the
    deadline (counted from creation: no pass started the eval) Failed, DeadlineExceeded."""
    harness, posted = harness_with_deadline(tasksFrom=[{"configMap": "never"}])
    del harness.api.evals["demo"]["spec"]["tasks"]
    assert harness.loop.run_pass().state is PassState.CONTINUE
    assert harness.status["phase"] == "Pending"
    harness.clock.now += DEADLINE
    assert harness.loop.run_pass().state is PassState.DONE
    status = harness.status
    assert status["phase"] == "Failed"
    assert condition_status(status, cond.FAILED) == "True"
    assert condition_status(status, cond.CONFIG_ERROR) == "True"
    assert [event.reason for event in posted] == [events.CONFIG_ERROR, events.DEADLINE_EXCEEDED]
    assert harness.api.pods == {}


def test_no_deadline_no_end() -> None:
    """Without activeDeadlineSeconds an eval runs as long as it takes."""
    harness, _ = harness_with_deadline()
    del harness.api.evals["demo"]["spec"]["activeDeadlineSeconds"]
    harness.loop.run_pass()
    harness.clock.now += 10**7
    assert harness.loop.run_pass().state is PassState.CONTINUE
    assert harness.status["phase"] != "Failed"
    assert len(harness.api.pods) == 2
