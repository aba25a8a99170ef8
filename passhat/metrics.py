"""Every Prometheus metric passhat exports, defined once, for both executors.

One dashboard serves an eval run by the operator and one run by `passhat run`, so the
metric names, labels and help texts live here and nowhere else: the operator serves
`REGISTRY` on /metrics and fills it with `observe_status` / `observe_trial`; the local
executor writes the same names to a node-exporter textfile with `write_textfile`.
Per-eval series carry `namespace` and `eval` (and `k` where it applies), never a task id
(cardinality); `forget_eval` drops an eval's series when the resource is deleted.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from passhat.api.errors import UsageError
from passhat.stats import KIntervals, KSummary
from passhat.trials.classify_pod import parse_timestamp
from passhat.trials.usage import SpendTotals, UsageSummary

__all__ = [
    "API_ERRORS_TOTAL",
    "COST_USD",
    "CPU_SECONDS",
    "CREATE_BACKOFFS_TOTAL",
    "EVAL_SUITE",
    "FLAKY_TASKS",
    "GATE_PASSED",
    "GRADER_NOISE_RATE",
    "INFRA_ERROR_RATIO",
    "INTERVAL_BOUND",
    "MEAN_PASS_RATE",
    "METRIC_NAMES",
    "PASS_AT_K",
    "PASS_HAT_K",
    "RECONCILE_DURATION_SECONDS",
    "REGISTRY",
    "SUITE_PASS_HAT_K",
    "TASKS_SCORED",
    "TOKENS",
    "TRIALS_RUNNING",
    "TRIALS_TOTAL",
    "TRIALS_WAITING",
    "TRIAL_DURATION_SECONDS",
    "Metrics",
    "forget_eval",
    "observe_api_error",
    "observe_create_backoff",
    "observe_status",
    "observe_summaries",
    "observe_trial",
    "write_textfile",
]

# Trials last from seconds to the 30-minute default timeout and beyond.
TRIAL_DURATION_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, float("inf"))
# One reconcile pass: a list of pods, a few creates/deletes and one status patch.
# NB: 2 s is a bucket edge: #22 asks for a median pass of at most 2 s at 100,000 trials.
RECONCILE_DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, float("inf"))

_EVAL = ("namespace", "eval")
_EVAL_K = ("namespace", "eval", "k")
_LABEL_HELP = "labels: namespace, eval"
_K_HELP = "labels: namespace, eval, k (one of the eval's ks)"


@dataclass(frozen=True)
class _SuiteRun:
    """One complete eval of a suite: when it completed and its pass^k per k."""

    suite: str
    completed: float
    pass_hat_k: Mapping[str, float]


class SuiteRuns:
    """The complete runs of each suite, to show the newest one's pass^k per suite.

    A suite's runs are separate evals, each with its own series; the trend panel needs
    one series per suite whose value steps at each run's completion. So each complete
    eval that names a suite is remembered here by (namespace, eval), and the suite's
    gauge follows the one with the latest completion time (an operator restart, which
    observes the finished evals in any order, sets the same value). Thread-safe: status
    writes of several evals report from several threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[tuple[str, str], _SuiteRun] = {}

    def observe(self, gauge: Gauge, namespace: str, eval_name: str, run: _SuiteRun | None) -> None:
        """Record (or, with None, forget) an eval's complete run; update the gauges of the
        suites it was and is in."""
        with self._lock:
            before = self._runs.pop((namespace, eval_name), None)
            if run is not None:
                self._runs[(namespace, eval_name)] = run
            for suite in {r.suite for r in (before, run) if r is not None}:
                self._show(gauge, namespace, suite)

    def _show(self, gauge: Gauge, namespace: str, suite: str) -> None:
        runs = [r for (ns, _), r in self._runs.items() if ns == namespace and r.suite == suite]
        newest = max(runs, key=lambda r: r.completed, default=None)
        shown = newest.pass_hat_k if newest is not None else {}
        for k, value in shown.items():
            gauge.labels(namespace, suite, k).set(value)
        for family in gauge.collect():
            for sample in family.samples:
                labels = sample.labels
                if (
                    labels.get("namespace") == namespace
                    and labels.get("suite") == suite
                    and labels.get("k") not in shown
                ):
                    gauge.remove(namespace, suite, labels["k"])


