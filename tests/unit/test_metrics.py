"""passhat.metrics: the DESIGN metric names exist and per-eval series follow the status."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from passhat import metrics
from passhat.api.errors import UsageError
from passhat.stats import TaskTally, summarize_many

# Every name DESIGN.md lists under "Metrics" (counters are exposed with `_total`).
DESIGN_NAMES = [
    "passhat_pass_hat_k",
    "passhat_pass_at_k",
    "passhat_mean_pass_rate",
    "passhat_tasks_scored",
    "passhat_flaky_tasks",
    "passhat_infra_error_ratio",
    "passhat_gate_passed",
    "passhat_trials_total",
    "passhat_trials_running",
    "passhat_trial_duration_seconds",
    "passhat_reconcile_duration_seconds",
    "passhat_api_errors_total",
    # added with the record archive (issue #18; docs/operator.md#metrics)
    "passhat_infra_error_attempts",
    "passhat_records_archived_total",
    "passhat_archive_errors_total",
    # added with create pacing (issue #17; docs/operator.md#pacing-writes)
    "passhat_create_backoffs_total",
    # added with release gates (issue #21; docs/operator.md#metrics)
    "passhat_interval_bound",
    # added with queues (issue #23; docs/operator.md#queues-kueue)
    "passhat_trials_waiting",
    # added with the grader stability check (issue #19; docs/operator.md#metrics)
    "passhat_grader_noise_rate",
    # added with what the trials cost (issue #21; docs/operator.md#metrics)
    "passhat_cost_usd",
    "passhat_tokens",
    "passhat_cpu_seconds",
    # added with suites (issue #21; docs/operator.md#metrics)
    "passhat_eval_suite",
    "passhat_suite_pass_hat_k",
]

STATUS = {
    "phase": "Running",
    "progress": {"done": 10, "running": 3, "waiting": 2, "pending": 5, "retries": 1},
    "summary": {
        "byK": [
            {"k": 1, "tasksScored": 4, "meanPassRate": 0.75, "passAtK": 0.75, "passHatK": 0.75},
            {"k": 3, "tasksScored": 2, "meanPassRate": 0.5, "passAtK": 0.9, "passHatK": 0.25},
        ],
        "infraErrorRate": 0.125,
    },
    "flaky": ["t1", "t2"],
    "gate": {"metric": "passHatK", "k": 3, "min": 0.5, "value": 0.25, "passed": False},
}


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of `registry` keyed by (name, sorted labels)."""
    text = generate_latest(registry).decode()
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def of_eval(registry: CollectorRegistry, ns: str, ev: str) -> dict[str, float]:
    """The samples of one eval as `name{k=..,outcome=..}` -> value."""
    out = {}
    for (name, labels), value in samples(registry).items():
        d = dict(labels)
        if d.pop("namespace", None) == ns and d.pop("eval", None) == ev:
            extra = ",".join(f"{k}={v}" for k, v in sorted(d.items()))
            out[f"{name}{{{extra}}}"] = value
    return out


@pytest.fixture
def fresh() -> tuple[CollectorRegistry, metrics.Metrics]:
    """A private registry with every metric defined, so tests never share series."""
    registry = CollectorRegistry()
    return registry, metrics.define(registry)


def test_design_names_are_exported() -> None:
    """METRIC_NAMES is exactly the DESIGN list, and the served registry exposes each one."""
    assert sorted(metrics.METRIC_NAMES) == sorted(DESIGN_NAMES)
    names = {f.name for f in metrics.REGISTRY.collect()}
    # prometheus_client names counter families without `_total`
    exposed = {n for n in names} | {f"{n}_total" for n in names}
    for name in DESIGN_NAMES:
        assert name in exposed, name


def test_help_texts_list_label_values(fresh: tuple[CollectorRegistry, metrics.Metrics]) -> None:
    """Every per-eval (per-suite) metric's help text names its labels."""
    registry, _ = fresh
    for family in registry.collect():
        per_suite = family.name.startswith("passhat_suite_")
        labels = "labels: namespace, suite" if per_suite else "labels: namespace, eval"
        assert labels in family.documentation, family.name
    for metric in (
        metrics.RECONCILE_DURATION_SECONDS,
        metrics.API_ERRORS_TOTAL,
        metrics.CREATE_BACKOFFS_TOTAL,
    ):
        assert "labels" in metric._documentation


def test_observe_status_sets_every_gauge(fresh: tuple[CollectorRegistry, metrics.Metrics]) -> None:
    """A status dict becomes per-k and per-eval gauges with the status's values."""
    registry, m = fresh
    metrics.observe_status("ns1", "ev", STATUS, metrics=m)
    got = of_eval(registry, "ns1", "ev")
    assert got["passhat_pass_hat_k{k=3}"] == 0.25
    assert got["passhat_pass_at_k{k=3}"] == 0.9
    assert got["passhat_mean_pass_rate{k=1}"] == 0.75
    assert got["passhat_tasks_scored{k=3}"] == 2
    assert got["passhat_flaky_tasks{}"] == 2
    assert got["passhat_infra_error_ratio{}"] == 0.125
    assert got["passhat_gate_passed{}"] == 0
    assert got["passhat_trials_running{}"] == 3
    assert got["passhat_trials_waiting{}"] == 2


