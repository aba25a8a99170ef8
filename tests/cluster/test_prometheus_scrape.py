"""A real Prometheus scrapes the helm-installed operator; the dashboard and alerts work on it.

Debian's `prometheus` runs on a free loopback port with a static scrape config pointing at
the operator pod (the host reaches pod IPs through the node's CNI bridge) and the rules the
chart renders. After the example eval ran, every dashboard expression must return data, every
rule must evaluate cleanly, and the scraped scores must equal the eval's status.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from tests.cluster.helm_helpers import (
    CHART,
    Release,
    assert_example_numbers,
    ensure_image,
    example_eval,
    helm_args,
    installed_release,
    run,
    wait_complete,
)
from tests.cluster.prometheus_helpers import (
    get_json,
    poll,
    prometheus_binary,
    run_prometheus,
)

EVAL = "support-agent"
DASHBOARD = CHART / "dashboards" / "passhat.json"
QUERY_DEADLINE_S = 180


@dataclass(frozen=True)
class Scraped:
    """A release whose operator a running Prometheus scrapes, after the example eval ran."""

    release: Release
    url: str
    status: dict[str, Any]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The result vector of an instant query (fails the test on a query error)."""
        params = urllib.parse.urlencode({"query": expr})
        body = get_json(f"{self.url}/api/v1/query?{params}")
        assert body["status"] == "success", (expr, body)
        result: list[dict[str, Any]] = body["data"]["result"]
        return result


def rendered_rules(release: Release, env: dict[str, str]) -> dict[str, Any]:
    """The PrometheusRule groups the chart renders for this release, as a rules file."""
    # NB: --kube-version: `helm template` does not ask the cluster; render for the test
    # cluster's Kubernetes, not for the version helm assumes.
    template = ["helm", "template", release.name, str(CHART), "-n", release.namespace]
    out = run(
        [*template, "--kube-version", "1.34.0", *helm_args(release, "prometheusRule.enabled=true")],
        env,
    )
    (rule,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "PrometheusRule"]
    return {"groups": rule["spec"]["groups"]}


def operator_endpoint(kubectl: Callable[..., str], release: Release) -> str:
    """host:port of the leading operator pod's metrics port (pod IP on the node's bridge):
    the leader serves the evals, so only its /metrics carries their series (the standby's
    has its process metrics)."""
    deadline = time.monotonic() + 60
    while True:
        lease = json.loads(
            kubectl("get", "lease", release.fullname, "-n", release.namespace, "-o", "json")
        )
        leader = str((lease.get("spec") or {}).get("holderIdentity") or "").rpartition("_")[0]
        if leader or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    pods = json.loads(
        kubectl(
            "get", "pods", "-n", release.namespace, "-o", "json",
            "-l", f"app.kubernetes.io/instance={release.name}",
        )
    )["items"]  # fmt: skip
    (pod,) = [p for p in pods if p["metadata"]["name"] == leader]
    return f"{pod['status']['podIP']}:8080"


@pytest.fixture(scope="module")
def scraped(
    cluster: Any, kubectl: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scraped]:
    """Chart installed, Prometheus scraping it every second, example eval Complete."""
    prometheus_binary()
    env = cluster.env()
    ensure_image(env)
    workdir = tmp_path_factory.mktemp("prometheus")
    with installed_release(env, kubectl) as release:
        target = operator_endpoint(kubectl, release)
        poll(
            lambda: urllib.request.urlopen(f"http://{target}/metrics", timeout=5).status == 200,
            120,
            f"the operator's /metrics at {target} from the host",
        )
        (workdir / "rules.yaml").write_text(yaml.safe_dump(rendered_rules(release, env)))
        scrape = [{"job_name": release.fullname, "static_configs": [{"targets": [target]}]}]
        rules = [str(workdir / "rules.yaml")]
        with run_prometheus(scrape, workdir, rule_files=rules) as url:
            kubectl("apply", "-n", release.evals_namespace, "-f", "-", input=checked_example())
            status = wait_complete(kubectl, release.evals_namespace, EVAL)
            yield Scraped(release=release, url=url, status=status)


def checked_example() -> str:
    """The example eval with a grader stability check (so the dashboard's noise panel has
    data): a grader that passes every transcript, each of 4 regraded twice, is stable at
    noise rate 0 and leaves the example's numbers and its failed gate as they are."""
    doc = yaml.safe_load(example_eval(EVAL))
    container = doc["spec"]["trial"]["template"]["spec"]["containers"][0]
    doc["spec"]["grading"].update(
        grader={"image": container["image"], "command": ["sh", "-c", "cat >/dev/null; exit 0"]},
        stabilityCheck={"sample": 4, "times": 2, "maxNoiseRate": 0.5},
    )
    return yaml.safe_dump(doc, sort_keys=False)


def eval_selector(scraped: Scraped) -> str:
    """The label matchers of the example eval's series."""
    return f'namespace="{scraped.release.evals_namespace}", eval="{EVAL}"'


