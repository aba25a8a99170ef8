"""passhat through kubectl itself: `get` columns and `get -w` progress, `wait` recipes,
`describe` events, `explain` over the served schema, and the `kubectl passhat` plugin.

A scripted eval on kwok nodes (flaky tasks, retried infra errors, a gate it misses) runs to
completion under the operator of this checkout (a process), with this checkout's CRD
applied; every assertion reads what the real kubectl binary (.cluster/bin/kubectl) prints.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from passhat.api.crd import IMPLICIT_NODES, PRINTER_COLUMNS, build_crd, schema_nodes
from passhat.api.gate import EXIT_GATE_FAILED
from tests.cluster.operator_helpers import (
    REPO,
    OperatorProcess,
    Scripter,
    create_eval,
    eval_manifest,
    install_crd,
    passhat,
    wait_for_condition,
)
from tests.cluster.surface_helpers import module_namespace, shutdown, tolerant

TASKS, TRIALS = 4, 4
NAME = "native"
GATE = {"metric": "passHatK", "k": 4, "min": 0.5}


def script(task: int, trial: int, attempt: int) -> int:
    """Task t passes its trials >= 4 - t (task 0 never); every third slot's first attempt
    is an infra error (exit 75)."""
    if attempt == 0 and (task + trial) % 3 == 0:
        return 75
    return 0 if trial >= TRIALS - task else 1


INFRA_ATTEMPTS = sum(1 for t in range(TASKS) for r in range(TRIALS) if (t + r) % 3 == 0)


@dataclass
class Finished:
    """The completed eval, its namespace, the operator, and what `kubectl get -w` printed."""

    namespace: str
    operator: OperatorProcess
    body: dict[str, Any]
    watched: str


def _kubectl(cluster: Any, *args: str, env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [str(cluster.bin / "kubectl"), *args],
        capture_output=True,
        text=True,
        env=env or cluster.env(),
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def finished(
    cluster: Any,
    kubectl: Callable[..., str],
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Finished]:
    """Run the scripted eval to completion, `kubectl get -w` watching it from the start."""
    install_crd(kubectl)
    log_dir: Path = tmp_path_factory.mktemp("native")
    with module_namespace(core_v1, "native") as namespace:
        operator = OperatorProcess(
            kubeconfig=cluster.kubeconfig, namespaces=[namespace], log_path=log_dir / "op.log"
        )
        operator.start()
        watch_out = (log_dir / "watch.txt").open("w+")
        watch = subprocess.Popen(
            [str(cluster.bin / "kubectl"), "get", "ceval", "-n", namespace, "-w"],
            stdout=watch_out,
            stderr=subprocess.STDOUT,
            env=cluster.env(),
        )
        try:
            manifest = eval_manifest(
                NAME, tasks=TASKS, trials=TRIALS, parallelism=2, ks=[1, 4], gate=GATE
            )
            create_eval(api_client, namespace, manifest)
            with Scripter(core_v1, namespace, script):
                body = wait_for_condition(
                    api_client, namespace, NAME, "Complete", timeout=600, operator=operator
                )
            # NB: the watch prints the last update a moment after the API server stores it
            deadline = time.monotonic() + 30
            final = f" {TASKS * TRIALS}/{TASKS * TRIALS} "
            while final not in (log_dir / "watch.txt").read_text():
                if time.monotonic() > deadline or watch.poll() is not None:
                    break
                time.sleep(0.5)
            watch.terminate()
            watch.wait(timeout=30)
            yield Finished(namespace, operator, body, (log_dir / "watch.txt").read_text())
        finally:
            if watch.poll() is None:
                watch.kill()
            watch_out.close()
            shutdown(operator, kubectl, namespace)


def _table(text: str) -> list[dict[str, str]]:
    """`kubectl get` output as rows keyed by header, each cell read where its header
    starts (an empty cell is blank space)."""
    header, *rows = [line for line in text.splitlines() if line.strip()]
    starts = [found.start() for found in re.finditer(r"\S+", header)]
    names = header.split()
    return [
        {
            name: row[start : (starts[i + 1] if i + 1 < len(starts) else None)].strip()
            for i, (name, start) in enumerate(zip(names, starts, strict=True))
        }
        for row in rows
    ]


# The default columns' headers, as kubectl prints them (priority 0 only).
HEADER = ["NAME"] + [c["name"].upper() for c in PRINTER_COLUMNS if not c.get("priority")]


def test_kubectl_get_reads_like_kubectl_get_jobs(finished: Finished, cluster: Any) -> None:
    """The columns: PHASE Succeeded, DONE 16/16, GATE Missed, rates as `37.5%`, not floats."""
    out = _kubectl(cluster, "get", "ceval", NAME, "-n", finished.namespace)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].split() == HEADER
    assert {"PHASE", "DONE", "GATE", "MEAN", "K", "PASS^K", "FLAKY", "INFRA"} <= set(HEADER)
    (row,) = _table(out.stdout)
    infra = 100 * INFRA_ATTEMPTS / (TASKS * TRIALS + INFRA_ATTEMPTS)
    mine = {"NAME", "PHASE", "DONE", "GATE", "MEAN", "K", "PASS^K", "FLAKY", "INFRA"}
    assert {k: v for k, v in row.items() if k in mine} == {
        "NAME": NAME,
        "PHASE": "Succeeded",
        "DONE": "16/16",
        "GATE": "Missed",
        "MEAN": "37.5%",
        "K": "4",
        "PASS^K": "0.0%",
        "FLAKY": "3",
        "INFRA": f"{infra:.1f}%",
    }
    wide = _kubectl(cluster, "get", "ceval", NAME, "-n", finished.namespace, "-o", "wide")
    assert "RUNNING" in wide.stdout.splitlines()[0]


def test_kubectl_get_watch_shows_progress(finished: Finished) -> None:
    """`kubectl get -w` prints a line per status write: DONE climbs from 0/16 to 16/16."""
    done = [
        int(found.group(1))
        for line in finished.watched.splitlines()
        if (found := re.search(r"\s(\d+)/16\s", line))
    ]
    assert done, finished.watched
    assert done == sorted(done) and done[-1] == 16
    assert len({d for d in done if 0 < d < 16}) >= 2, finished.watched


def test_a_missed_gate_is_succeeded_with_gate_passed_false(
    finished: Finished, cluster: Any
) -> None:
    """Phase Succeeded, Complete=True, GatePassed=False; the docs' kubectl wait recipes
    answer each question with their exit code."""
    status = finished.body["status"]
    assert status["phase"] == "Succeeded"
    assert status["gate"]["passed"] is False
    ref = ["ceval/" + NAME, "-n", finished.namespace, "--timeout=0"]
    assert _kubectl(cluster, "wait", "--for=condition=Complete", *ref).returncode == 0
    passed = _kubectl(cluster, "wait", "--for=condition=GatePassed", *ref)
    assert passed.returncode == 1 and "condition not met" in passed.stderr
    assert _kubectl(cluster, "wait", "--for=condition=GatePassed=False", *ref).returncode == 0
    failed = _kubectl(cluster, "wait", "--for=condition=Failed", *ref)
    assert failed.returncode != 0


def test_kubectl_describe_tells_the_story(
    finished: Finished, cluster: Any, wait_for: Callable[..., Any]
) -> None:
    """Events: Started, TrialRetried bursts counting every retried attempt (fewer events
    than attempts), Completed, GateFailed."""

    def story() -> str | None:
        out = _kubectl(cluster, "describe", "ceval", NAME, "-n", finished.namespace)
        return out.stdout if "GateFailed" in out.stdout else None

    text = wait_for(tolerant(story), 60, "the GateFailed event in kubectl describe")
    events = text[text.index("Events:") :]
    for reason in ("Started", "TrialRetried", "Completed", "GateFailed"):
        assert reason in events, events
    assert "started 4 tasks x 4 trials = 16 trial slots, at most 2 at a time" in events
    retried = [
        int(found.group(1))
        for found in re.finditer(r"TrialRetried\s+\S+\s+\S+\s+(\d+) trial attempts? ended", events)
    ]
    assert sum(retried) == INFRA_ATTEMPTS and len(retried) <= INFRA_ATTEMPTS, events
    assert f"{INFRA_ATTEMPTS} retries so far" in events
    assert "all 16 trials final, mean pass rate 37.5%, pass^1 37.5%, pass^4 0.0%" in events


def test_kubectl_explain_describes_every_served_field(
    finished: Finished, cluster: Any, kubectl: Callable[..., str]
) -> None:
    """`kubectl explain --recursive` lists every field of the generated schema, and the
    schema the API server publishes (OpenAPI v3) describes 100 % of its nodes."""
    out = _kubectl(cluster, "explain", "consistencyeval", "--recursive")
    assert out.returncode == 0, out.stderr
    listed = set(re.findall(r"^\s+([A-Za-z][\w-]*)\t", out.stdout, re.MULTILINE))
    root = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    fields = {
        path.rsplit(".", 1)[-1]
        for path, _ in schema_nodes(root)
        if path and not path.endswith(("[]", "{}")) and not path.startswith(".metadata.")
    }
    assert fields - listed == set()
    published = json.loads(kubectl("get", "--raw", "/openapi/v3/apis/passhat.dev/v1alpha1"))
    schemas = published["components"]["schemas"]
    (key,) = [k for k in schemas if k.endswith(".ConsistencyEval")]
    served = schemas[key]
    nodes = [
        (path, node)
        for path, node in schema_nodes(served)
        if path not in IMPLICIT_NODES and not path.startswith(".metadata")
    ]
    undescribed = [path for path, node in nodes if not str(node.get("description", "")).strip()]
    assert len(nodes) >= 100 and undescribed == []
    ks = _kubectl(cluster, "explain", "consistencyeval.spec.ks")
    assert "The ks to report pass^k and pass@k at" in ks.stdout


def _field(env: dict[str, str], what: str) -> str:
    """The current context's cluster or user name."""
    done = subprocess.run(
        [
            "kubectl",
            "config",
            "view",
            "--minify",
            "-o",
            f"jsonpath={{.contexts[0].context.{what}}}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def _plugin_env(cluster: Any, tmp_path: Path, namespace: str) -> dict[str, str]:
    """PATH with the `kubectl-passhat` console script as pip would write it (from
    pyproject's entry point), and a kubeconfig whose current context's namespace is
    `namespace`."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["kubectl-passhat"].partition(":")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    plugin = bin_dir / "kubectl-passhat"
    plugin.write_text(
        f"#!{sys.executable}\nimport sys\nfrom {module} import {function}\nsys.exit({function}())\n"
    )
    plugin.chmod(0o755)
    config = tmp_path / "kubeconfig"
    config.write_text(Path(cluster.kubeconfig).read_text())
    env: dict[str, str] = cluster.env()
    env.update(
        KUBECONFIG=str(config),
        PATH=f"{bin_dir}{os.pathsep}{env['PATH']}",
        PYTHONPATH=str(REPO),
    )
    done = _kubectl(
        cluster, "config", "set-context", "--current", f"--namespace={namespace}", env=env
    )
    assert done.returncode == 0, done.stderr
    return env


def test_kubectl_passhat_plugin(finished: Finished, cluster: Any, tmp_path: Path) -> None:
    """kubectl finds the plugin on PATH; `kubectl passhat report NAME` reads the current
    context's namespace and prints passhat's report (strips in its HTML); `-n` before the
    subcommand works; errors name `kubectl passhat`. The eval misses its gate, so every
    report exits 1 (docs/operator.md's exit codes) and still prints in full."""
    env = _plugin_env(cluster, tmp_path, finished.namespace)
    listed = _kubectl(cluster, "plugin", "list", env=env)
    assert "kubectl-passhat" in listed.stdout, listed.stdout + listed.stderr
    text = _kubectl(cluster, "passhat", "report", NAME, env=env)
    assert text.returncode == EXIT_GATE_FAILED, text.stderr
    assert f"{finished.namespace}/{NAME}: Succeeded, 16/16 trials final" in text.stdout
    assert re.search(r"^task-003\s.*\s-\+\+\+$", text.stdout, re.MULTILINE), text.stdout
    as_json = _kubectl(cluster, "passhat", "report", NAME, "--format", "json", env=env)
    direct = passhat(cluster, "report", NAME, "-n", finished.namespace, "--format", "json")
    assert as_json.returncode == direct.returncode == EXIT_GATE_FAILED, (
        as_json.stderr + direct.stderr
    )
    assert json.loads(as_json.stdout) == json.loads(direct.stdout)
    html_path = tmp_path / "report.html"
    other = dict(env, KUBECONFIG=str(cluster.kubeconfig))  # NB: its context's namespace differs
    html = _kubectl(
        cluster,
        "passhat",
        "-n",
        finished.namespace,
        "report",
        NAME,
        "--format",
        "html",
        "--out",
        str(html_path),
        env=other,
    )
    assert html.returncode == EXIT_GATE_FAILED, html.stderr
    page = html_path.read_text()
    task3 = re.search(r'<td class="task">task-003</td>.*?<td class="trials">(.*?)</td>', page)
    assert task3 is not None
    assert re.findall(r'<i class="(\w+)"', task3.group(1)) == ["fail", "pass", "pass", "pass"]
    # NB: trials read the records API (an APIService other tests register and remove, served
    # by their operator; this one archives nothing): through kubectl the command reaches
    # it, and says the API is missing or has no records of this eval, or lists them
    trials = _kubectl(cluster, "passhat", "trials", NAME, env=env)
    if trials.returncode == 0:
        assert {json.loads(line)["task_id"] for line in trials.stdout.splitlines()} == {
            f"task-{t:03d}" for t in range(TASKS)
        }
    else:
        assert trials.returncode == 2, trials.stderr
        assert trials.stderr.startswith("kubectl passhat: error: "), trials.stderr
        assert (
            "the passhat records API is not available" in trials.stderr
            or f'no records of consistencyeval "{NAME}" in namespace "{finished.namespace}"'
            in trials.stderr
        ), trials.stderr
    # --context: another context of the same kubeconfig (its namespace is the eval's)
    # while the current one's namespace is default
    config = Path(env["KUBECONFIG"])
    current = _kubectl(cluster, "config", "current-context", env=env).stdout.strip()
    with_context = dict(env, KUBECONFIG=str(tmp_path / "two-contexts"))
    (tmp_path / "two-contexts").write_text(config.read_text())
    for args in (
        ["set-context", "evals-here", f"--cluster={_field(env, 'cluster')}"],
        ["set-context", "evals-here", f"--user={_field(env, 'user')}"],
        ["set-context", "evals-here", f"--namespace={finished.namespace}"],
        ["set-context", current, "--namespace=default"],
    ):
        done = _kubectl(cluster, "config", *args, env=with_context)
        assert done.returncode == 0, done.stderr
    for argv in (
        ["passhat", "report", NAME, "--context", "evals-here", "--format", "json"],
        ["passhat", "--context=evals-here", "report", NAME, "--format", "json"],
    ):
        by_context = _kubectl(cluster, *argv, env=with_context)
        assert by_context.returncode == EXIT_GATE_FAILED, by_context.stderr
        assert json.loads(by_context.stdout) == json.loads(direct.stdout)
    elsewhere = _kubectl(cluster, "passhat", "report", NAME, env=with_context)
    assert elsewhere.returncode == 2 and "default" in elsewhere.stderr, elsewhere.stderr
    missing = _kubectl(cluster, "passhat", "report", "no-such-eval", env=env)
    assert missing.returncode == 2
    assert missing.stderr.startswith("kubectl passhat: error:"), missing.stderr
    assert "no-such-eval" in missing.stderr
