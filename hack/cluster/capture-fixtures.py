#!/usr/bin/env python3
"""Capture real pod objects from the test cluster as classifier fixtures.

The pod classifier (passhat/trials/classify_pod.py) must be tested on what Kubernetes
really writes, not on what we imagine it writes. This script runs one pod per case on
the real node (or a kwok node; the Kueue cases in a queue of the cluster's Kueue), waits
until the pod shows the state the case is about,
and saves the pod exactly as the API server returned it (JSON) to
tests/fixtures/pods/<case>.json, plus tests/fixtures/pods/expected.yaml mapping each file
to the outcome/reason of the DESIGN table (grading: pass [0], fail [1], infraError [75]).

    hack/cluster/up.sh && python3 hack/cluster/capture-fixtures.py [--only CASE ...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "fixtures" / "pods"
BUSYBOX = "localhost/passhat/busybox:test"
HOLD = "passhat.dev/fixture-hold"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
LOCAL_QUEUE = "fixtures"
OOM = "head -c 400m /dev/zero | tail"
RESULT_PASS = '{"outcome": "pass", "score": 1.0, "reason": "matched"}'
RESULT_FAIL = '{"outcome": "fail", "score": 0.0, "reason": "wrong refund"}'
Pod = dict[str, Any]
M = TypeVar("M")


def as_body(manifest: dict[str, Any], model: type[M]) -> M:
    """`manifest` as the body of a client method that declares `model`: every client
    release accepts a plain dict there (older ones send it as is, typed ones validate it)."""
    return cast(M, manifest)


def container_state(pod: Pod, key: str) -> dict[str, Any] | None:
    """The first container's state `key` (terminated / waiting / running), if any."""
    for status in pod.get("status", {}).get("containerStatuses", []) or []:
        state: dict[str, Any] | None = (status.get("state") or {}).get(key)
        if state:
            return state
    return None


def is_terminal(pod: Pod) -> bool:
    """Phase Succeeded or Failed."""
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def waiting_reason(*reasons: str) -> Callable[[Pod], bool]:
    """A predicate: the first container waits with one of `reasons`."""

    def check(pod: Pod) -> bool:
        waiting = container_state(pod, "waiting")
        return bool(waiting and waiting.get("reason") in reasons)

    return check


def has_condition(type_: str, reason: str) -> Callable[[Pod], bool]:
    """A predicate: the pod has condition `type_` with `reason` and has stopped running."""

    def check(pod: Pod) -> bool:
        conds = pod.get("status", {}).get("conditions", []) or []
        found = any(c.get("type") == type_ and c.get("reason") == reason for c in conds)
        return found and is_terminal(pod)

    return check


def gated(pod: Pod) -> bool:
    """Held by Kueue: a scheduling gate, and the scheduler says so."""
    conds = pod.get("status", {}).get("conditions", []) or []
    return bool(pod.get("spec", {}).get("schedulingGates")) and any(
        c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated" for c in conds
    )


def preempted(pod: Pod) -> bool:
    """Stopped by Kueue for a higher-priority workload, its container ended."""
    return is_terminal(pod) and has_condition("TerminationTarget", "WorkloadEvictedDueToPreempted")(
        pod
    )


def running(pod: Pod) -> bool:
    """Phase Running with the container started."""
    return pod.get("status", {}).get("phase") == "Running" and bool(container_state(pod, "running"))


@dataclass
class Case:
    """One fixture: how to make the pod, when it is ready to save, what it should classify as."""

    name: str
    command: str
    expected: dict[str, Any]
    node: str = "real"
    ready: Callable[[Pod], bool] = is_terminal
    memory_limit: str | None = None
    deadline_s: int | None = None
    image: str = BUSYBOX
    pull_policy: str = "Never"
    annotations: dict[str, str] = field(default_factory=dict)
    env_from_missing_configmap: bool = False
    action: str | None = None  # "evict" | "delete" | "delete-node" | "kueue-preempt" once it runs
    timeout_s: float = 240.0
    queued: bool = False  # labelled for the scratch namespace's Kueue LocalQueue (1 pod quota)


def exp(outcome: str | None, reason: str | None, note: str) -> dict[str, Any]:
    return {"outcome": outcome, "reason": reason, "note": note}


