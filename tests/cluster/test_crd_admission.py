"""The generated CRD on the real API server: what admission refuses, immutability, columns.

The schema and CEL rules in `crds/` come from `passhat.api.crd`; these tests pin that
the API server really accepts the CRD and enforces them with messages naming the field,
that what it stores parses back with the models, and that `kubectl get ceval` shows the
status columns.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from passhat.api import parse_spec
from passhat.api.crd import PRINTER_COLUMNS
from tests.cluster.operator_helpers import install_crd
from tests.cluster.surface_helpers import module_namespace

Manifest = dict[str, Any]

VALID: Manifest = {
    "apiVersion": "passhat.dev/v1alpha1",
    "kind": "ConsistencyEval",
    "metadata": {"name": "valid"},
    "spec": {
        "tasks": [
            {"id": "a", "params": {"day": "2024-01-01", "nested": {"x": [1, 2]}}},
            {"id": "b"},
        ],
        "trials": 3,
        "ks": [3, 1],
        "trial": {
            "template": {
                "metadata": {"labels": {"purpose": "crd-test"}},
                "spec": {
                    # NB: matches no node: no operator may run these trials anywhere.
                    "nodeSelector": {"passhat.dev/no-such-node": "true"},
                    "containers": [{"name": "agent", "image": "busybox", "command": ["true"]}],
                },
            }
        },
    },
}


def create(cluster: Any, namespace: str, manifest: Manifest) -> str | None:
    """`kubectl create` as a user would; None when admitted, else the error text."""
    proc = subprocess.run(
        [str(cluster.bin / "kubectl"), "create", "-n", namespace, "-f", "-"],
        input=yaml.safe_dump(manifest),
        capture_output=True,
        text=True,
        env=cluster.env(),
        timeout=120,
        check=False,
    )
    return None if proc.returncode == 0 else proc.stderr.strip()


def broken(name: str, change: Callable[[dict[str, Any]], None]) -> Manifest:
    manifest = named(name)
    change(manifest["spec"])
    return manifest


def _container(spec: dict[str, Any]) -> dict[str, Any]:
    first: dict[str, Any] = spec["trial"]["template"]["spec"]["containers"][0]
    return first


REFUSED = [
    ("k-above-trials", lambda s: s.update(ks=[1, 9]), "spec.ks", "at most spec.trials"),
    ("k-twice", lambda s: s.update(ks=[1, 1]), "spec.ks[1]", "Duplicate value"),
    ("k-zero", lambda s: s.update(ks=[0]), "spec.ks[0]", "greater than or equal to 1"),
    ("trials-zero", lambda s: s.update(trials=0, ks=None), "spec.trials", "greater than"),
    (
        "dup-task",
        lambda s: s.update(tasks=[{"id": "a"}, {"id": "a"}]),
        "spec.tasks[1]",
        "Duplicate",
    ),
    ("no-tasks", lambda s: s.pop("tasks"), "spec", "exactly one of spec.tasks and spec.tasksFrom"),
    (
        "both-tasks",
        lambda s: s.update(tasksFrom=[{"configMap": "suite"}]),
        "spec",
        "exactly one of spec.tasks and spec.tasksFrom",
    ),
    (
        "gate-k",
        lambda s: s.update(gate={"metric": "passHatK", "k": 4, "min": 0.5}),
        "spec.gate.k",
        "at most spec.trials",
    ),
    (
        "no-image",
        lambda s: _container(s).pop("image"),
        "spec.trial.template.spec.containers[0].image",
        "Required value",
    ),
    (
        "no-containers",
        lambda s: s["trial"]["template"]["spec"].update(containers=[]),
        "spec.trial.template.spec.containers",
        "at least 1 items",
    ),
    ("unknown-field", lambda s: s.update(trails=3), "spec.trails", "unknown field"),
    (
        "exit-code",
        lambda s: s.update(grading={"exitCodes": {"fail": [300]}}),
        "spec.grading.exitCodes.fail[0]",
        "less than or equal to 255",
    ),
    (
        "timeout-is",
        lambda s: s["trial"].update(timeoutIs="shrug"),
        "spec.trial.timeoutIs",
        "Unsupported value",
    ),
    (
        "reserved-label",
        lambda s: s["trial"]["template"].update(
            metadata={"labels": {"team": "a", "passhat.dev/recorded": "true"}}
        ),
        "spec.trial.template.metadata.labels",
        "labels under passhat.dev/ are passhat's own",
    ),
]


@pytest.fixture(scope="module")
def namespace(core_v1: client.CoreV1Api, kubectl: Callable[..., str]) -> Iterator[str]:
    """One namespace for the module, with the CRD from crds/ applied and established."""
    install_crd(kubectl)
    with module_namespace(core_v1, "crd") as name:
        yield name


def named(name: str) -> Manifest:
    manifest = copy.deepcopy(VALID)
    manifest["metadata"]["name"] = name
    return manifest


def test_valid_eval_round_trips(cluster: Any, namespace: str, kubectl: Callable[..., str]) -> None:
    """A valid eval is admitted, defaulted by the schema, and parses back with the models."""
    assert create(cluster, namespace, named("valid")) is None
    stored = json.loads(kubectl("get", "ceval", "valid", "-n", namespace, "-o", "json"))
    assert stored["spec"]["parallelism"] == 1
    assert stored["spec"]["trial"]["timeoutSeconds"] == 3600
    assert stored["spec"]["tasks"][0]["params"] == VALID["spec"]["tasks"][0]["params"]
    spec = parse_spec(stored["spec"])
    assert spec.report_ks == [1, 3]
    assert spec.trial.template == VALID["spec"]["trial"]["template"]


@pytest.mark.parametrize(
    ("name", "change", "field", "reason"), REFUSED, ids=[case[0] for case in REFUSED]
)
def test_admission_refuses_naming_the_field(
    cluster: Any,
    namespace: str,
    name: str,
    change: Callable[[dict[str, Any]], None],
    field: str,
    reason: str,
) -> None:
    """Each invalid eval is refused at admission; the error names the field and the rule."""
    error = create(cluster, namespace, broken(name, change))
    assert error is not None, f"{name} was admitted"
    assert field in error and reason in error, error


def test_spec_is_immutable_metadata_is_not(
    cluster: Any, namespace: str, kubectl: Callable[..., str]
) -> None:
    """A spec change is refused (CEL self == oldSelf); labels may still change."""
    assert create(cluster, namespace, named("immutable")) is None
    proc = subprocess.run(
        [
            str(cluster.bin / "kubectl"),
            "patch",
            "ceval",
            "immutable",
            "-n",
            namespace,
            "--type",
            "merge",
            "-p",
            '{"spec": {"trials": 4}}',
        ],
        capture_output=True,
        text=True,
        env=cluster.env(),
        timeout=120,
        check=False,
    )
    assert proc.returncode != 0 and "spec is immutable" in proc.stderr, proc.stderr
    patch = '{"metadata": {"labels": {"team": "refunds"}}}'
    kubectl("patch", "ceval", "immutable", "-n", namespace, "--type", "merge", "-p", patch)


def test_printer_columns_show_the_status(
    cluster: Any, namespace: str, kubectl: Callable[..., str]
) -> None:
    """`kubectl get ceval` shows phase, done (`5/6`), gate, mean, headline k and pass^k,
    flaky, infra rate, as the operator writes them for display (`50.0%`)."""
    assert create(cluster, namespace, named("columns")) is None
    status = {
        "status": {
            "phase": "Running",
            "progress": {"done": 5, "running": 1, "pending": 0, "retries": 2},
            "summary": {
                "byK": [
                    {
                        "k": 1,
                        "tasksScored": 2,
                        "meanPassRate": 0.5,
                        "passAtK": 0.5,
                        "passHatK": 0.5,
                    },
                    {
                        "k": 3,
                        "tasksScored": 2,
                        "meanPassRate": 0.5,
                        "passAtK": 0.75,
                        "passHatK": 0.25,
                    },
                ],
                "infraErrorRate": 0.125,
                "k": 3,
                "passHatK": 0.25,
            },
            "flakyCount": 1,
            # NB: as the operator writes it (passhat.api.status.build_display)
            "display": {
                "done": "5/6",
                "meanPassRate": "50.0%",
                "passHatK": "25.0%",
                "infraErrorRate": "12.5%",
                "gate": "",
            },
        }
    }
    kubectl(
        "patch",
        "ceval",
        "columns",
        "-n",
        namespace,
        "--subresource=status",
        "--type",
        "merge",
        "-p",
        json.dumps(status),
    )
    header, row = kubectl("get", "ceval", "columns", "-n", namespace).splitlines()
    default = [c["name"].upper() for c in PRINTER_COLUMNS if not c.get("priority")]
    assert header.split() == ["NAME", *default]
    # NB: GATE is empty while running: cells are read where their header starts
    starts = [found.start() for found in re.finditer(r"\S+", header)] + [len(row) + 1]
    cells = dict(
        zip(header.split(), [row[a:b].strip() for a, b in itertools.pairwise(starts)], strict=True)
    )
    expected = {
        "NAME": "columns",
        "PHASE": "Running",
        "DONE": "5/6",
        "GATE": "",
        "MEAN": "50.0%",
        "K": "3",
        "PASS^K": "25.0%",
        "FLAKY": "1",
        "INFRA": "12.5%",
    }
    assert {name: cells.get(name) for name in expected} == expected
