"""The public names of passhat.api and passhat.trials are pinned."""

from __future__ import annotations

import passhat.api
import passhat.trials


def test_api_exports() -> None:
    """passhat.api re-exports the spec, status, errors and loaders."""
    assert sorted(passhat.api.__all__) == [
        "ConsistencyEval",
        "EvalSpec",
        "EvalStatus",
        "InputError",
        "PasshatError",
        "SpecError",
        "Task",
        "UsageError",
        "load_eval",
        "parse_eval",
        "parse_spec",
        "resolve_tasks",
        "template_safety_problems",
    ]


def test_trials_exports() -> None:
    """passhat.trials re-exports outcomes, classification, ledger and retry plan."""
    assert {
        "LedgerError",
        "Outcome",
        "RetryPlan",
        "SlotLedger",
        "SlotState",
        "Verdict",
        "classify_exit",
        "parse_result",
    } <= set(passhat.trials.__all__)
    for name in passhat.trials.__all__:
        assert getattr(passhat.trials, name) is not None
