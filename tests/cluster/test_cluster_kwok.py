"""kwok fake nodes: pods end the way their annotations script, finalizers hold deletion,
and a deleted node's pods are garbage-collected by the real controller-manager."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from passhat.trials.classify_pod import parse_timestamp
from tests.cluster.kube_helpers import as_body, create_pod, raw_json

Pod = dict[str, Any]
TIMEOUT_S = 300  # generous: kwok shares its queue with whatever else runs
HOLD = "passhat.dev/test-hold"


def read_pod(core: client.CoreV1Api, namespace: str, name: str) -> Pod | None:
    """The pod as the API server returned it, or None once it is gone."""
    try:
        resp = core.read_namespaced_pod(name, namespace, _preload_content=False)
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    pod: Pod = raw_json(resp)
    return pod


def phase_in(
    core: client.CoreV1Api, namespace: str, name: str, *phases: str
) -> Callable[[], Pod | None]:
    """A predicate: the pod once its phase is one of `phases`."""

    def check() -> Pod | None:
        pod = read_pod(core, namespace, name)
        return pod if pod and pod["status"].get("phase") in phases else None

    return check


def gone(core: client.CoreV1Api, namespace: str, name: str) -> Callable[[], bool]:
    """A predicate: the pod no longer exists."""
    return lambda: read_pod(core, namespace, name) is None


def terminated(pod: Pod) -> dict[str, Any]:
    """The first container's terminated state (KeyError if it has none)."""
    state: dict[str, Any] = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    return state


def test_kwok_pods_end_as_their_annotations_script(
    core_v1: client.CoreV1Api,
    namespace: str,
    pod_manifest: Callable[..., Pod],
    wait_for: Callable[..., Any],
) -> None:
    """No annotation → Succeeded/0; exit code 3 → Failed/3/Error; reason OOMKilled kept.
    An ended pod's times are its script's: finishedAt (and the conditions that changed at
    the end) is its startTime plus its fake-duration, whenever kwok got to it, so that a
    late replay of the stage writes nothing new (docs/cluster.md)."""
    cases = {
        "plain": ({}, "Succeeded", 0, "Completed"),
        "exit3": ({"passhat.dev/fake-exit-code": "3"}, "Failed", 3, "Error"),
        "oom": (
            {"passhat.dev/fake-exit-code": "137", "passhat.dev/fake-reason": "OOMKilled"},
            "Failed",
            137,
            "OOMKilled",
        ),
    }
    for name, (scripted, *_) in cases.items():
        scripted = {"passhat.dev/fake-duration": "1s", **scripted}
        create_pod(
            core_v1, namespace, pod_manifest(name, "true", node="kwok", annotations=scripted)
        )
    for name, (_, phase, code, reason) in cases.items():
        pod = wait_for(
            phase_in(core_v1, namespace, name, "Succeeded", "Failed"), TIMEOUT_S, f"{name} to end"
        )
        assert pod["spec"]["nodeName"].startswith("kwok-")
        assert pod["status"]["phase"] == phase, name
        state = terminated(pod)
        assert (state["exitCode"], state["reason"]) == (code, reason), name
        # NB: read as the operator reads them
        started, finished = (parse_timestamp(state[key]) for key in ("startedAt", "finishedAt"))
        assert started is not None and finished is not None, state
        start_time = parse_timestamp(pod["status"]["startTime"])
        assert (started, finished - started) == (start_time, 1), name
        ended = {c["type"]: c["lastTransitionTime"] for c in pod["status"]["conditions"]}
        assert ended["Ready"] == ended["ContainersReady"] == state["finishedAt"], name


def test_kwok_finalizer_holds_a_deleted_pod_until_removed(
    core_v1: client.CoreV1Api,
    namespace: str,
    pod_manifest: Callable[..., Pod],
    wait_for: Callable[..., Any],
) -> None:
    """A deleted kwok pod is killed (137) but stays while it has a finalizer; then it goes."""
    annotations = {"passhat.dev/fake-run-forever": "true"}
    create_pod(
        core_v1,
        namespace,
        pod_manifest("held", "true", node="kwok", annotations=annotations, finalizers=[HOLD]),
    )
    wait_for(phase_in(core_v1, namespace, "held", "Running"), TIMEOUT_S, "the held pod to run")
    core_v1.delete_namespaced_pod("held", namespace)
    pod = wait_for(phase_in(core_v1, namespace, "held", "Failed"), TIMEOUT_S, "the held pod killed")
    assert terminated(pod)["exitCode"] == 137
    # NB: a negative check: kwok must not remove the pod while the finalizer is set.
    time.sleep(3)
    still = read_pod(core_v1, namespace, "held")
    assert still is not None and still["metadata"]["deletionTimestamp"]
    core_v1.patch_namespaced_pod("held", namespace, {"metadata": {"finalizers": None}})
    wait_for(gone(core_v1, namespace, "held"), TIMEOUT_S, "the held pod to be removed")


def test_deleted_node_pods_are_garbage_collected(
    core_v1: client.CoreV1Api,
    namespace: str,
    pod_manifest: Callable[..., Pod],
    wait_for: Callable[..., Any],
) -> None:
    """Deleting a node gets its pods a DisruptionTarget DeletionByPodGC and deleted."""
    node = f"kwok-gc-{uuid.uuid4().hex[:6]}"
    manifest = {
        "metadata": {
            "name": node,
            "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {"type": "kwok-gc", "kubernetes.io/hostname": node},
        },
        "spec": {
            "taints": [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]
        },
    }
    core_v1.create_node(as_body(manifest, client.V1Node))
    try:
        pod = pod_manifest(
            "orphan",
            "true",
            node="kwok",
            annotations={"passhat.dev/fake-run-forever": "true"},
            finalizers=[HOLD],
        )
        del pod["spec"]["nodeSelector"]
        pod["spec"]["nodeName"] = node
        create_pod(core_v1, namespace, pod)
        wait_for(phase_in(core_v1, namespace, "orphan", "Running"), TIMEOUT_S, "the pod to run")
    finally:
        core_v1.delete_node(node)

    def collected() -> Pod | None:
        current = read_pod(core_v1, namespace, "orphan")
        if current is None or not current["metadata"].get("deletionTimestamp"):
            return None
        for cond in current["status"].get("conditions", []):
            if cond["type"] == "DisruptionTarget" and cond["reason"] == "DeletionByPodGC":
                return current
        return None

    # NB: the pod GC looks every 20s and waits out a 40s quarantine for orphaned pods.
    orphan = wait_for(collected, 300, "the pod GC to delete the orphaned pod")
    assert orphan["status"]["phase"] == "Failed"
    core_v1.patch_namespaced_pod("orphan", namespace, {"metadata": {"finalizers": None}})
    wait_for(gone(core_v1, namespace, "orphan"), TIMEOUT_S, "the orphaned pod to be removed")