@dataclass(frozen=True)
class Metrics:
    """The per-eval metric objects of one registry (the operator's, or a textfile's)."""

    pass_hat_k: Gauge
    pass_at_k: Gauge
    mean_pass_rate: Gauge
    tasks_scored: Gauge
    flaky_tasks: Gauge
    infra_error_ratio: Gauge
    infra_error_attempts: Gauge
    gate_passed: Gauge
    interval_bound: Gauge
    trials_total: Counter
    trials_running: Gauge
    trials_waiting: Gauge
    trial_duration_seconds: Histogram
    grader_noise_rate: Gauge
    cost_usd: Gauge
    tokens: Gauge
    cpu_seconds: Gauge
    eval_suite: Gauge
    suite_pass_hat_k: Gauge
    suites: SuiteRuns

    def per_eval(self) -> tuple[Gauge | Counter | Histogram, ...]:
        """The metrics whose series belong to one eval (namespace and eval labels)."""
        return (
            self.pass_hat_k,
            self.pass_at_k,
            self.mean_pass_rate,
            self.tasks_scored,
            self.flaky_tasks,
            self.infra_error_ratio,
            self.infra_error_attempts,
            self.gate_passed,
            self.interval_bound,
            self.trials_total,
            self.trials_running,
            self.trials_waiting,
            self.trial_duration_seconds,
            self.grader_noise_rate,
            self.cost_usd,
            self.tokens,
            self.cpu_seconds,
            self.eval_suite,
        )


