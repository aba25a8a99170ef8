"""The operator on the real kubelet node: every kind of trial ending, with exact counts.

Real containers (busybox, `imagePullPolicy: Never`) in a namespace that enforces Pod
Security `restricted`: pass, fail, exit 75 retried, a result JSON in the termination
message deciding, a real OOM kill retried, a pod evicted through the Eviction API retried,
a real `activeDeadlineSeconds` timeout retried, a missing image stopping the eval with a
ConfigError, and (on a kwok node made for the test) a deleted node's trials retried. The
reasons are read back from the operator's own `passhat_trials_total` counters.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from passhat.stats import summarize_many
from passhat.trials.ledger import SlotLedger
from passhat.trials.outcomes import Outcome, Verdict
from tests.cluster.kube_helpers import as_body, raw_json
from tests.cluster.operator_helpers import (
    KWOK_TOLERATION,
    OperatorProcess,
    create_eval,
    eval_pods,
    get_eval,
    held_pods,
    install_crd,
    kept_attempts,
    ledger_attempts,
    trial_pods,
    wait_for_condition,
)
from tests.cluster.surface_helpers import (
    metrics_port,
    module_namespace,
    scrape,
    shutdown,
    tolerant,
)

BUSYBOX = "localhost/passhat/busybox:test"
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}
COMPLETE_TIMEOUT_S = 600

# One script for every task: what attempt N of each task does (PASSHAT_* from the operator).
SCRIPT = """
set -u
first() { [ "$PASSHAT_ATTEMPT" = 0 ]; }
case "$PASSHAT_TASK_ID" in
  pass) exit 0 ;;
  fail) exit 1 ;;
  infra75) first && exit 75; exit 0 ;;
  result) echo '{"outcome": "fail", "reason": "wrong refund"}' > "$PASSHAT_RESULT"; exit 0 ;;
  oom) first && { head -c 400m /dev/zero | tail; }; exit 0 ;;
  evict) first && sleep 3600; exit 0 ;;
  hang) first && sleep 3600; exit 0 ;;
esac
exit 3
"""

P = Verdict(Outcome.PASS, "exit_code")
F = Verdict(Outcome.FAIL, "exit_code")
I = Verdict(Outcome.INFRA_ERROR, "x")  # noqa: E741


def real_eval(
    name: str,
    tasks: list[str],
    *,
    trials: int,
    timeout_s: int = 600,
    image: str = BUSYBOX,
    parallelism: int = 6,
) -> dict[str, Any]:
    """An eval whose trials run SCRIPT in busybox on the real node (48Mi memory ceiling)."""
    return {
        "apiVersion": "passhat.dev/v1alpha1",
        "kind": "ConsistencyEval",
        "metadata": {"name": name},
        "spec": {
            "tasks": [{"id": task} for task in tasks],
            "trials": trials,
            "ks": sorted({1, trials}),
            "parallelism": parallelism,
            "retry": {"infraErrors": 2, "backoffSeconds": 0},
            "trial": {
                "timeoutSeconds": timeout_s,
                "template": {
                    "spec": {
                        "nodeSelector": {"type": "real"},
                        "terminationGracePeriodSeconds": 2,
                        "containers": [
                            {
                                "name": "agent",
                                "image": image,
                                "imagePullPolicy": "Never",
                                "command": ["sh", "-c", SCRIPT],
                                "resources": {
                                    "requests": {"cpu": "10m", "memory": "16Mi"},
                                    "limits": {"memory": "48Mi"},
                                },
                            }
                        ],
                    }
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
    install_crd(kubectl)
    log_dir: Path = tmp_path_factory.mktemp("realnode")
    with module_namespace(core_v1, "realnode", labels=RESTRICTED) as namespace:
        operator = OperatorProcess(
            kubeconfig=cluster.kubeconfig,
            namespaces=[namespace],
            log_path=log_dir / "operator.log",
            extra_args=["--set", "resync_interval_s=2", "--set", "image_error_grace_s=15"],
        )
        operator.start()
        try:
            yield Env(namespace, operator, metrics_port(operator))
        finally:
            shutdown(operator, kubectl, namespace)


def ledger_of(plan: list[list[list[Verdict]]]) -> SlotLedger:
    """The ledger of plan[task][trial] = the attempts' verdicts (last one final)."""
    ledger = SlotLedger(len(plan), len(plan[0]))
    for task, trials in enumerate(plan):
        for trial, attempts in enumerate(trials):
            for attempt, verdict in enumerate(attempts):
                ledger.record(task, trial, attempt, verdict, final=attempt == len(attempts) - 1)
    return ledger


def running_pods(core: client.CoreV1Api, namespace: str, task: int) -> list[dict[str, Any]]:
    """First-attempt pods of task index `task` whose container is running."""
    found = []
    for pod in trial_pods(core, namespace):
        labels = pod["metadata"]["labels"]
        if labels["passhat.dev/task"] != str(task) or labels["passhat.dev/attempt"] != "0":
            continue
        statuses = pod["status"].get("containerStatuses") or []
        if statuses and "running" in statuses[0].get("state", {}):
            found.append(pod)
    return found


