"""Evals too big for a copy in an annotation run, and `kubectl delete` removes them.

Annotations are capped at 256 KiB in total. kopf's diff base (the last-handled
configuration) used to copy the whole spec, labels and annotations into one: for a spec
over 256 KiB, or user annotations over 128 KiB, every kopf patch was refused ("Too long"),
the one removing kopf's finalizer included, so the deleted eval stayed Terminating forever.
The diff base is empty now (passhat has no create/update handlers). An eval that still
carries an old, full copy gets the empty one in its place.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import kopf
import pytest
from kubernetes import client

from passhat.api.spec import GROUP
from tests.cluster.conftest import wait_for
from tests.cluster.operator_helpers import (
    OperatorProcess,
    create_eval,
    eval_manifest,
    get_eval,
    install_crd,
    wait_for_condition,
)
from tests.cluster.surface_helpers import module_namespace, shutdown

Manifest = dict[str, Any]
COMPLETE_TIMEOUT_S = 300
DELETE_TIMEOUT_S = 120
DIFF_BASE = f"{GROUP}/last-handled-configuration"
KIB = 1024


def base(name: str, *, tasks: int, params_kib: int) -> Manifest:
    """An eval on kwok nodes, 1 trial per task, each task's params holding a big string."""
    manifest = eval_manifest(name, tasks=tasks, trials=1, parallelism=tasks, scripted=False)
    for task in manifest["spec"]["tasks"]:
        task["params"] = {"prompt": "x" * (params_kib * KIB)}
    return manifest


def big_spec() -> Manifest:
    """A spec of 300 KiB: 5 tasks with 60 KiB of params each (params are at most 64 KiB)."""
    return base("big-spec", tasks=5, params_kib=60)


def big_annotation() -> Manifest:
    """A small spec with 140 KiB of the user's own annotations (kopf copied them too)."""
    manifest = base("big-annotation", tasks=2, params_kib=0)
    manifest["metadata"]["annotations"] = {"example.com/notes": "n" * (140 * KIB)}
    return manifest


def old_diff_base() -> Manifest:
    """An eval the old operator handled: it carries kopf's full copy of its 60 KiB spec."""
    manifest = base("old-diff-base", tasks=2, params_kib=30)
    old = kopf.AnnotationsDiffBaseStorage(prefix=GROUP, key="last-handled-configuration")
    essence = old.build(body=kopf.Body(cast(kopf.RawBody, manifest)))
    manifest["metadata"]["annotations"] = {DIFF_BASE: json.dumps(essence) + "\n"}
    assert len(manifest["metadata"]["annotations"][DIFF_BASE]) > 60 * KIB
    return manifest


CASES: dict[str, Callable[[], Manifest]] = {
    "big-spec": big_spec,
    "big-annotation": big_annotation,
    "old-diff-base": old_diff_base,
}


@dataclass
class Run:
    """One operator for the module's evals."""

    namespace: str
    operator: OperatorProcess


@pytest.fixture(scope="module")
def run(
    cluster: Any,
    kubectl: Callable[..., str],
    core_v1: client.CoreV1Api,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Run]:
    """The operator watching a fresh namespace."""
    install_crd(kubectl)
    log_dir: Path = tmp_path_factory.mktemp("big-spec")
    with module_namespace(core_v1, "big-spec") as namespace:
        operator = OperatorProcess(
            kubeconfig=cluster.kubeconfig,
            namespaces=[namespace],
            log_path=log_dir / "operator.log",
            extra_args=["--set", "resync_interval_s=2"],
        )
        operator.start()
        try:
            yield Run(namespace, operator)
        finally:
            shutdown(operator, kubectl, namespace)


def kopf_annotations(body: Manifest) -> dict[str, str]:
    """The eval's annotations under passhat.dev/ (kopf's state)."""
    annotations: dict[str, str] = body["metadata"].get("annotations") or {}
    return {key: value for key, value in annotations.items() if key.startswith(f"{GROUP}/")}


@pytest.mark.parametrize("case", list(CASES))
def test_big_eval_runs_and_deleting_it_completes(
    run: Run, api_client: client.ApiClient, kubectl: Callable[..., str], case: str
) -> None:
    """The eval completes; kopf's annotations stay small (an empty diff base); `kubectl
    delete` finishes: kopf can remove its finalizer."""
    manifest = CASES[case]()
    tasks = len(manifest["spec"]["tasks"])
    create_eval(api_client, run.namespace, manifest)
    body = wait_for_condition(
        api_client,
        run.namespace,
        case,
        "Complete",
        timeout=COMPLETE_TIMEOUT_S,
        operator=run.operator,
    )
    assert body["status"]["progress"]["done"] == tasks

    def diff_base_written() -> dict[str, str] | None:
        kopf_state = kopf_annotations(get_eval(api_client, run.namespace, case) or {"metadata": {}})
        return kopf_state if kopf_state.get(DIFF_BASE) == "{}\n" else None

    kopf_state = wait_for(diff_base_written, 60, f"{case}: an empty diff base")
    assert sum(len(key) + len(value) for key, value in kopf_state.items()) < KIB, kopf_state

    kubectl("delete", "consistencyeval", case, "-n", run.namespace, "--wait=false")
    deadline = time.monotonic() + DELETE_TIMEOUT_S
    while get_eval(api_client, run.namespace, case) is not None:
        run.operator.assert_running()
        if time.monotonic() > deadline:
            pytest.fail(
                f"{case}: still there {DELETE_TIMEOUT_S}s after kubectl delete\n"
                f"{run.operator.log_tail()}"
            )
        time.sleep(1.0)
    run.operator.assert_running()
    log = run.operator.log_path.read_text(errors="replace")
    assert "Too long" not in log, run.operator.log_tail()