def define(registry: CollectorRegistry) -> Metrics:
    """Create the per-eval metrics in `registry` (names are `passhat_<thing>_<unit|total>`)."""
    return Metrics(
        pass_hat_k=Gauge(
            "passhat_pass_hat_k",
            "Mean over scored tasks of pass^k = C(c,k)/C(n,k): the chance k trials in a row "
            f"all pass; {_K_HELP}",
            _EVAL_K,
            registry=registry,
        ),
        pass_at_k=Gauge(
            "passhat_pass_at_k",
            "Mean over scored tasks of unbiased pass@k = 1 - C(n-c,k)/C(n,k); " + _K_HELP,
            _EVAL_K,
            registry=registry,
        ),
        mean_pass_rate=Gauge(
            "passhat_mean_pass_rate",
            "Mean over the tasks scored at k of c/n (graded trials only); " + _K_HELP,
            _EVAL_K,
            registry=registry,
        ),
        tasks_scored=Gauge(
            "passhat_tasks_scored",
            "Tasks with at least k graded trials, the ones the averages are over; " + _K_HELP,
            _EVAL_K,
            registry=registry,
        ),
        flaky_tasks=Gauge(
            "passhat_flaky_tasks",
            "Tasks that both passed and failed (0 < c < n); " + _LABEL_HELP,
            _EVAL,
            registry=registry,
        ),
        infra_error_ratio=Gauge(
            "passhat_infra_error_ratio",
            "Infra-error attempts / all finished attempts (never scored, retried); " + _LABEL_HELP,
            _EVAL,
            registry=registry,
        ),
        infra_error_attempts=Gauge(
            "passhat_infra_error_attempts",
            "Infra-error attempts so far by reason, retried ones included (from status: exact "
            "across operator restarts); labels: namespace, eval, reason (oom_killed, evicted, "
            "preempted, timeout, node_lost, lost, deleted, image_error, config_error, "
            "reported, rejected, ...)",
            ("namespace", "eval", "reason"),
            registry=registry,
        ),
        gate_passed=Gauge(
            "passhat_gate_passed",
            "1 when the eval's gate passed, 0 when it failed (absent without a gate); "
            + _LABEL_HELP,
            _EVAL,
            registry=registry,
        ),
        interval_bound=Gauge(
            "passhat_interval_bound",
            "One end of the bootstrap interval over tasks of a per-k metric (the level is "
            "status.summary.intervalLevel, 0.95 or the gate's confidence); labels: "
            "namespace, eval, k, metric (mean_pass_rate, pass_at_k, pass_hat_k), bound "
            "(low, high)",
            (*_EVAL_K, "metric", "bound"),
            registry=registry,
        ),
        trials_total=Counter(
            "passhat_trials",
            "Finished trial attempts; labels: namespace, eval, outcome (pass, fail, "
            "infra_error), reason (exit_code, result, reported, oom_killed, timeout, evicted, "
            "preempted, node_lost, lost, deleted, image_error, config_error, exit_<code>)",
            ("namespace", "eval", "outcome", "reason"),
            registry=registry,
        ),
        trials_running=Gauge(
            "passhat_trials_running",
            "Trial attempts in flight (pods or processes started, not yet finished); "
            + _LABEL_HELP,
            _EVAL,
            registry=registry,
        ),
        trials_waiting=Gauge(
            "passhat_trials_waiting",
            "Trial attempts whose pod waits for a queue's admission (Kueue's scheduling "
            "gate); not running, not counted in passhat_trials_running; " + _LABEL_HELP,
            _EVAL,
            registry=registry,
        ),
        trial_duration_seconds=Histogram(
            "passhat_trial_duration_seconds",
            "Wall-clock duration of finished trial attempts; labels: namespace, eval, "
            "outcome (pass, fail, infra_error)",
            ("namespace", "eval", "outcome"),
            buckets=TRIAL_DURATION_BUCKETS,
            registry=registry,
        ),
        grader_noise_rate=Gauge(
            "passhat_grader_noise_rate",
            "Share of the regraded transcripts the grader both passed and failed, once the "
            "eval's grader stability check (spec.grading.stabilityCheck) ended (absent "
            "without one); " + _LABEL_HELP,
            _EVAL,
            registry=registry,
        ),
        cost_usd=Gauge(
            "passhat_cost_usd",
            "US dollars the eval's trial attempts reported spending (result JSON cost_usd; "
            "infra-error attempts included); " + _LABEL_HELP,
            _EVAL,
            registry=registry,
        ),
        tokens=Gauge(
            "passhat_tokens",
            "Tokens the eval's trial attempts reported (result JSON usage); labels: "
            "namespace, eval, kind (input, output)",
            ("namespace", "eval", "kind"),
            registry=registry,
        ),
        cpu_seconds=Gauge(
            "passhat_cpu_seconds",
            "CPU seconds passhat measured of the eval's trial attempts (where measured: "
            "docs/scoring.md#what-the-trials-cost); " + _LABEL_HELP,
            _EVAL,
            registry=registry,
        ),
        eval_suite=Gauge(
            "passhat_eval_suite",
            "1 for each eval that is a run of a suite (spec.suite, else the passhat.dev/suite "
            "label): join on (namespace, eval) to give any per-eval series its suite; labels: "
            "namespace, eval, suite",
            (*_EVAL, "suite"),
            registry=registry,
        ),
        suite_pass_hat_k=Gauge(
            "passhat_suite_pass_hat_k",
            "pass^k of the suite's newest complete run (the eval with the latest "
            "status.completionTime still present): its steps over time are the suite's "
            "trend; labels: namespace, suite, k",
            ("namespace", "suite", "k"),
            registry=registry,
        ),
        suites=SuiteRuns(),
    )


# The operator's registry, served on /metrics (with the usual process metrics).
REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
METRICS = define(REGISTRY)

PASS_HAT_K = METRICS.pass_hat_k
PASS_AT_K = METRICS.pass_at_k
MEAN_PASS_RATE = METRICS.mean_pass_rate
TASKS_SCORED = METRICS.tasks_scored
FLAKY_TASKS = METRICS.flaky_tasks
INFRA_ERROR_RATIO = METRICS.infra_error_ratio
GATE_PASSED = METRICS.gate_passed
INTERVAL_BOUND = METRICS.interval_bound
TRIALS_TOTAL = METRICS.trials_total
TRIALS_RUNNING = METRICS.trials_running
TRIALS_WAITING = METRICS.trials_waiting
TRIAL_DURATION_SECONDS = METRICS.trial_duration_seconds
GRADER_NOISE_RATE = METRICS.grader_noise_rate
COST_USD = METRICS.cost_usd
TOKENS = METRICS.tokens
CPU_SECONDS = METRICS.cpu_seconds
EVAL_SUITE = METRICS.eval_suite
SUITE_PASS_HAT_K = METRICS.suite_pass_hat_k