def test_flaky_count_beats_capped_list(fresh: tuple[CollectorRegistry, metrics.Metrics]) -> None:
    """status.flakyCount, when present, wins over the length of the capped flaky list."""
    registry, m = fresh
    status = {**STATUS, "flakyCount": 250}
    metrics.observe_status("ns1", "ev", status, metrics=m)
    assert of_eval(registry, "ns1", "ev")["passhat_flaky_tasks{}"] == 250


def test_malformed_status_never_raises(fresh: tuple[CollectorRegistry, metrics.Metrics]) -> None:
    """Garbage in a status leaves series absent instead of breaking the reconcile."""
    registry, m = fresh
    for status in ({}, {"summary": None}, {"summary": {"byK": [None, {"k": "x"}]}}, {"gate": 3}):
        metrics.observe_status("ns1", "bad", status, metrics=m)
    assert of_eval(registry, "ns1", "bad") == {}


def test_gate_series_goes_when_gate_goes(fresh: tuple[CollectorRegistry, metrics.Metrics]) -> None:
    """An eval without a gate has no passhat_gate_passed series."""
    registry, m = fresh
    metrics.observe_status("ns1", "ev", STATUS, metrics=m)
    metrics.observe_status("ns1", "ev", {k: v for k, v in STATUS.items() if k != "gate"}, metrics=m)
    assert "passhat_gate_passed{}" not in of_eval(registry, "ns1", "ev")


def test_forget_eval_removes_only_that_eval(
    fresh: tuple[CollectorRegistry, metrics.Metrics],
) -> None:
    """forget_eval drops every series of one eval and keeps the others and operator health."""
    registry, m = fresh
    for ev in ("a", "b"):
        metrics.observe_status("ns1", ev, STATUS, metrics=m)
        metrics.observe_trial(
            "ns1", ev, outcome="pass", reason="exit_code", duration_s=2.0, metrics=m
        )
    metrics.observe_status("ns2", "a", STATUS, metrics=m)
    metrics.forget_eval("ns1", "a", metrics=m)
    assert of_eval(registry, "ns1", "a") == {}
    assert of_eval(registry, "ns1", "b")["passhat_trials_total{outcome=pass,reason=exit_code}"] == 1
    assert of_eval(registry, "ns2", "a")["passhat_pass_hat_k{k=1}"] == 0.75


def test_api_errors_count_per_verb() -> None:
    """observe_api_error increments the operator's passhat_api_errors_total{verb}."""
    before = metrics.REGISTRY.get_sample_value("passhat_api_errors_total", {"verb": "evict"})
    metrics.observe_api_error("evict")
    after = metrics.REGISTRY.get_sample_value("passhat_api_errors_total", {"verb": "evict"})
    assert after == (before or 0) + 1


def test_observe_trial_counts_and_times(fresh: tuple[CollectorRegistry, metrics.Metrics]) -> None:
    """Each accepted attempt is one counter increment and one histogram observation."""
    registry, m = fresh
    metrics.observe_trial(
        "ns", "e", outcome="infra_error", reason="oom_killed", duration_s=7, metrics=m
    )
    metrics.observe_trial("ns", "e", outcome="infra_error", reason="oom_killed", metrics=m)
    got = of_eval(registry, "ns", "e")
    assert got["passhat_trials_total{outcome=infra_error,reason=oom_killed}"] == 2
    assert got["passhat_trial_duration_seconds_count{outcome=infra_error}"] == 1
    assert got["passhat_trial_duration_seconds_bucket{le=10.0,outcome=infra_error}"] == 1
    assert got["passhat_trial_duration_seconds_bucket{le=5.0,outcome=infra_error}"] == 0


