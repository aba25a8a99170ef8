"""The operator's protobuf pod reads against this cluster's API server: every pod state a
trial goes through decodes to the same slim pod as its JSON, and `Kube.watch_pods`'s
protobuf stream keeps the cache equal to what the API server holds.

(The unit tests hold the decoder to pods captured once, `tests/fixtures/wire/pods.json`;
this one to the Kubernetes version the cluster runs now.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from passhat.operator import protowire
from passhat.operator.config import OperatorConfig
from passhat.operator.kube import Kube, load_client_config
from passhat.operator.pods import LABEL_EVAL_UID
from passhat.operator.slimpod import decode_pod, slim_pod
from tests.cluster.conftest import Cluster
from tests.cluster.kube_helpers import create_pod, raw_json

TIMEOUT_S = 300
EVAL_UID = "wire-test"

# name -> (node, command, kwok script): every outcome the classifier tells apart
CASES: dict[str, tuple[str, str, dict[str, str]]] = {
    "kwok-ok": ("kwok", "true", {}),
    "kwok-exit3": ("kwok", "true", {"passhat.dev/fake-exit-code": "3"}),
    "kwok-oom": (
        "kwok",
        "true",
        {"passhat.dev/fake-exit-code": "137", "passhat.dev/fake-reason": "OOMKilled"},
    ),
    "real-ok": ("real", 'echo \'{"outcome": "pass"}\' > /dev/termination-log', {}),
    "real-exit1": ("real", "exit 1", {}),
}


def both_ways(core: client.CoreV1Api, namespace: str, name: str) -> tuple[Any, Any] | None:
    """(slim pod from protobuf, slim pod from JSON) of one unchanged version of the pod."""
    api = core.api_client

    def protobuf() -> bytes:
        _, url, headers, _, _ = api.param_serialize(
            method="GET",
            resource_path=f"/api/v1/namespaces/{namespace}/pods/{name}",
            header_params={"Accept": protowire.MEDIA_TYPE},
            auth_settings=["BearerToken"],
        )
        response = api.call_api("GET", url, header_params=headers)
        try:
            return bytes(response.read())
        finally:
            response.response.release_conn()

    before = protobuf()
    pod = raw_json(core.read_namespaced_pod(name, namespace, _preload_content=False))
    if protobuf() != before:
        return None  # NB: the pod changed in between: ask again
    kind, raw = protowire.unwrap(before)
    assert kind == "Pod"
    return decode_pod(raw), slim_pod(pod)


def test_every_trial_state_decodes_as_its_json(
    cluster: Cluster,
    core_v1: client.CoreV1Api,
    namespace: str,
    pod_manifest: Callable[..., dict[str, Any]],
    wait_for: Callable[..., Any],
) -> None:
    """Pending, running and ended pods on kwok and on the real node, read both ways at
    each state seen, and the cache a protobuf watch fed equal to them at the end."""
    kube = Kube(load_client_config(str(cluster.kubeconfig)), OperatorConfig())
    events: list[tuple[str, str]] = []
    failures: list[BaseException] = []

    def watch() -> None:
        try:
            kube.watch_pods(
                namespace, lambda kind, pod: events.append((kind, pod["metadata"]["name"]))
            )
        except BaseException as err:  # NB: reported below, unless the test is over
            failures.append(err)

    threading.Thread(target=watch, daemon=True).start()
    wait_for(lambda: kube.pods.pods(namespace, EVAL_UID) is not None, 60, "the pod cache to sync")
    for name, (node, command, script) in CASES.items():
        manifest = pod_manifest(
            name, command, node=node, annotations={"passhat.dev/fake-duration": "2s", **script}
        )
        manifest["metadata"]["labels"] = {LABEL_EVAL_UID: EVAL_UID}
        create_pod(core_v1, namespace, manifest)
    compared: dict[str, set[str]] = {name: set() for name in CASES}

    def all_ended() -> bool:
        ended = True
        for name in CASES:
            try:
                pair = both_ways(core_v1, namespace, name)
            except ApiException:
                return False
            if pair is None:
                return False
            from_protobuf, from_json = pair
            assert from_protobuf == from_json, name
            phase = from_json["status"].get("phase", "")
            compared[name].add(phase)
            ended &= phase in ("Succeeded", "Failed")
        return ended

    wait_for(all_ended, TIMEOUT_S, "every pod to end", interval=0.2)
    assert all(phases & {"Succeeded", "Failed"} for phases in compared.values()), compared

    def cache_caught_up() -> bool:
        cached = {pod["metadata"]["name"]: pod for pod in kube.pods.pods(namespace, EVAL_UID) or []}
        pairs = {name: both_ways(core_v1, namespace, name) for name in CASES}
        return all(pair is not None and cached.get(name) == pair[1] for name, pair in pairs.items())

    wait_for(cache_caught_up, 60, "the watch-fed cache to equal the pods")
    assert not failures, failures
    assert {name for kind, name in events if kind == "ADDED"} == set(CASES)
    assert any(kind == "MODIFIED" for kind, _ in events)
    kube.close()
