"""passhat.operator.events: event texts name what happened, retries are rate-limited."""

from __future__ import annotations

import logging

import pytest

from passhat.operator import events


def test_retry_burst_counts_reasons_and_names_a_few() -> None:
    """A burst of retries is one event: how many, by reason, the first few trials named,
    the delay range and the eval's running total."""
    notes = [
        events.RetryNote("t-7", 2, 0, "oom_killed", delay_s=10),
        events.RetryNote("t-8", 0, 1, "evicted", delay_s=20, message="node drained"),
    ]
    ev = events.trials_retried(notes, retries_total=5)
    assert (ev.type, ev.reason) == ("Warning", "TrialRetried")
    assert ev.message == (
        "2 trial attempts ended as infra errors (evicted 1, oom_killed 1), retrying in 10-20s: "
        "task t-7 trial 2 attempt 0 (oom_killed); task t-8 trial 0 attempt 1 (evicted: node "
        "drained); 5 retries so far"
    )
    many = [events.RetryNote(f"t{i}", 0, 0, "lost", delay_s=1) for i in range(300)]
    big = events.trials_retried(many, retries_total=300)
    assert big.message.startswith("300 trial attempts ended as infra errors (lost 300), ")
    assert "; and 295 more; 300 retries so far" in big.message
    assert len(big.message) < 600
    one = events.retries_exhausted([events.RetryNote("t-7", 2, 3, "oom_killed")])
    assert (one.type, one.reason) == ("Warning", "RetriesExhausted")
    assert one.message.startswith("1 trial slot used up their retries (oom_killed 1)")
    single = events.trials_retried(notes[:1], retries_total=1)
    assert single.message.startswith("1 trial attempt ended as an infra error (oom_killed 1)")
    assert single.message.endswith("; 1 retry so far")


def test_started_event_says_what_runs() -> None:
    """The start event gives slots, parallelism and the gate."""
    gate = {"metric": "passHatK", "k": 4, "min": 0.5}
    ev = events.started(tasks=4, trials=4, parallelism=4, gate=gate)
    assert (ev.type, ev.reason) == ("Normal", "Started")
    assert ev.message == (
        "started 4 tasks x 4 trials = 16 trial slots, at most 4 at a time; "
        "gate passHatK at k=4 >= 0.5"
    )


def test_config_error_event_names_the_field() -> None:
    """A config error event starts with the field to fix."""
    ev = events.config_error(field="spec.ks[1]", message="k=9 is larger than trials=8")
    assert (ev.type, ev.reason, ev.message) == (
        "Warning",
        "ConfigError",
        "spec.ks[1]: k=9 is larger than trials=8",
    )


def test_completed_event_carries_headline_numbers() -> None:
    """The completion event shows progress, mean, pass^k per k, flaky and infra %."""
    status = {
        "progress": {"done": 40},
        "summary": {
            "byK": [
                {"k": 1, "meanPassRate": 0.75, "passHatK": 0.75},
                {"k": 3, "meanPassRate": 0.75, "passHatK": 0.5},
            ],
            "infraErrorRate": 0.05,
        },
        "flaky": ["a"],
        "flakyCount": 2,
    }
    ev = events.completed(status)
    assert (ev.type, ev.reason) == ("Normal", "Completed")
    assert ev.message == (
        "all 40 trials final, mean pass rate 75.0%, pass^1 75.0%, pass^3 50.0%, "
        "2 flaky, infra errors 5.0%"
    )
    assert events.completed({}).message == "all ? trials final"


def test_gate_event_type_follows_verdict() -> None:
    """A missed gate is a Warning, a met gate is Normal."""
    missed = events.gate_result(metric="passHatK", k=3, minimum=0.95, value=0.5, passed=False)
    met = events.gate_result(metric="passHatK", k=3, minimum=0.5, value=0.5, passed=True)
    assert (missed.type, missed.reason) == ("Warning", "GateFailed")
    assert (met.type, met.reason) == ("Normal", "GatePassed")
    assert "0.5000 missed the minimum 0.95" in missed.message


def test_retry_limiter_windows_per_eval() -> None:
    """At most `burst` retry events per eval per window; other evals are unaffected."""
    now = [0.0]
    limiter = events.RetryLimiter(burst=3, window_s=60, clock=lambda: now[0])
    assert [limiter.allow("ns", "a") for _ in range(5)] == [True, True, True, False, False]
    assert limiter.allow("ns", "b")
    now[0] = 60.0
    assert limiter.allow("ns", "a")
    limiter.forget("ns", "a")


def test_post_outside_operator_logs(caplog: pytest.LogCaptureFixture) -> None:
    """Without a running kopf operator, post() logs the event instead of raising."""
    body = {
        "apiVersion": "passhat.dev/v1alpha1",
        "kind": "ConsistencyEval",
        "metadata": {"name": "e", "namespace": "ns", "uid": "u"},
    }
    with caplog.at_level(logging.INFO, logger="passhat.operator.events"):
        events.post(body, events.config_error(field="spec.trials", message="must be >= 1"))
    assert "spec.trials: must be >= 1" in caplog.text