def test_write_textfile_matches_summaries(tmp_path: Path) -> None:
    """The textfile holds the operator's names and labels, computed from the summaries."""
    tallies = [TaskTally("a", 3, 1, 1), TaskTally("b", 4, 0, 0)]
    summaries = summarize_many(tallies, [1, 3])
    rows = [{"outcome": "pass", "reason": "exit_code", "duration_s": 1.5}] * 7 + [
        {"outcome": "fail", "reason": "exit_code", "duration_s": 2},
        {"outcome": "infra_error", "reason": "timeout", "duration_s": 30},
    ]
    path = tmp_path / "passhat.prom"
    metrics.write_textfile(
        path, eval_name="demo", summaries=summaries, trials=rows, gate_passed=True
    )
    got = {}
    for family in text_string_to_metric_families(path.read_text()):
        for s in family.samples:
            d = dict(s.labels)
            assert d.pop("namespace") == "local" and d.pop("eval") == "demo"
            got[f"{s.name}{{{','.join(f'{k}={v}' for k, v in sorted(d.items()))}}}"] = s.value
    assert got["passhat_pass_hat_k{k=3}"] == pytest.approx(summaries[1].pass_hat_k)
    assert got["passhat_mean_pass_rate{k=1}"] == pytest.approx(summaries[0].mean_pass_rate)
    assert got["passhat_infra_error_ratio{}"] == pytest.approx(1 / 9)
    assert got["passhat_flaky_tasks{}"] == 1
    assert got["passhat_gate_passed{}"] == 1
    assert got["passhat_trials_total{outcome=pass,reason=exit_code}"] == 7
    assert got["passhat_trials_running{}"] == 0
    assert [p.name for p in tmp_path.iterdir()] == ["passhat.prom"]


def test_spend_follows_status_usage(fresh: tuple[CollectorRegistry, metrics.Metrics]) -> None:
    """status.usage becomes passhat_cost_usd, passhat_tokens{kind} and passhat_cpu_seconds;
    absent while nothing was reported or measured."""
    registry, m = fresh
    metrics.observe_status("ns1", "ev", {"usage": {}}, metrics=m)
    assert not any(
        k.startswith(("passhat_cost", "passhat_tokens")) for k in of_eval(registry, "ns1", "ev")
    )
    usage = {
        "reportedAttempts": 3,
        "measuredAttempts": 2,
        "inputTokens": 1200,
        "outputTokens": 80,
        "costUSD": 0.75,
        "cpuSeconds": 4.5,
    }
    metrics.observe_status("ns1", "ev", {"usage": usage}, metrics=m)
    got = of_eval(registry, "ns1", "ev")
    assert got["passhat_cost_usd{}"] == 0.75
    assert got["passhat_tokens{kind=input}"] == 1200
    assert got["passhat_tokens{kind=output}"] == 80
    assert got["passhat_cpu_seconds{}"] == 4.5


def test_write_textfile_to_a_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    """An unwritable path is one clear UsageError naming it, and leaves no temp file."""
    target = tmp_path / "nope" / "passhat.prom"
    with pytest.raises(UsageError, match="cannot write the metrics file") as err:
        metrics.write_textfile(target, eval_name="demo", summaries=[])
    assert str(err.value).startswith(f"{target}: ")
    assert list(tmp_path.iterdir()) == []


def test_operator_doc_lists_every_metric() -> None:
    """docs/operator.md's Metrics table names every exported metric."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "operator.md").read_text()
    for name in metrics.METRIC_NAMES:
        assert f"`{name}`" in doc, name


def test_infra_errors_by_reason_follow_the_status(
    fresh: tuple[CollectorRegistry, metrics.Metrics],
) -> None:
    """One series per reason in summary.infraErrorsByReason; a reason gone is dropped."""
    registry, defined = fresh
    status = {"summary": {"infraErrorRate": 0.1, "infraErrorsByReason": {"oom_killed": 2}}}
    metrics.observe_status("ns", "ev", status, metrics=defined)
    metrics.observe_status(
        "ns",
        "ev",
        {"summary": {"infraErrorsByReason": {"evicted": 1, "timeout": 3}}},
        metrics=defined,
    )
    series = {
        key: value
        for key, value in of_eval(registry, "ns", "ev").items()
        if key.startswith("passhat_infra_error_attempts")
    }
    assert series == {
        "passhat_infra_error_attempts{reason=evicted}": 1.0,
        "passhat_infra_error_attempts{reason=timeout}": 3.0,
    }


def test_status_intervals_become_bound_series(
    fresh: tuple[CollectorRegistry, metrics.Metrics],
) -> None:
    """Each byK row's interval pairs are `passhat_interval_bound` low/high series."""
    registry, m = fresh
    status = {
        "summary": {
            "byK": [
                {
                    "k": 2,
                    "tasksScored": 3,
                    "meanPassRate": 0.5,
                    "passAtK": 0.6,
                    "passHatK": 0.4,
                    "meanPassRateInterval": [0.2, 0.8],
                    "passAtKInterval": [0.3, 0.9],
                    "passHatKInterval": [0.1, 0.7],
                }
            ]
        }
    }
    metrics.observe_status("ns", "ev", status, metrics=m)
    got = of_eval(registry, "ns", "ev")
    assert got["passhat_interval_bound{bound=low,k=2,metric=pass_hat_k}"] == 0.1
    assert got["passhat_interval_bound{bound=high,k=2,metric=mean_pass_rate}"] == 0.8
    status["summary"]["byK"][0] = {"k": 2, "tasksScored": 3, "passHatK": 0.4}
    metrics.observe_status("ns", "ev", status, metrics=m)
    assert not [n for n in of_eval(registry, "ns", "ev") if "interval" in n]