# Operator health: only the operator's registry has these.
RECONCILE_DURATION_SECONDS = Histogram(
    "passhat_reconcile_duration_seconds",
    "Duration of one operator reconcile pass of an eval (read pods, fold, create, write "
    "status); no labels",
    (),
    buckets=RECONCILE_DURATION_BUCKETS,
    registry=REGISTRY,
)
API_ERRORS_TOTAL = Counter(
    "passhat_api_errors",
    "Kubernetes API calls of the operator that failed; labels: verb (get, list, create, "
    "patch, delete, watch, evict, event)",
    ("verb",),
    registry=REGISTRY,
)
CREATE_BACKOFFS_TOTAL = Counter(
    "passhat_create_backoffs",
    "Times the API server refused an eval's trial pods for now and the eval's creates backed "
    "off (passhat.operator.pacing); labels: reason (QuotaExceeded, Throttled, Forbidden)",
    ("reason",),
    registry=REGISTRY,
)

RECORDS_ARCHIVED_TOTAL = Counter(
    "passhat_records_archived",
    "Trial attempts this operator archived into the record store (record and transcript)",
    registry=REGISTRY,
)
ARCHIVE_ERRORS_TOTAL = Counter(
    "passhat_archive_errors",
    "Archives of a trial attempt that failed and wait (their pod stays held); labels: "
    "cause (store: the record store failed, log: the pod's log could not be read yet)",
    ("cause",),
    registry=REGISTRY,
)

# The exposed names (counters gain `_total` on exposition), as DESIGN.md lists them.
METRIC_NAMES = (
    "passhat_pass_hat_k",
    "passhat_pass_at_k",
    "passhat_mean_pass_rate",
    "passhat_tasks_scored",
    "passhat_flaky_tasks",
    "passhat_infra_error_ratio",
    "passhat_infra_error_attempts",
    "passhat_gate_passed",
    "passhat_interval_bound",
    "passhat_trials_total",
    "passhat_trials_running",
    "passhat_trials_waiting",
    "passhat_trial_duration_seconds",
    "passhat_grader_noise_rate",
    "passhat_cost_usd",
    "passhat_tokens",
    "passhat_cpu_seconds",
    "passhat_eval_suite",
    "passhat_suite_pass_hat_k",
    "passhat_reconcile_duration_seconds",
    "passhat_api_errors_total",
    "passhat_records_archived_total",
    "passhat_archive_errors_total",
    "passhat_create_backoffs_total",
)


def _series(
    metric: Gauge | Counter | Histogram, namespace: str, eval_name: str
) -> set[tuple[str, ...]]:
    """The label-value tuples of `metric` that belong to one eval."""
    names = metric._labelnames  # NB: the one private attribute used; stable since 0.4
    found: set[tuple[str, ...]] = set()
    for family in metric.collect():
        for sample in family.samples:
            labels = sample.labels
            if labels.get("namespace") == namespace and labels.get("eval") == eval_name:
                found.add(tuple(labels[n] for n in names))
    return found


def _drop(
    metric: Gauge | Counter | Histogram, keep: set[tuple[str, ...]], ns: str, ev: str
) -> None:
    for values in _series(metric, ns, ev) - keep:
        metric.remove(*values)


