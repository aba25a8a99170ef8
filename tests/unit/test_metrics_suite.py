"""The suite in the metrics: an info series per eval, and the suite's newest complete run."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from passhat import metrics
from passhat.api.status import EvalStatus
from passhat.operator.handlers import with_suite
from passhat.operator.status import build_status
from passhat.stats import summarize_many, tally
from passhat.trials.ledger import SlotLedger
from tests.unit.test_metrics import samples
from tests.unit.test_operator_status import fill, inputs, make_spec


def status(suite: str | None, completed: str | None, pass_hat_2: float) -> dict[str, Any]:
    """A status as the operator writes it (only what the suite series read)."""
    body: dict[str, Any] = {
        "summary": {"byK": [{"k": 1, "passHatK": 0.9}, {"k": 2, "passHatK": pass_hat_2}]}
    }
    if suite is not None:
        body["suite"] = suite
    if completed is not None:
        body["completionTime"] = completed
    return body


@pytest.fixture
def fresh() -> tuple[CollectorRegistry, metrics.Metrics]:
    """A private registry with every metric defined."""
    registry = CollectorRegistry()
    return registry, metrics.define(registry)


def suite_series(registry: CollectorRegistry) -> dict[tuple[str, str, str], float]:
    """passhat_suite_pass_hat_k as (namespace, suite, k) -> value."""
    return {
        (dict(labels)["namespace"], dict(labels)["suite"], dict(labels)["k"]): value
        for (name, labels), value in samples(registry).items()
        if name == "passhat_suite_pass_hat_k"
    }


def test_the_newest_complete_run_sets_the_suite_whatever_the_order(
    fresh: tuple[CollectorRegistry, metrics.Metrics],
) -> None:
    """Three runs observed out of order (as after an operator restart): the suite shows the
    one that completed last; a running eval and an eval of no suite never count."""
    registry, m = fresh
    metrics.observe_status("ns", "r3", status("s", "2026-12-05T09:00:00Z", 0.25), metrics=m)
    metrics.observe_status("ns", "r1", status("s", "2026-12-05T07:00:00Z", 1.0), metrics=m)
    metrics.observe_status("ns", "r4", status("s", None, 0.0), metrics=m)
    metrics.observe_status("ns", "other", status(None, "2026-12-05T10:00:00Z", 0.5), metrics=m)
    assert suite_series(registry) == {("ns", "s", "1"): 0.9, ("ns", "s", "2"): 0.25}
    info = [dict(labels) for (name, labels) in samples(registry) if name == "passhat_eval_suite"]
    assert {labels["eval"] for labels in info} == {"r1", "r3", "r4"}


def test_deleting_the_newest_run_falls_back_and_the_last_one_clears(
    fresh: tuple[CollectorRegistry, metrics.Metrics],
) -> None:
    """forget_eval of the newest run shows the one before; of the last, no series at all."""
    registry, m = fresh
    metrics.observe_status("ns", "r1", status("s", "2026-12-05T07:00:00Z", 1.0), metrics=m)
    metrics.observe_status("ns", "r2", status("s", "2026-12-05T08:00:00Z", 0.5), metrics=m)
    metrics.forget_eval("ns", "r2", metrics=m)
    assert suite_series(registry)[("ns", "s", "2")] == 1.0
    metrics.forget_eval("ns", "r1", metrics=m)
    assert suite_series(registry) == {}
    assert not [n for (n, _), _ in samples(registry).items() if n == "passhat_eval_suite"]


def test_an_eval_moved_to_another_suite_leaves_the_first(
    fresh: tuple[CollectorRegistry, metrics.Metrics],
) -> None:
    """Its label (or spec.suite) changed: its run counts for the new suite only."""
    registry, m = fresh
    metrics.observe_status("ns", "r1", status("a", "2026-12-05T07:00:00Z", 1.0), metrics=m)
    metrics.observe_status("ns", "r1", status("b", "2026-12-05T07:00:00Z", 1.0), metrics=m)
    assert {key[1] for key in suite_series(registry)} == {"b"}


def test_status_carries_the_suite_the_metrics_read() -> None:
    """build_status writes status.suite (valid for the status model) when the eval has one."""
    spec = make_spec(3, 2, suite="nightly")
    ledger = SlotLedger(3, 2)
    fill(ledger, random.Random(1))
    written = build_status(inputs(spec, ledger, suite="nightly"))
    assert written["suite"] == "nightly"
    assert EvalStatus.model_validate(written).suite == "nightly"
    assert "suite" not in build_status(inputs(spec, ledger))


def test_textfile_of_a_completed_local_run_has_the_suite(tmp_path: Path) -> None:
    """write_textfile(suite=, completed=): the info series and the suite's pass^k."""
    summaries = summarize_many(tally([("a", "pass"), ("a", "fail")]), [1, 2])
    path = tmp_path / "m.prom"
    metrics.write_textfile(path, eval_name="e", summaries=summaries, suite="s", completed=1.0)
    found = {
        (family.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(path.read_text())
        for s in family.samples
    }
    assert found[("passhat_eval_suite", (("eval", "e"), ("namespace", "local"), ("suite", "s")))]
    assert found[("passhat_suite_pass_hat_k", (("k", "1"), ("namespace", "local"), ("suite", "s")))]
    metrics.write_textfile(path, eval_name="e", summaries=summaries)
    names = {
        family.name for family in text_string_to_metric_families(path.read_text()) if family.samples
    }
    assert not names & {"passhat_eval_suite", "passhat_suite_pass_hat_k"}


def test_a_finished_eval_labelled_into_a_suite_joins_it(
    fresh: tuple[CollectorRegistry, metrics.Metrics],
) -> None:
    """A finished eval's watch event is observed with the suite its labels give now (its
    status.suite is never rewritten), so labelling an old run adds it to the suite."""
    registry, m = fresh
    before = status(None, "2026-12-05T07:00:00Z", 0.5)
    metrics.observe_status("ns", "old", with_suite(before, "s"), metrics=m)
    assert suite_series(registry)[("ns", "s", "2")] == 0.5
    after = status("s", "2026-12-05T07:00:00Z", 0.5)  # its label removed: status.suite stale
    metrics.observe_status("ns", "old", with_suite(after, None), metrics=m)
    assert suite_series(registry) == {}