def test_prometheus_scrapes_the_operator(scraped: Scraped) -> None:
    """`up` of the operator's job is 1."""

    def up() -> bool:
        result = scraped.query(f'up{{job="{scraped.release.fullname}"}}')
        return bool(result) and result[0]["value"][1] == "1"

    poll(up, QUERY_DEADLINE_S, "up == 1 for the operator")


def test_scraped_scores_equal_the_status(scraped: Scraped) -> None:
    """pass^k, pass@k, the infra ratio, flaky count and trial counts reach Prometheus exactly."""
    assert_example_numbers(scraped.status)
    check = scraped.status["graderCheck"]
    assert (check["phase"], check["stable"], check["transcripts"], check["times"]) == (
        "Done",
        True,
        4,
        2,
    ), check
    sel = eval_selector(scraped)
    expected = {
        f'passhat_pass_hat_k{{{sel}, k="2"}}': 13 / 24,
        f'passhat_pass_at_k{{{sel}, k="2"}}': 17 / 24,
        f'passhat_pass_hat_k{{{sel}, k="4"}}': 0.5,
        f'passhat_mean_pass_rate{{{sel}, k="1"}}': 0.625,
        f"passhat_infra_error_ratio{{{sel}}}": 0.2,
        f"passhat_flaky_tasks{{{sel}}}": 1,
        f"passhat_gate_passed{{{sel}}}": 0,
        f"passhat_grader_noise_rate{{{sel}}}": 0,
        f"passhat_trials_running{{{sel}}}": 0,
        f"sum(passhat_trials_total{{{sel}}})": 20,
        f'sum(passhat_trials_total{{{sel}, outcome="pass"}})': 10,
        f'sum(passhat_trials_total{{{sel}, outcome="fail"}})': 6,
        f'sum(passhat_trials_total{{{sel}, outcome="infra_error", reason="reported"}})': 4,
    }

    seen: dict[str, float | None] = {}

    def matches() -> bool:
        for expr in expected:
            result = scraped.query(expr)
            seen[expr] = float(result[0]["value"][1]) if len(result) == 1 else None
        return seen == {e: pytest.approx(v, abs=1e-6) for e, v in expected.items()}

    deadline = time.monotonic() + QUERY_DEADLINE_S
    while not matches():
        if time.monotonic() > deadline:
            pytest.fail(f"scraped values differ:\n{json.dumps(seen, indent=1)}")
        time.sleep(2)


def dashboard_queries(scraped: Scraped) -> list[str]:
    """Every dashboard expression (targets and variable queries) with variables filled in."""
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            exprs.append(variable["query"]["query"].removeprefix("label_values(").rsplit(",", 1)[0])
    values = {
        "$namespace": scraped.release.evals_namespace,
        "$eval": EVAL,
        "$k": ".*",
        "$suite": ".*",
        "$job": scraped.release.fullname,
        "$__rate_interval": "1m",
    }
    filled = []
    for expr in exprs:
        for variable, value in sorted(values.items(), key=lambda kv: -len(kv[0])):
            expr = expr.replace(variable, value)
        filled.append(expr)
    return filled


def test_every_dashboard_expression_returns_data(scraped: Scraped) -> None:
    """Each panel's PromQL returns at least one series for the eval that ran."""
    queries = dashboard_queries(scraped)
    assert len(queries) > 15
    empty: list[str] = list(queries)

    def all_have_data() -> bool:
        empty[:] = [q for q in empty if not scraped.query(q)]
        return not empty

    deadline = time.monotonic() + QUERY_DEADLINE_S
    while not all_have_data():
        if time.monotonic() > deadline:
            pytest.fail("dashboard expressions without data:\n" + "\n".join(empty))
        time.sleep(2)


def test_every_rule_evaluates_and_the_gate_alert_fires(scraped: Scraped) -> None:
    """All chart rules evaluate without error; PasshatGateFailing fires for the eval."""

    def rules_ok() -> list[dict[str, Any]] | None:
        groups = get_json(f"{scraped.url}/api/v1/rules")["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        evaluated = all(not r["lastEvaluation"].startswith("0001") for r in rules)
        return rules if rules and evaluated else None

    rules = poll(rules_ok, QUERY_DEADLINE_S, "every rule to be evaluated")
    assert {r["name"] for r in rules} == {
        "PasshatGateFailing",
        "PasshatInfraErrorRatioHigh",
        "PasshatOperatorDown",
    }
    for rule in rules:
        assert rule["health"] == "ok", rule
        assert not rule.get("lastError"), rule

    def gate_alert() -> bool:
        alerts = get_json(f"{scraped.url}/api/v1/alerts")["data"]["alerts"]
        return any(
            a["labels"].get("alertname") == "PasshatGateFailing"
            and a["labels"].get("eval") == EVAL
            and a["state"] == "firing"
            for a in alerts
        )

    poll(gate_alert, QUERY_DEADLINE_S, "PasshatGateFailing firing for the example eval")
    down = scraped.query(f'up{{job="{scraped.release.fullname}"}} == 0')
    assert down == []