def observe_summaries(
    namespace: str,
    eval_name: str,
    summaries: Sequence[KSummary],
    *,
    gate_passed: bool | None = None,
    running: int | None = None,
    intervals: Sequence[KIntervals] = (),
    metrics: Metrics = METRICS,
) -> None:
    """Set an eval's gauges from its per-k summaries (series of ks no longer listed go)."""
    keep: set[tuple[str, ...]] = set()
    for s in summaries:
        key = (namespace, eval_name, str(s.k))
        keep.add(key)
        metrics.pass_hat_k.labels(*key).set(s.pass_hat_k)
        metrics.pass_at_k.labels(*key).set(s.pass_at_k)
        metrics.mean_pass_rate.labels(*key).set(s.mean_pass_rate)
        metrics.tasks_scored.labels(*key).set(s.tasks_scored)
    for gauge in (metrics.pass_hat_k, metrics.pass_at_k, metrics.mean_pass_rate):
        _drop(gauge, keep, namespace, eval_name)
    _drop(metrics.tasks_scored, keep, namespace, eval_name)
    _set_intervals(
        metrics,
        namespace,
        eval_name,
        {
            i.k: {
                "mean_pass_rate": i.mean_pass_rate.as_json(),
                "pass_at_k": i.pass_at_k.as_json(),
                "pass_hat_k": i.pass_hat_k.as_json(),
            }
            for i in intervals
        },
    )
    if summaries:
        smallest = min(summaries, key=lambda s: s.k)
        metrics.flaky_tasks.labels(namespace, eval_name).set(len(smallest.flaky))
        metrics.infra_error_ratio.labels(namespace, eval_name).set(smallest.infra_error_rate)
    _set_gate(metrics, namespace, eval_name, gate_passed)
    if running is not None:
        metrics.trials_running.labels(namespace, eval_name).set(running)


_INTERVAL_FIELDS = {
    "mean_pass_rate": "meanPassRateInterval",
    "pass_at_k": "passAtKInterval",
    "pass_hat_k": "passHatKInterval",
}


def _set_intervals(
    metrics: Metrics, namespace: str, eval_name: str, by_k: Mapping[int, Mapping[str, Any]]
) -> None:
    """`passhat_interval_bound` of each k and metric ([low, high] pairs; others go)."""
    keep: set[tuple[str, ...]] = set()
    for k, pairs in by_k.items():
        for metric, pair in pairs.items():
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                continue
            for bound, value in zip(("low", "high"), pair, strict=True):
                key = (namespace, eval_name, str(k), metric, bound)
                keep.add(key)
                metrics.interval_bound.labels(*key).set(_number(value))
    _drop(metrics.interval_bound, keep, namespace, eval_name)


def _set_gate(metrics: Metrics, namespace: str, eval_name: str, passed: bool | None) -> None:
    if passed is None:
        _drop(metrics.gate_passed, set(), namespace, eval_name)
    else:
        metrics.gate_passed.labels(namespace, eval_name).set(1 if passed else 0)


def _number(value: Any, default: float = 0.0) -> float:
    return (
        float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default
    )


def _set_usage(metrics: Metrics, namespace: str, eval_name: str, usage: Any) -> None:
    """The spend gauges from `status.usage` (camelCase); absent while nothing was
    reported (cost, tokens) or measured (CPU)."""
    totals = SpendTotals.from_status(usage)
    if totals.reported:
        metrics.cost_usd.labels(namespace, eval_name).set(totals.cost_usd)
        metrics.tokens.labels(namespace, eval_name, "input").set(totals.input_tokens)
        metrics.tokens.labels(namespace, eval_name, "output").set(totals.output_tokens)
    if totals.measured:
        metrics.cpu_seconds.labels(namespace, eval_name).set(totals.cpu_seconds)


