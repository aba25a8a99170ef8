"""The chart's alerts and dashboard speak the metrics the operator really exports.

Every metric a PromQL expression of the dashboard or the PrometheusRule names must be one
`passhat.metrics` defines (or Prometheus' own `up`, or the process metrics the operator's
registry carries), every expression must parse (promtool), and the alerts must fire on the
series they are about (`promtool test rules`).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest

from passhat.metrics import METRIC_NAMES, REGISTRY
from tests.unit.chart_helpers import CHART, KUBE_VERSION, helm

DASHBOARD = CHART / "dashboards" / "passhat.json"
# What the dashboard's template variables stand for when an expression is checked.
VARIABLES = {
    "$namespace": "evals",
    "$eval": "support-agent",
    "$k": ".*",
    "$suite": "support-agent",
    "$job": "passhat",
    "$__rate_interval": "1m",
}
SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{")
PASSHAT_NAME = re.compile(r"\bpasshat_[a-z0-9_]+\b")


def exposed_names() -> set[str]:
    """Every sample name the operator's registry can expose (histograms with suffixes)."""
    names = {"up"}
    for line in generate_latest(REGISTRY).decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names.add(name)
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return names


def dashboard_exprs() -> list[str]:
    """The PromQL of every panel target and query variable of the dashboard."""
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"]
            inner = re.fullmatch(r"label_values\((.*), *[a-z_]+\)", query)
            assert inner, query
            exprs.append(inner.group(1))
    return exprs


def substitute(expr: str) -> str:
    """An expression with the dashboard variables replaced by concrete values."""
    for variable, value in sorted(VARIABLES.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(variable, value)
    return expr


def rule_groups() -> list[dict[str, Any]]:
    """The rule groups of the PrometheusRule the chart renders (release "ph")."""
    args = ["template", "ph", str(CHART), "--kube-version", KUBE_VERSION]
    proc = helm(*args, "--set", "prometheusRule.enabled=true")
    (rule,) = [d for d in yaml.safe_load_all(proc.stdout) if d and d["kind"] == "PrometheusRule"]
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def rule_exprs() -> list[str]:
    """The PromQL of every rule."""
    return [r["expr"] for g in rule_groups() for r in g["rules"]]


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run Debian's promtool (installed by hack/cluster/up.sh with prometheus)."""
    binary = shutil.which("promtool")
    if binary is None:
        pytest.fail("no promtool: apt-get install prometheus (hack/cluster/up.sh does)")
    return subprocess.run(
        [binary, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_metrics_module_exposes_the_design_names() -> None:
    """The registry exposes every name of METRIC_NAMES (the base of the checks below)."""
    names = exposed_names()
    assert set(METRIC_NAMES) <= names


@pytest.mark.parametrize("source", ["dashboard", "rules"])
def test_promql_names_are_defined_in_metrics_module(source: str) -> None:
    """Every metric named in the dashboard / rules is exported by passhat.metrics."""
    exprs = dashboard_exprs() if source == "dashboard" else rule_exprs()
    assert exprs
    names = exposed_names()
    for expr in exprs:
        used = set(PASSHAT_NAME.findall(expr)) | set(SELECTOR.findall(expr))
        used -= {"by", "without", "on", "ignoring", "group_left", "group_right"}
        assert used, expr
        assert used <= names, f"{sorted(used - names)} in {expr}"


def test_promtool_checks_rendered_rules(tmp_path: Path) -> None:
    """`promtool check rules` accepts the rules the chart renders."""
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule_groups()}))
    proc = promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 3 rules found" in proc.stdout