CASES = [
    Case("pass_exit0", "exit 0", exp("pass", "exit_code", "exit 0 is in grading.pass")),
    Case("fail_exit1", "exit 1", exp("fail", "exit_code", "exit 1 is in grading.fail")),
    Case("infra_exit75", "exit 75", exp("infra_error", "reported", "75 is in grading.infraError")),
    Case(
        "crash_exit3", "exit 3", exp("fail", "exit_3", "unlisted non-zero exit: the agent crashed")
    ),
    Case(
        "result_pass_exit1",
        f"echo '{RESULT_PASS}' > /dev/termination-log; exit 1",
        exp("pass", "result", "a valid result JSON in the termination message wins over the exit"),
    ),
    Case(
        "result_fail_exit0",
        f"echo '{RESULT_FAIL}' > /dev/termination-log; exit 0",
        exp("fail", "result", "a valid result JSON in the termination message wins over the exit"),
    ),
    Case(
        "oom_shell_exit0",
        f"{OOM}; exit 0",
        exp("infra_error", "oom_killed", "tail OOM-killed, the shell exits 0: still an OOM kill"),
        memory_limit="48Mi",
    ),
    Case(
        "oom_exit137",
        OOM,
        exp("infra_error", "oom_killed", "the container's main process OOM-killed"),
        memory_limit="48Mi",
    ),
    Case(
        "oom_after_result_pass",
        f"echo '{RESULT_PASS}' > /dev/termination-log; {OOM}",
        exp("infra_error", "oom_killed", "a result JSON cannot turn an OOM kill into a pass"),
        memory_limit="48Mi",
    ),
    Case(
        "deadline_exceeded",
        "sleep 3600",
        exp("infra_error", "timeout", "status.reason DeadlineExceeded (activeDeadlineSeconds)"),
        deadline_s=3,
    ),
    Case(
        "evicted",
        "sleep 3600",
        exp("infra_error", "evicted", "DisruptionTarget EvictionByEvictionAPI"),
        ready=has_condition("DisruptionTarget", "EvictionByEvictionAPI"),
        action="evict",
    ),
    Case(
        "sigterm_deleted",
        "trap 'exit 143' TERM; sleep 3600 & wait",
        exp("infra_error", "deleted", "pod deleted while running: SIGTERM, exit 143"),
        action="delete",
    ),
    Case(
        "image_never_pull",
        "true",
        exp("infra_error", "image_error", "waiting ErrImageNeverPull (past the grace period)"),
        image="docker.io/library/alpine:3.20",
        ready=waiting_reason("ErrImageNeverPull"),
    ),
    Case(
        "image_pull_error",
        "true",
        exp("infra_error", "image_error", "waiting ErrImagePull/ImagePullBackOff (past grace)"),
        image="docker.io/library/alpine:3.20",
        pull_policy="IfNotPresent",
        ready=waiting_reason("ErrImagePull", "ImagePullBackOff"),
    ),
    Case(
        "config_error",
        "true",
        exp("infra_error", "config_error", "waiting CreateContainerConfigError (past grace)"),
        env_from_missing_configmap=True,
        ready=waiting_reason("CreateContainerConfigError"),
    ),
    Case("running", "sleep 3600", exp(None, None, "still running: not terminal"), ready=running),
    Case(
        "kwok_exit0",
        "true",
        exp("pass", "exit_code", "kwok fake node, scripted exit 0"),
        node="kwok",
        annotations={"passhat.dev/fake-duration": "1s"},
    ),
    Case(
        "kwok_exit3",
        "true",
        exp("fail", "exit_3", "kwok fake node, scripted exit 3"),
        node="kwok",
        annotations={"passhat.dev/fake-duration": "1s", "passhat.dev/fake-exit-code": "3"},
    ),
    Case(
        "kwok_oom_killed",
        "true",
        exp("infra_error", "oom_killed", "kwok fake node, scripted OOMKilled / 137"),
        node="kwok",
        annotations={
            "passhat.dev/fake-duration": "1s",
            "passhat.dev/fake-exit-code": "137",
            "passhat.dev/fake-reason": "OOMKilled",
        },
    ),
    # NB: the preempted case first: it takes the queue's one pod of quota, so the gated
    # case waits; then a higher-priority pod preempts it (and the gated one still waits).
    Case(
        "kueue_preempted",
        "true",
        exp("infra_error", "preempted", "Kueue: TerminationTarget WorkloadEvictedDueToPreempted"),
        node="kwok",
        annotations={"passhat.dev/fake-run-forever": "true"},
        queued=True,
        ready=preempted,
        action="kueue-preempt",
    ),
    Case(
        "kueue_gated",
        "true",
        exp(None, None, "gated by Kueue, waiting for quota: not terminal"),
        node="kwok",
        annotations={"passhat.dev/fake-duration": "1s"},
        queued=True,
        ready=gated,
    ),
    Case(
        "node_deleted_podgc",
        "true",
        exp("infra_error", "node_lost", "node deleted: DisruptionTarget DeletionByPodGC"),
        node="kwok-gc",
        annotations={"passhat.dev/fake-run-forever": "true"},
        ready=has_condition("DisruptionTarget", "DeletionByPodGC"),
        action="delete-node",
        timeout_s=400.0,
    ),
]


