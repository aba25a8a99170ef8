"""What the real kubelet node really does: exits, OOM kills, deadlines, evictions, no pulls."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes import client

from tests.cluster.kube_helpers import create_pod, raw_json

Pod = dict[str, Any]
TIMEOUT_S = 300


def read_pod(core: client.CoreV1Api, namespace: str, name: str) -> Pod:
    """The pod as the API server returned it (raw JSON, no client-side model)."""
    pod: Pod = raw_json(core.read_namespaced_pod(name, namespace, _preload_content=False))
    return pod


def terminated(pod: Pod) -> dict[str, Any] | None:
    """The first container's terminated state, if it has one."""
    for status in pod.get("status", {}).get("containerStatuses", []):
        state: dict[str, Any] | None = status.get("state", {}).get("terminated")
        if state:
            return state
    return None


def finished(core: client.CoreV1Api, namespace: str, name: str) -> Callable[[], Pod | None]:
    """A predicate: the pod once its phase is Succeeded or Failed."""

    def check() -> Pod | None:
        pod = read_pod(core, namespace, name)
        return pod if pod["status"].get("phase") in ("Succeeded", "Failed") else None

    return check


def condition(pod: Pod, type_: str) -> dict[str, Any] | None:
    """The pod condition of the given type, if present."""
    for cond in pod.get("status", {}).get("conditions", []):
        if cond["type"] == type_:
            found: dict[str, Any] = cond
            return found
    return None


def test_exit_codes_and_termination_message(
    core_v1: client.CoreV1Api,
    namespace: str,
    pod_manifest: Callable[..., Pod],
    wait_for: Callable[..., Any],
) -> None:
    """Exit 0 → Succeeded, exit 1 → Failed with exitCode 1; the result JSON is the message."""
    result = '{"outcome": "pass", "score": 1.0}'
    create_pod(core_v1, namespace, pod_manifest("ok", f"echo '{result}' > /dev/termination-log"))
    create_pod(core_v1, namespace, pod_manifest("bad", "exit 1"))
    ok = wait_for(finished(core_v1, namespace, "ok"), TIMEOUT_S, "pod ok to finish")
    bad = wait_for(finished(core_v1, namespace, "bad"), TIMEOUT_S, "pod bad to finish")
    assert ok["status"]["phase"] == "Succeeded"
    ok_state = terminated(ok)
    assert ok_state is not None
    assert ok_state["exitCode"] == 0
    assert json.loads(ok_state["message"]) == json.loads(result)
    assert bad["status"]["phase"] == "Failed"
    bad_state = terminated(bad)
    assert bad_state is not None
    assert bad_state["exitCode"] == 1


def test_memory_limit_exceeded_is_oom_killed(
    core_v1: client.CoreV1Api,
    namespace: str,
    pod_manifest: Callable[..., Pod],
    wait_for: Callable[..., Any],
) -> None:
    """A pod over its memory limit ends with terminated.reason OOMKilled (even if sh exits 0)."""
    create_pod(
        core_v1,
        namespace,
        pod_manifest("oom", "head -c 400m /dev/zero | tail; exit 0", memory_limit="48Mi"),
    )
    pod = wait_for(finished(core_v1, namespace, "oom"), TIMEOUT_S, "the OOM pod to finish")
    state = terminated(pod)
    assert state is not None
    assert state["reason"] == "OOMKilled", state


def test_active_deadline_ends_with_deadline_exceeded(
    core_v1: client.CoreV1Api,
    namespace: str,
    pod_manifest: Callable[..., Pod],
    wait_for: Callable[..., Any],
) -> None:
    """A pod past activeDeadlineSeconds ends Failed with status.reason DeadlineExceeded."""
    create_pod(core_v1, namespace, pod_manifest("slow", "sleep 3600", deadline_s=5))
    pod = wait_for(finished(core_v1, namespace, "slow"), TIMEOUT_S, "the deadline to kill the pod")
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["reason"] == "DeadlineExceeded"


def test_eviction_api_sets_disruption_target(
    core_v1: client.CoreV1Api,
    namespace: str,
    pod_manifest: Callable[..., Pod],
    wait_for: Callable[..., Any],
    strip_pod_finalizers: Callable[[str], None],
) -> None:
    """An eviction through the Eviction API gives the pod a DisruptionTarget condition."""
    pod = pod_manifest("victim", "sleep 3600", finalizers=["passhat.dev/test-hold"])
    create_pod(core_v1, namespace, pod)
    wait_for(
        lambda: read_pod(core_v1, namespace, "victim")["status"].get("phase") == "Running",
        TIMEOUT_S,
        "the victim pod to run",
    )
    core_v1.create_namespaced_pod_eviction(
        "victim",
        namespace,
        client.V1Eviction(metadata=client.V1ObjectMeta(name="victim", namespace=namespace)),
    )
    evicted = wait_for(finished(core_v1, namespace, "victim"), TIMEOUT_S, "the evicted pod to stop")
    target = condition(evicted, "DisruptionTarget")
    assert target is not None
    assert target["status"] == "True"
    assert target["reason"] == "EvictionByEvictionAPI"
    assert evicted["metadata"].get("deletionTimestamp")
    strip_pod_finalizers(namespace)


def test_no_image_is_ever_pulled(
    core_v1: client.CoreV1Api,
    namespace: str,
    pod_manifest: Callable[..., Pod],
    wait_for: Callable[..., Any],
) -> None:
    """Never → ErrImageNeverPull; a real pull fails at once on the loopback mirror."""
    create_pod(
        core_v1, namespace, pod_manifest("never", "true", image="docker.io/library/alpine:3.20")
    )
    create_pod(
        core_v1,
        namespace,
        pod_manifest(
            "pull", "true", image="docker.io/library/alpine:3.20", pull_policy="IfNotPresent"
        ),
    )

    def waiting_reason(name: str, reasons: tuple[str, ...]) -> Callable[[], dict[str, Any] | None]:
        def check() -> dict[str, Any] | None:
            for status in read_pod(core_v1, namespace, name)["status"].get("containerStatuses", []):
                waiting: dict[str, Any] | None = status.get("state", {}).get("waiting")
                if waiting and waiting.get("reason") in reasons:
                    return waiting
            return None

        return check

    never = wait_for(
        waiting_reason("never", ("ErrImageNeverPull",)), TIMEOUT_S, "ErrImageNeverPull"
    )
    assert "alpine" in never["message"]
    pulled = wait_for(
        waiting_reason("pull", ("ErrImagePull", "ImagePullBackOff")), TIMEOUT_S, "ErrImagePull"
    )
    assert pulled["reason"] in ("ErrImagePull", "ImagePullBackOff")
