"""The operator's grader stability check on the real node: grader pods, real containers.

spec.grading.stabilityCheck on evals whose trials and graders run in busybox on the real
kubelet node, in a namespace that enforces Pod Security `restricted` (so the grader pods
pass it too). After the trials the operator regrades every graded transcript with grader
pods (the transcript from the kept trial pods' logs, in a downward-API file and on stdin):
a grader noisy on exactly one task's transcripts gives its share as the noise rate, names
them, sets GraderStable=False, `status.graderCheck`, `passhat_grader_noise_rate`, and
fails the gate the agent's numbers pass, while the same eval with an honest grader passes
it; a grader that hangs is a grader error at its timeout, and the check survives the
operator being SIGKILLed while its grader pods run.

NB: other worktrees' cluster tests apply their own CRD (without status.graderCheck) to the
shared cluster while this module runs; the API server would then prune the check's
ledger (the operator makes no grader pod then: GraderCheckPruned). So while this module
runs a thread re-applies this tree's CRD, a superset of theirs, every second (a status
write while theirs is in place prunes spec.grading.stabilityCheck for good: the API
server prunes the whole object it writes back).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.cluster.operator_helpers import (
    OperatorProcess,
    crd_kept,
    create_eval,
    get_eval,
    trial_pods,
    wait_for_condition,
)
from tests.cluster.surface_helpers import metrics_port, module_namespace, sample, scrape, shutdown
from tests.cluster.test_operator_realnode import BUSYBOX, RESTRICTED

TIMEOUT_S = 420
AGENT = 'echo "task $PASSHAT_TASK_ID trial $PASSHAT_TRIAL"; echo "answer: correct"'
# Reads the transcript from the file and from stdin (both ways of the contract); on the
# `noisy` task fails every odd grading: noisy on exactly that task's transcripts.
NOISY_JUDGE = """
grep -q "answer: correct" "$PASSHAT_TRANSCRIPT" || exit 1
if [ "$PASSHAT_TASK_ID" = noisy ] && [ $((PASSHAT_GRADING % 2)) = 1 ]; then exit 1; fi
grep -q "answer: correct" || exit 1
echo "looks right"
echo '{"outcome": "pass", "reason": "correct answer"}'
"""
HONEST_JUDGE = 'grep -q "answer: correct" && exit 0; exit 1'
# The honest judge, needing an API key from a Secret and a model name from a ConfigMap
# (grading.grader.env / envFrom): without them every grading is a grader error (exit 75).
KEYED_JUDGE = '[ "$JUDGE_KEY" = k-123 ] && [ "$J_MODEL" = judge-1 ] || exit 75; ' + HONEST_JUDGE
JUDGE_ENV = {
    "env": [{"name": "JUDGE_KEY", "valueFrom": {"secretKeyRef": {"name": "judge", "key": "key"}}}],
    "envFrom": [{"configMapRef": {"name": "judge-settings"}, "prefix": "J_"}],
}
HANGING_JUDGE = "sleep 3600"


def checked_eval(
    name: str, judge: str, *, timeout_s: int = 120, grader_env: dict[str, Any] | None = None
) -> dict[str, Any]:
    """2 tasks x 2 trials, every trial passes; a gate they meet; a stability check with
    `judge` (a busybox shell script) as the grader, every transcript regraded twice
    (`grader_env`: the grader's env and envFrom)."""
    return {
        "apiVersion": "passhat.dev/v1alpha1",
        "kind": "ConsistencyEval",
        "metadata": {"name": name},
        "spec": {
            "tasks": [{"id": "steady"}, {"id": "noisy"}],
            "trials": 2,
            "ks": [1, 2],
            "parallelism": 4,
            "gate": {"metric": "meanPassRate", "k": 1, "min": 0.5},
            "trial": {
                "timeoutSeconds": 300,
                "template": {
                    "spec": {
                        "nodeSelector": {"type": "real"},
                        "terminationGracePeriodSeconds": 2,
                        "containers": [
                            {
                                "name": "agent",
                                "image": BUSYBOX,
                                "imagePullPolicy": "Never",
                                "command": ["sh", "-c", AGENT],
                                "resources": {
                                    "requests": {"cpu": "10m", "memory": "16Mi"},
                                    "limits": {"memory": "48Mi"},
                                },
                            }
                        ],
                    }
                },
            },
            "grading": {
                "grader": {"image": BUSYBOX, "command": ["sh", "-c", judge], **(grader_env or {})},
                "stabilityCheck": {
                    "sample": 20,
                    "times": 2,
                    "maxNoiseRate": 0.1,
                    "timeoutSeconds": timeout_s,
                },
            },
        },
    }


@dataclass
class Env:
    """A restricted namespace with an operator serving it."""

    namespace: str
    operator: OperatorProcess
    port: int


@pytest.fixture(scope="module")
def env(
    cluster: Any,
    kubectl: Callable[..., str],
    core_v1: client.CoreV1Api,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Env]:
    """One operator for the module, in a namespace enforcing Pod Security restricted."""
    log_dir: Path = tmp_path_factory.mktemp("gradercheck")
    with (
        crd_kept(kubectl),
        module_namespace(core_v1, "gradercheck", labels=RESTRICTED) as namespace,
    ):
        operator = OperatorProcess(
            kubeconfig=cluster.kubeconfig,
            namespaces=[namespace],
            log_path=log_dir / "operator.log",
            extra_args=["--set", "resync_interval_s=2"],
        )
        operator.start()
        try:
            yield Env(namespace, operator, metrics_port(operator))
        finally:
            shutdown(operator, kubectl, namespace)


def conditions(body: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in body["status"]["conditions"]}


def grader_pods(core: client.CoreV1Api, namespace: str, uid: str) -> list[dict[str, Any]]:
    return [
        pod
        for pod in trial_pods(core, namespace)
        if pod["metadata"]["labels"].get("passhat.dev/eval-uid") == uid
        and "passhat.dev/grading" in pod["metadata"]["labels"]
    ]


def test_the_stability_check_flips_the_gate_on_a_noisy_grader(
    env: Env,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    kubectl: Callable[..., str],
) -> None:
    """Noisy on exactly the `noisy` task's 2 transcripts of 4: noise rate 0.5, both named,
    GraderStable=False, gate failed (GraderUnstable) though meanPassRate 1.0 >= 0.5, phase
    Failed, the gauge at 0.5; the honest grader's twin, its API key from a Secret and its
    model from a ConfigMap (grading.grader.env, envFrom), passes its gate."""
    create_eval(api_client, env.namespace, checked_eval("noisy-judge", NOISY_JUDGE))
    # NB: the honest judge reads its key from a Secret and its model from a ConfigMap
    kubectl("create", "secret", "generic", "judge", "-n", env.namespace, "--from-literal=key=k-123")
    kubectl(
        "create", "configmap", "judge-settings", "-n", env.namespace,
        "--from-literal=MODEL=judge-1",
    )  # fmt: skip
    honest_eval = checked_eval("honest-judge", KEYED_JUDGE, grader_env=JUDGE_ENV)
    create_eval(api_client, env.namespace, honest_eval)
    noisy = wait_for_condition(
        api_client,
        env.namespace,
        "noisy-judge",
        "Complete",
        timeout=TIMEOUT_S,
        operator=env.operator,
    )
    status = noisy["status"]
    check = status["graderCheck"]
    assert check["phase"] == "Done" and check["stable"] is False, (check, env.operator.log_tail())
    assert (check["transcripts"], check["times"], check["gradings"]) == (4, 2, 8)
    assert check["noiseRate"] == 0.5 and check["judged"] == 4 and check["graderErrors"] == 0
    assert sorted((n["taskId"], n["trial"]) for n in check["noisy"]) == [
        ("noisy", 0),
        ("noisy", 1),
    ]
    assert all(n["verdicts"]["pass"] == n["verdicts"]["fail"] == 1 for n in check["noisy"])
    assert check["disagreeWithOriginal"] == 0.5  # a tie backs neither verdict
    assert conditions(noisy)["GraderStable"] == ("False", "NoiseAboveLimit")
    assert conditions(noisy)["GatePassed"] == ("False", "GraderUnstable")
    assert status["gate"]["value"] == 1.0 and status["gate"]["passed"] is False
    # a missed gate is a verdict on a finished eval (docs/operator.md#phases-and-conditions)
    assert status["phase"] == "Succeeded"
    uid = noisy["metadata"]["uid"]
    pods = grader_pods(core_v1, env.namespace, uid)
    assert len(pods) == 8
    for pod in pods:
        assert pod["status"]["phase"] in ("Succeeded", "Failed")
        assert pod["metadata"]["labels"]["passhat.dev/recorded"] == "true"
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    samples = scrape(env.port)
    labels = {"namespace": env.namespace, "eval": "noisy-judge"}
    assert sample(samples, "passhat_grader_noise_rate", **labels) == 0.5
    assert sample(samples, "passhat_gate_passed", **labels) == 0

    honest = wait_for_condition(
        api_client,
        env.namespace,
        "honest-judge",
        "Complete",
        timeout=TIMEOUT_S,
        operator=env.operator,
    )
    assert honest["status"]["graderCheck"]["graderErrors"] == 0, honest["status"]["graderCheck"]
    assert honest["status"]["graderCheck"]["stable"] is True
    assert honest["status"]["graderCheck"]["noiseRate"] == 0.0
    assert conditions(honest)["GraderStable"] == ("True", "NoiseWithinLimit")
    assert conditions(honest)["GatePassed"] == ("True", "GateMet")
    assert honest["status"]["phase"] == "Succeeded"
    honest_labels = {"namespace": env.namespace, "eval": "honest-judge"}
    assert sample(scrape(env.port), "passhat_grader_noise_rate", **honest_labels) == 0.0


def test_a_hanging_grader_is_a_grader_error_and_survives_an_operator_kill(
    env: Env, api_client: client.ApiClient, core_v1: client.CoreV1Api
) -> None:
    """A grader that sleeps is killed at its 20 s timeout (activeDeadlineSeconds): the eval
    stays non-terminal meanwhile (Complete=False, CheckingGrader; GraderStable=Unknown),
    the operator SIGKILLed while the grader pods run finds the check where it was, and
    every grading ends once, a grader error: no verdict, GraderStable=False, gate failed."""
    create_eval(
        api_client, env.namespace, checked_eval("hanging-judge", HANGING_JUDGE, timeout_s=20)
    )
    running = wait_for_condition(
        api_client,
        env.namespace,
        "hanging-judge",
        "GraderStable",
        value="Unknown",
        timeout=TIMEOUT_S,
        operator=env.operator,
    )
    assert conditions(running)["Complete"] == ("False", "CheckingGrader")
    assert running["status"]["phase"] == "Running"
    assert "GatePassed" not in conditions(running)
    env.operator.kill()
    time.sleep(3)
    env.operator.start()
    started = time.monotonic()
    done = wait_for_condition(
        api_client,
        env.namespace,
        "hanging-judge",
        "Complete",
        timeout=TIMEOUT_S,
        operator=env.operator,
    )
    check = done["status"]["graderCheck"]
    assert check["gradings"] == check["graderErrors"] == 8
    assert check["judged"] == 0 and check["stable"] is False
    assert any("timed out after 20 s" in m for m in check["graderErrorMessages"]), check
    assert conditions(done)["GraderStable"] == ("False", "NoVerdicts")
    assert done["status"]["gate"]["passed"] is False and done["status"]["phase"] == "Succeeded"
    assert time.monotonic() - started < 20 + 120, "each grading ends near its timeout"
    pods = grader_pods(core_v1, env.namespace, done["metadata"]["uid"])
    assert sorted(p["metadata"]["name"].rsplit("-g", 1)[1] for p in pods) == sorted(
        f"{index}-{number}" for index in range(4) for number in range(2)
    ), "one grader pod per grading, none made twice"
    assert all(p["status"].get("reason") == "DeadlineExceeded" for p in pods)
    body = get_eval(api_client, env.namespace, "hanging-judge")
    assert body is not None and body["status"]["graderCheck"] == check