def test_dashboard_exprs_parse(tmp_path: Path) -> None:
    """Every dashboard expression (variables filled in) is valid PromQL for promtool."""
    rules = [
        {"record": f"dashboard:expr_{i}", "expr": substitute(e)}
        for i, e in enumerate(dashboard_exprs())
    ]
    (tmp_path / "dashboard.yaml").write_text(
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]})
    )
    proc = promtool("check", "rules", "dashboard.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def firing(alertname: str, labels: dict[str, str], **annotations: str) -> dict[str, Any]:
    """A promtool alert_rule_test case at 20m expecting one alert."""
    return {
        "eval_time": "20m",
        "alertname": alertname,
        "exp_alerts": [{"exp_labels": labels, "exp_annotations": annotations}],
    }


def test_alerts_fire_on_their_series(tmp_path: Path) -> None:
    """`promtool test rules`: each alert fires on its bad series and not on a healthy eval."""
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule_groups()}))
    bad = {"namespace": "evals", "eval": "support-agent"}
    series = {
        'passhat_gate_passed{namespace="evals", eval="support-agent"}': "0x30",
        'passhat_infra_error_ratio{namespace="evals", eval="support-agent"}': "0.2x30",
        'passhat_gate_passed{namespace="evals", eval="ok"}': "1x30",
        'passhat_infra_error_ratio{namespace="evals", eval="ok"}': "0.01x30",
        'up{job="ph-passhat", instance="a"}': "0x30",
    }
    cases = [
        firing(
            "PasshatGateFailing",
            {"severity": "warning", **bad},
            summary="ConsistencyEval evals/support-agent fails its gate",
            description="Its spec.gate is not met; see which tasks are flaky with: "
            "passhat report support-agent -n evals",
        ),
        firing(
            "PasshatInfraErrorRatioHigh",
            {"severity": "warning", **bad},
            summary="ConsistencyEval evals/support-agent: 20% of trial attempts are infra errors",
            description="OOM kills, evictions, timeouts and lost nodes are retried and never "
            "scored, so the score rests on fewer trials than asked. Check the trial pods' "
            "memory limits and the nodes: kubectl get events -n evals",
        ),
        # NB: `for: 15m` holds the infra alert back at first.
        {"eval_time": "10m", "alertname": "PasshatInfraErrorRatioHigh", "exp_alerts": []},
        firing(
            "PasshatOperatorDown",
            {"severity": "critical", "job": "ph-passhat", "instance": "a"},
            summary="The passhat operator cannot be scraped",
            description="No trial starts or ends while the operator is down (evals resume "
            "exactly where they were when it is back). Check its pod: kubectl -n default get "
            "pods -l app.kubernetes.io/component=operator",
        ),
    ]
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": k, "values": v} for k, v in series.items()],
                "alert_rule_test": cases,
            }
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    proc = promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dashboard_has_the_promised_panels() -> None:
    """The panels the issue lists: scores per k, gap, flaky, infra, trials, operator health."""
    board = json.loads(DASHBOARD.read_text())
    panels = [p for p in board["panels"] if p["type"] != "row"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    text = {p["title"]: " ".join(t["expr"] for t in p["targets"]) for p in panels}
    wanted = {
        "pass^k and pass@k per k": ("passhat_pass_hat_k", "passhat_pass_at_k"),
        "Mean pass rate − pass^k": ("passhat_mean_pass_rate", "- passhat_pass_hat_k"),
        "Flaky tasks": ("passhat_flaky_tasks",),
        "Infra-error ratio by reason": ('outcome="infra_error"', "by (reason)"),
        "Trials running": ("passhat_trials_running", "passhat_trials_waiting"),
        "Trial throughput by outcome": ("rate(passhat_trials_total",),
        "Trial duration": ("passhat_trial_duration_seconds_bucket",),
        "Operator up": ("up{",),
        "Reconcile duration": ("passhat_reconcile_duration_seconds",),
        "Kubernetes API errors": ("passhat_api_errors_total",),
        "pass^k by suite over time": ("passhat_suite_pass_hat_k",),
    }
    for title, fragments in wanted.items():
        assert title in text, title
        for fragment in fragments:
            assert fragment in text[title], (title, fragment)
    for panel in panels:
        assert panel["description"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