def evict(core: client.CoreV1Api, namespace: str, name: str) -> None:
    """Evict one pod through the Eviction API (as `kubectl drain` does)."""
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
    try:
        core.create_namespaced_pod_eviction(name, namespace, body)
    except ApiException as err:
        if err.status != 404:
            raise


def reasons(port: int, namespace: str, eval_name: str) -> dict[tuple[str, str], float]:
    """passhat_trials_total of one eval as {(outcome, reason): count}."""
    out = {}
    for (name, labels), value in scrape(port).items():
        d = dict(labels)
        if name == "passhat_trials_total" and (d.get("namespace"), d.get("eval")) == (
            namespace,
            eval_name,
        ):
            out[(d["outcome"], d["reason"])] = value
    return out


def test_every_ending_on_the_real_node(
    env: Env,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    wait_for: Callable[..., Any],
) -> None:
    """pass, fail, exit 75, result JSON, OOM kill, eviction: exact ledger and reasons."""
    tasks = ["pass", "fail", "infra75", "result", "oom", "evict"]
    create_eval(api_client, env.namespace, real_eval("endings", tasks, trials=2))
    evicted: set[str] = set()

    def evict_first_attempts() -> bool:
        for pod in running_pods(core_v1, env.namespace, tasks.index("evict")):
            name = pod["metadata"]["name"]
            if name not in evicted:
                evict(core_v1, env.namespace, name)
                evicted.add(name)
        return len(evicted) == 2

    wait_for(
        tolerant(evict_first_attempts),
        COMPLETE_TIMEOUT_S,
        "both evict trials to run and be evicted",
    )
    body = wait_for_condition(
        api_client,
        env.namespace,
        "endings",
        "Complete",
        timeout=COMPLETE_TIMEOUT_S,
        operator=env.operator,
    )
    plan = [
        [[P], [P]],  # pass
        [[F], [F]],  # fail
        [[I, P], [I, P]],  # infra75: exit 75, then pass
        [[F], [F]],  # result JSON says fail (exit 0)
        [[I, P], [I, P]],  # oom, then pass
        [[I, P], [I, P]],  # evicted, then pass
    ]
    expected = ledger_of(plan)
    status = body["status"]
    assert SlotLedger.unpack(status["ledger"]) == expected
    summaries = summarize_many(expected.tallies(tasks), [1, 2])
    assert [row["meanPassRate"] for row in status["summary"]["byK"]] == pytest.approx(
        [s.mean_pass_rate for s in summaries]
    )
    assert status["summary"]["infraErrorRate"] == pytest.approx(6 / 18)
    assert status["progress"] == {
        "done": 12,
        "running": 0,
        "waiting": 0,
        "pending": 0,
        "retries": 6,
    }
    assert reasons(env.port, env.namespace, "endings") == {
        ("pass", "exit_code"): 8,
        ("fail", "exit_code"): 2,
        ("fail", "result"): 2,
        ("infra_error", "reported"): 2,
        ("infra_error", "oom_killed"): 2,
        ("infra_error", "evicted"): 2,
    }
    # Finished pods are kept (released, labelled recorded) until the eval is deleted; the
    # evicted ones were deleted by the eviction and went once released.
    uid = body["metadata"]["uid"]

    def settled() -> bool:
        pods = eval_pods(core_v1, env.namespace, uid)
        return len(pods) == 16 and not held_pods(core_v1, env.namespace, uid)

    wait_for(tolerant(settled), 180, "every pod released, the evicted ones gone")
    kept = kept_attempts(core_v1, env.namespace, uid)
    evicted_task = tasks.index("evict")
    evicted_attempts = {(evicted_task, 0, 0), (evicted_task, 1, 0)}
    assert set(ledger_attempts(expected)) - set(kept) == evicted_attempts
    assert len(kept) == len(set(kept)) == 16


def test_deadline_exceeded_is_a_retried_timeout(
    env: Env, api_client: client.ApiClient, core_v1: client.CoreV1Api
) -> None:
    """A trial past activeDeadlineSeconds ends DeadlineExceeded: infra_error/timeout, retried."""
    create_eval(api_client, env.namespace, real_eval("deadline", ["hang"], trials=1, timeout_s=25))
    body = wait_for_condition(
        api_client,
        env.namespace,
        "deadline",
        "Complete",
        timeout=COMPLETE_TIMEOUT_S,
        operator=env.operator,
    )
    assert SlotLedger.unpack(body["status"]["ledger"]) == ledger_of([[[I, P]]])
    assert reasons(env.port, env.namespace, "deadline") == {
        ("infra_error", "timeout"): 1,
        ("pass", "exit_code"): 1,
    }