def observe_status(
    namespace: str, eval_name: str, status: Mapping[str, Any], *, metrics: Metrics = METRICS
) -> None:
    """Set an eval's gauges from its `status` as written to the resource (camelCase keys).

    Reads `summary.byK[]` (k, tasksScored, meanPassRate, passAtK, passHatK and their
    `*Interval` pairs),
    `summary.infraErrorRate`, `summary.infraErrorsByReason`, the flaky count (`flakyCount`
    when present, else the length of the capped `flaky` list), `gate.passed` and
    `progress.running` and, once the check is Done, `graderCheck.noiseRate`, and the
    spend in `usage` (costUSD, inputTokens, outputTokens, cpuSeconds). Missing
    parts leave their series absent; a malformed status never
    raises (metrics must not break a reconcile).
    """
    summary = status.get("summary") or {}
    by_k = summary.get("byK") or [] if isinstance(summary, Mapping) else []
    keep: set[tuple[str, ...]] = set()
    intervals: dict[int, dict[str, Any]] = {}
    for row in by_k:
        if not isinstance(row, Mapping) or not isinstance(row.get("k"), int):
            continue
        key = (namespace, eval_name, str(row["k"]))
        keep.add(key)
        intervals[row["k"]] = {
            metric: row[field] for metric, field in _INTERVAL_FIELDS.items() if field in row
        }
        metrics.pass_hat_k.labels(*key).set(_number(row.get("passHatK")))
        metrics.pass_at_k.labels(*key).set(_number(row.get("passAtK")))
        metrics.mean_pass_rate.labels(*key).set(_number(row.get("meanPassRate")))
        metrics.tasks_scored.labels(*key).set(_number(row.get("tasksScored")))
    for gauge in (
        metrics.pass_hat_k,
        metrics.pass_at_k,
        metrics.mean_pass_rate,
        metrics.tasks_scored,
    ):
        _drop(gauge, keep, namespace, eval_name)
    _set_intervals(metrics, namespace, eval_name, intervals)
    if isinstance(summary, Mapping) and "infraErrorRate" in summary:
        metrics.infra_error_ratio.labels(namespace, eval_name).set(
            _number(summary.get("infraErrorRate"))
        )
    by_reason = summary.get("infraErrorsByReason") if isinstance(summary, Mapping) else None
    reasons: set[tuple[str, ...]] = set()
    for reason, count in (by_reason if isinstance(by_reason, Mapping) else {}).items():
        reasons.add((namespace, eval_name, str(reason)))
        metrics.infra_error_attempts.labels(namespace, eval_name, str(reason)).set(_number(count))
    _drop(metrics.infra_error_attempts, reasons, namespace, eval_name)
    flaky_count: Any = status.get("flakyCount")
    flaky = status.get("flaky")
    if flaky_count is None and isinstance(flaky, list):
        flaky_count = len(flaky)
    if flaky_count is not None:
        metrics.flaky_tasks.labels(namespace, eval_name).set(_number(flaky_count))
    gate = status.get("gate")
    passed = gate.get("passed") if isinstance(gate, Mapping) else None
    _set_gate(metrics, namespace, eval_name, passed if isinstance(passed, bool) else None)
    progress = status.get("progress")
    if isinstance(progress, Mapping) and "running" in progress:
        metrics.trials_running.labels(namespace, eval_name).set(_number(progress.get("running")))
    if isinstance(progress, Mapping) and "waiting" in progress:
        metrics.trials_waiting.labels(namespace, eval_name).set(_number(progress.get("waiting")))
    check = status.get("graderCheck")
    if isinstance(check, Mapping) and check.get("phase") == "Done":
        metrics.grader_noise_rate.labels(namespace, eval_name).set(_number(check.get("noiseRate")))
    _set_usage(metrics, namespace, eval_name, status.get("usage"))
    _set_suite(metrics, namespace, eval_name, status)


def _set_suite(metrics: Metrics, namespace: str, eval_name: str, status: Mapping[str, Any]) -> None:
    """`passhat_eval_suite` from `status.suite`, and the eval as its suite's run once it is
    complete (`status.completionTime`)."""
    suite = status.get("suite")
    suite = suite if isinstance(suite, str) and suite else None
    keep: set[tuple[str, ...]] = {(namespace, eval_name, suite)} if suite is not None else set()
    if suite is not None:
        metrics.eval_suite.labels(namespace, eval_name, suite).set(1)
    _drop(metrics.eval_suite, keep, namespace, eval_name)
    completed = parse_timestamp(status.get("completionTime"))
    summary = status.get("summary")
    by_k = summary.get("byK") if isinstance(summary, Mapping) else None
    run = None
    if suite is not None and completed is not None and isinstance(by_k, list):
        values = {
            str(row["k"]): _number(row.get("passHatK"))
            for row in by_k
            if isinstance(row, Mapping) and isinstance(row.get("k"), int)
        }
        run = _SuiteRun(suite=suite, completed=completed, pass_hat_k=values)
    metrics.suites.observe(metrics.suite_pass_hat_k, namespace, eval_name, run)