def manifest(case: Case, gc_node: str) -> Pod:
    """The pod of a case (always with a finalizer so it stays readable after deletion)."""
    container: dict[str, Any] = {
        "name": "trial",
        "image": case.image,
        "imagePullPolicy": case.pull_policy,
        "command": ["sh", "-c", case.command],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
    }
    if case.memory_limit:
        container["resources"]["limits"] = {"memory": case.memory_limit}
    if case.env_from_missing_configmap:
        container["envFrom"] = [{"configMapRef": {"name": "does-not-exist"}}]
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 5,
        "automountServiceAccountToken": False,
        "containers": [container],
    }
    if case.node == "kwok-gc":
        spec["nodeName"] = gc_node
    else:
        spec["nodeSelector"] = {"type": case.node}
    if case.node.startswith("kwok"):
        spec["tolerations"] = [
            {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
        ]
    if case.deadline_s is not None:
        spec["activeDeadlineSeconds"] = case.deadline_s
    labels = {"passhat.dev/fixture": case.name}
    if case.queued:
        labels[QUEUE_LABEL] = LOCAL_QUEUE
    metadata = {
        "name": case.name.replace("_", "-"),
        "labels": labels,
        "annotations": case.annotations,
        "finalizers": [HOLD],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def read(core: client.CoreV1Api, ns: str, name: str) -> Pod | None:
    try:
        resp = core.read_namespaced_pod(name, ns, _preload_content=False)
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    # NB: with _preload_content=False the client returns the urllib3 response, not a model.
    pod: Pod = json.loads(cast(urllib3.HTTPResponse, resp).data)
    return pod


def act(core: client.CoreV1Api, ns: str, case: Case, pod_name: str, gc_node: str) -> None:
    if case.action == "evict":
        meta = client.V1ObjectMeta(name=pod_name, namespace=ns)
        core.create_namespaced_pod_eviction(pod_name, ns, client.V1Eviction(metadata=meta))
    elif case.action == "delete":
        core.delete_namespaced_pod(pod_name, ns)
    elif case.action == "delete-node":
        core.delete_node(gc_node)
    elif case.action == "kueue-preempt":
        urgent = {
            "metadata": {
                "name": "urgent",
                "labels": {QUEUE_LABEL: LOCAL_QUEUE, "kueue.x-k8s.io/priority-class": f"{ns}-high"},
                "annotations": {"passhat.dev/fake-run-forever": "true"},
            },
            "spec": {
                "restartPolicy": "Never",
                "nodeSelector": {"type": "kwok"},
                "tolerations": [
                    {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
                ],
                "containers": [{"name": "c", "image": BUSYBOX}],
            },
        }
        core.create_namespaced_pod(ns, as_body(urgent, client.V1Pod))


def kueue_objects(ns: str) -> list[tuple[str, dict[str, Any]]]:
    """(plural, object) of the Kueue queue of the scratch namespace: one pod of quota,
    lower priorities preempted, and a WorkloadPriorityClass `<ns>-high`."""
    group = {"apiVersion": "kueue.x-k8s.io/v1beta2"}
    quota = [
        {"name": "cpu", "nominalQuota": "10"},
        {"name": "memory", "nominalQuota": "10Gi"},
        {"name": "pods", "nominalQuota": 1},
    ]
    return [
        (
            "workloadpriorityclasses",
            {
                **group,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": f"{ns}-high"},
                "value": 1000,
            },
        ),
        ("resourceflavors", {**group, "kind": "ResourceFlavor", "metadata": {"name": ns}}),
        (
            "clusterqueues",
            {
                **group,
                "kind": "ClusterQueue",
                "metadata": {"name": ns},
                "spec": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                    "preemption": {"withinClusterQueue": "LowerPriority"},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory", "pods"],
                            "flavors": [{"name": ns, "resources": quota}],
                        }
                    ],
                },
            },
        ),
        (
            "localqueues",
            {
                **group,
                "kind": "LocalQueue",
                "metadata": {"name": LOCAL_QUEUE, "namespace": ns},
                "spec": {"clusterQueue": ns},
            },
        ),
    ]


