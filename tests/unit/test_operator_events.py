"""passhat.operator.events: event texts name what happened, retries are rate-limited."""

from __future__ import annotations

import logging

import pytest

from passhat.operator import events


def test_retry_event_names_slot_reason_and_delay() -> None:
    """A retry event says which slot, why, and when the next attempt starts."""
    ev = events.trial_retried(task_id="t-7", trial=2, attempt=0, reason="oom_killed", delay_s=10)
    assert (ev.type, ev.reason) == ("Warning", "TrialRetried")
    assert ev.message == (
        "task t-7 trial 2 attempt 0 ended as infra_error/oom_killed; retrying as attempt 1 in 10s"
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
        "all 40 trials final, mean pass rate 0.7500, pass^1=0.7500, pass^3=0.5000, "
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