def observe_trial(
    namespace: str,
    eval_name: str,
    *,
    outcome: str,
    reason: str,
    duration_s: float | None = None,
    metrics: Metrics = METRICS,
) -> None:
    """Count one finished attempt (call once, when the ledger accepts the record)."""
    metrics.trials_total.labels(namespace, eval_name, outcome, reason).inc()
    if duration_s is not None and duration_s >= 0:
        metrics.trial_duration_seconds.labels(namespace, eval_name, outcome).observe(duration_s)


def observe_api_error(verb: str) -> None:
    """Count one failed Kubernetes API call of the operator (verb: get, list, create, ...)."""
    API_ERRORS_TOTAL.labels(verb).inc()


def observe_create_backoff(reason: str) -> None:
    """Count one backoff of an eval's pod creates (reason: the CreateRefused reason)."""
    CREATE_BACKOFFS_TOTAL.labels(reason).inc()


def forget_eval(namespace: str, eval_name: str, *, metrics: Metrics = METRICS) -> None:
    """Remove every series of one eval (call when the resource is deleted)."""
    for metric in metrics.per_eval():
        _drop(metric, set(), namespace, eval_name)
    metrics.suites.observe(metrics.suite_pass_hat_k, namespace, eval_name, None)


def write_textfile(
    path: str | os.PathLike[str],
    *,
    eval_name: str,
    summaries: Sequence[KSummary],
    trials: Iterable[Mapping[str, Any]] = (),
    gate_passed: bool | None = None,
    namespace: str = "local",
    intervals: Sequence[KIntervals] = (),
    grader_noise_rate: float | None = None,
    usage: UsageSummary | None = None,
    suite: str | None = None,
    completed: float | None = None,
) -> None:
    """Write one eval's metrics in the Prometheus text format, atomically (temp + rename).

    `trials` are trial records (`trials.jsonl` rows: outcome, reason, duration_s). The
    file holds the same names and labels the operator serves, for node-exporter's textfile
    collector; `namespace` defaults to "local". `suite`: the run's suite; with `completed`
    (when the run completed, epoch seconds) it is the suite's newest run as well.
    UsageError when the file cannot be written.
    """
    registry = CollectorRegistry(auto_describe=True)
    metrics = define(registry)
    observe_summaries(
        namespace,
        eval_name,
        summaries,
        gate_passed=gate_passed,
        intervals=intervals,
        metrics=metrics,
    )
    metrics.trials_running.labels(namespace, eval_name).set(0)
    if grader_noise_rate is not None:
        metrics.grader_noise_rate.labels(namespace, eval_name).set(grader_noise_rate)
    if usage is not None:
        _set_usage(metrics, namespace, eval_name, usage.total.as_status())
    if suite is not None:
        metrics.eval_suite.labels(namespace, eval_name, suite).set(1)
        if completed is not None:
            values = {str(s.k): s.pass_hat_k for s in summaries}
            run = _SuiteRun(suite=suite, completed=completed, pass_hat_k=values)
            metrics.suites.observe(metrics.suite_pass_hat_k, namespace, eval_name, run)
    for record in trials:
        duration = record.get("duration_s")
        observe_trial(
            namespace,
            eval_name,
            outcome=str(record.get("outcome", "")),
            reason=str(record.get("reason", "")),
            duration_s=float(duration) if isinstance(duration, int | float) else None,
            metrics=metrics,
        )
    target = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(target))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".passhat-metrics-", dir=directory)
    except OSError as err:
        raise UsageError(f"{target}: cannot write the metrics file: {err.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(generate_latest(registry))
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException as err:
        os.unlink(tmp)
        if isinstance(err, OSError):
            raise UsageError(f"{target}: cannot write the metrics file: {err.strerror}") from None
        raise