def capture(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, cases: list[Case]
) -> dict[str, Pod]:
    """Run all cases at once in a scratch namespace; return case name → pod JSON."""
    ns = f"passhat-fixtures-{uuid.uuid4().hex[:6]}"
    gc_node = f"kwok-gc-{uuid.uuid4().hex[:6]}"
    queued = any(c.queued for c in cases)
    # NB: the test cluster's Kueue manages only namespaces with this label (docs/cluster.md)
    labels = {"passhat.dev/test-kueue": "true"} if queued else {}
    core.create_namespace(as_body({"metadata": {"name": ns, "labels": labels}}, client.V1Namespace))
    kueue = kueue_objects(ns) if queued else []
    for plural, obj in kueue:
        if plural == "localqueues":
            custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", ns, plural, obj)
        else:
            custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural, obj)
    if any(c.node == "kwok-gc" for c in cases):
        taint = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
        node = {
            "metadata": {
                "name": gc_node,
                "annotations": {"kwok.x-k8s.io/node": "fake"},
                "labels": {"type": "kwok-gc", "kubernetes.io/hostname": gc_node},
            },
            "spec": {"taints": [taint]},
        }
        core.create_node(as_body(node, client.V1Node))
    deadline_sa = time.monotonic() + 120
    while time.monotonic() < deadline_sa:
        try:
            core.read_namespaced_service_account("default", ns)
            break
        except ApiException:
            time.sleep(0.5)
    captured: dict[str, Pod] = {}
    acted: set[str] = set()
    try:
        for case in cases:
            core.create_namespaced_pod(ns, as_body(manifest(case, gc_node), client.V1Pod))
        start = time.monotonic()
        pending = {c.name: c for c in cases}
        while pending:
            for case in list(pending.values()):
                pod_name = case.name.replace("_", "-")
                pod = read(core, ns, pod_name)
                if pod is None:
                    raise SystemExit(f"capture-fixtures: pod {pod_name} vanished")
                if case.action and case.name not in acted and running(pod):
                    act(core, ns, case, pod_name, gc_node)
                    acted.add(case.name)
                    continue
                if (not case.action or case.name in acted) and case.ready(pod):
                    captured[case.name] = pod
                    del pending[case.name]
                    print(f"captured {case.name}", file=sys.stderr)
                elif time.monotonic() - start > case.timeout_s:
                    raise SystemExit(f"capture-fixtures: timed out waiting for {case.name}")
            time.sleep(1)
    finally:
        for item in core.list_namespaced_pod(ns).items:
            meta = item.metadata
            assert meta is not None and meta.name, f"a pod of {ns} listed without a name"
            core.patch_namespaced_pod(meta.name, ns, {"metadata": {"finalizers": None}})
        core.delete_namespace(ns)
        with contextlib.suppress(ApiException):
            core.delete_node(gc_node)
        for plural, obj in reversed(kueue):
            if plural != "localqueues":  # NB: deleted with the namespace
                with contextlib.suppress(ApiException):
                    custom.delete_cluster_custom_object(
                        "kueue.x-k8s.io", "v1beta2", plural, obj["metadata"]["name"]
                    )
    return captured


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="capture real pod objects as fixtures")
    parser.add_argument("--only", nargs="+", help="capture only these cases")
    parser.add_argument("--kubeconfig", default=str(REPO / ".cluster" / "kubeconfig"))
    args = parser.parse_args(argv)
    cases = [c for c in CASES if not args.only or c.name in args.only]
    # NB: the client's config loaders carry no annotations, even in its typed releases.
    new_client: Callable[..., client.ApiClient] = config.new_client_from_config
    api = new_client(config_file=args.kubeconfig)
    captured = capture(client.CoreV1Api(api), client.CustomObjectsApi(api), cases)
    OUT.mkdir(parents=True, exist_ok=True)
    for name, pod in captured.items():
        (OUT / f"{name}.json").write_text(json.dumps(pod, indent=2) + "\n")
    expected_path = OUT / "expected.yaml"
    expected: dict[str, Any] = {}
    if expected_path.exists():
        loaded = yaml.safe_load(expected_path.read_text().split("\n", 4)[-1]) or {}
        expected.update(loaded)
    for case in CASES:
        if case.name in captured:
            expected[f"{case.name}.json"] = case.expected
    header = (
        "# Generated by hack/cluster/capture-fixtures.py: each captured pod (JSON, as the API\n"
        "# server returned it) → the verdict the DESIGN table gives it, with\n"
        "# grading.exitCodes {pass: [0], fail: [1], infraError: [75]} and timeoutIs infra_error.\n"
        "# outcome null = not terminal yet (the classifier returns None).\n"
    )
    body = yaml.safe_dump(dict(sorted(expected.items())), sort_keys=False, width=100)
    expected_path.write_text(header + body)
    print(f"wrote {len(captured)} fixtures to {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