def test_missing_image_stops_with_config_error(
    env: Env, api_client: client.ApiClient, core_v1: client.CoreV1Api, wait_for: Callable[..., Any]
) -> None:
    """ErrImageNeverPull on every first attempt: ConfigError naming the image, no retries."""
    missing = f"localhost/passhat/missing-{uuid.uuid4().hex[:6]}:none"
    create_eval(
        api_client,
        env.namespace,
        real_eval("noimage", ["a", "b"], trials=1, image=missing),
    )
    body = wait_for_condition(
        api_client,
        env.namespace,
        "noimage",
        "ConfigError",
        timeout=COMPLETE_TIMEOUT_S,
        operator=env.operator,
    )
    status = body["status"]
    error = next(c for c in status["conditions"] if c["type"] == "ConfigError")
    assert "image" in error["message"].lower(), error
    assert status["phase"] == "Failed"

    def no_pods_left() -> bool:
        uid = body["metadata"]["uid"]
        return not [
            p
            for p in trial_pods(core_v1, env.namespace)
            if p["metadata"]["labels"].get("passhat.dev/eval-uid") == uid
        ]

    wait_for(tolerant(no_pods_left), 180, "the image-error pods to be released")
    time.sleep(5)  # NB: a stopped eval must stay stopped: no new attempts after a while
    assert no_pods_left()
    env.operator.assert_running()


def fake_node(name: str, label: str) -> client.V1Node:
    """A kwok node that only this test's pods select (label passhat.dev/test-node)."""
    manifest = {
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {
                "type": "kwok-test",
                "passhat.dev/test-node": label,
                "kubernetes.io/hostname": name,
            },
        },
        "spec": {
            "taints": [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]
        },
    }
    return as_body(manifest, client.V1Node)


def test_deleted_node_trials_are_retried(
    env: Env,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    wait_for: Callable[..., Any],
) -> None:
    """Trials on a kwok node that is deleted mid-run end infra_error/node_lost and rerun."""
    label = uuid.uuid4().hex[:8]
    first, second = f"kwok-lost-{label}", f"kwok-spare-{label}"
    manifest = real_eval("nodeloss", ["n"], trials=2)
    template = manifest["spec"]["trial"]["template"]
    template["metadata"] = {"annotations": {"passhat.dev/fake-run-forever": "true"}}
    template["spec"]["nodeSelector"] = {"passhat.dev/test-node": label}
    template["spec"]["tolerations"] = [KWOK_TOLERATION]
    core_v1.create_node(fake_node(first, label))
    created = [first]
    try:
        wait_for(tolerant(lambda: node_ready(core_v1, first)), 120, f"node {first} Ready")
        create_eval(api_client, env.namespace, manifest)

        def both_running() -> bool:
            # NB: only this eval's pods (the namespace is shared with the module's other evals)
            pods = [
                p
                for p in trial_pods(core_v1, env.namespace)
                if p["metadata"]["labels"].get("passhat.dev/eval") == "nodeloss"
            ]
            return len([p for p in pods if p["status"].get("phase") == "Running"]) == 2

        wait_for(tolerant(both_running), 300, "both first attempts running on the doomed node")
        core_v1.delete_node(first)
        created.remove(first)
        # NB: the pod GC looks every 20s and waits out a 40s quarantine for orphaned pods.
        wait_for(
            lambda: (
                ((get_eval(api_client, env.namespace, "nodeloss") or {}).get("status") or {})
                .get("progress", {})
                .get("retries")
                == 2
            ),
            420,
            "both lost trials to be recorded as infra errors",
        )
        core_v1.create_node(fake_node(second, label))
        created.append(second)

        def end_retries() -> bool:
            for pod in trial_pods(core_v1, env.namespace):
                meta = pod["metadata"]
                annotations = meta.get("annotations") or {}
                if meta["labels"]["passhat.dev/attempt"] != "0" and (
                    annotations.get("passhat.dev/fake-run-forever") == "true"
                ):
                    patch = {"metadata": {"annotations": {"passhat.dev/fake-run-forever": "false"}}}
                    core_v1.patch_namespaced_pod(meta["name"], env.namespace, patch)
            body = get_eval(api_client, env.namespace, "nodeloss")
            return any(
                c["type"] == "Complete" and c["status"] == "True"
                for c in ((body or {}).get("status") or {}).get("conditions") or []
            )

        wait_for(
            tolerant(end_retries),
            COMPLETE_TIMEOUT_S,
            "the retried trials to complete",
            interval=1.0,
        )
    finally:
        for node in created:
            try:
                core_v1.delete_node(node)
            except ApiException as err:
                if err.status != 404:
                    raise
    body = get_eval(api_client, env.namespace, "nodeloss")
    assert body is not None
    assert SlotLedger.unpack(body["status"]["ledger"]) == ledger_of([[[I, P], [I, P]]])
    assert reasons(env.port, env.namespace, "nodeloss") == {
        ("infra_error", "node_lost"): 2,
        ("pass", "exit_code"): 2,
    }


def retries(api: client.ApiClient, namespace: str, name: str) -> int:
    """`status.progress.retries` of an eval (0 when absent)."""
    status = (get_eval(api, namespace, name) or {}).get("status") or {}
    return int((status.get("progress") or {}).get("retries") or 0)


def node_ready(core: client.CoreV1Api, name: str) -> bool:
    """Whether the node reports Ready=True."""
    node = raw_json(core.read_node(name, _preload_content=False))
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in node.get("status", {}).get("conditions", [])
    )
