"""The trial pod builder: every field the operator sets, names, and label round trips."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from passhat.api.load import parse_spec
from passhat.api.spec import EvalSpec
from passhat.operator.pods import (
    ANNOTATION_TASK_ID,
    FINALIZER,
    LABEL_ATTEMPT,
    LABEL_EVAL,
    LABEL_EVAL_UID,
    LABEL_TASK,
    LABEL_TRIAL,
    RESULT_PATH,
    RUN_AS_USER,
    EvalRef,
    PodKey,
    build_pod,
    pod_key,
    pod_name,
)

REF = EvalRef("team-a", "refunds-regression", "0b6c8f8e-1111-4222-8333-944445555666")
KEY = PodKey(0, 2, 1)


def make_spec(**template_spec: Any) -> EvalSpec:
    """A small valid spec whose pod template has `template_spec` merged into its spec."""
    template: dict[str, Any] = {
        "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
        "spec": {
            "containers": [
                {
                    "name": "agent",
                    "image": "localhost/agent:1",
                    "command": ["run"],
                    "env": [
                        {"name": "KEEP", "value": "1"},
                        {"name": "PASSHAT_TRIAL", "value": "9"},
                    ],
                    "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}},
                }
            ],
            **template_spec,
        },
    }
    return parse_spec(
        {
            "tasks": [{"id": "refund over limit!", "params": {"order": "A-113"}}],
            "trials": 4,
            "parallelism": 2,
            "trial": {"timeoutSeconds": 120, "template": template},
        }
    )


def build(spec: EvalSpec | None = None, key: PodKey = KEY) -> dict[str, Any]:
    """The pod of `key` for `spec` (default: make_spec())."""
    spec = spec or make_spec()
    assert spec.tasks is not None
    return build_pod(eval_ref=REF, spec=spec, task=spec.tasks[key.task], key=key)


def env_of(container: dict[str, Any]) -> dict[str, str]:
    """A container's env as a dict."""
    return {item["name"]: item["value"] for item in container["env"]}


def test_identity_labels_owner_and_finalizer() -> None:
    """The pod names its eval, slot and attempt, is owned by the eval and holds our finalizer."""
    pod = build()
    meta = pod["metadata"]
    assert meta["namespace"] == "team-a"
    assert meta["labels"] == {
        "team": "a",
        LABEL_EVAL: "refunds-regression",
        LABEL_EVAL_UID: REF.uid,
        LABEL_TASK: "0",
        LABEL_TRIAL: "2",
        LABEL_ATTEMPT: "1",
    }
    assert meta["annotations"] == {"note": "x", ANNOTATION_TASK_ID: "refund over limit!"}
    assert meta["finalizers"] == [FINALIZER]
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "passhat.dev/v1alpha1",
            "kind": "ConsistencyEval",
            "name": "refunds-regression",
            "uid": REF.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert pod_key(pod) == PodKey(0, 2, 1)


def test_pod_spec_settings_and_environment() -> None:
    """restartPolicy, deadline, no token, result path and the PASSHAT_* environment."""
    spec = build()["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["activeDeadlineSeconds"] == 120
    assert spec["automountServiceAccountToken"] is False
    container = spec["containers"][0]
    assert container["terminationMessagePath"] == RESULT_PATH
    assert container["terminationMessagePolicy"] == "File"
    assert container["resources"] == {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}}
    assert env_of(container) == {
        "KEEP": "1",
        "PASSHAT_EVAL": "refunds-regression",
        "PASSHAT_TASK_ID": "refund over limit!",
        "PASSHAT_TASK": json.dumps({"order": "A-113"}),
        "PASSHAT_TRIAL": "2",
        "PASSHAT_ATTEMPT": "1",
        "PASSHAT_RESULT": RESULT_PATH,
    }


def test_restricted_security_defaults_where_silent() -> None:
    """Non-root, no escalation, drop ALL and RuntimeDefault seccomp are filled in."""
    spec = build()["spec"]
    assert spec["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert spec["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }


def test_template_choices_are_kept() -> None:
    """What the template says wins; scheduling fields and a service account pass through."""
    spec = make_spec(
        securityContext={"runAsUser": 1000, "runAsNonRoot": True},
        serviceAccountName="agent",
        nodeSelector={"type": "kwok"},
        tolerations=[{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
        affinity={"nodeAffinity": {}},
        priorityClassName="evals",
    )
    pod = build(spec)["spec"]
    assert pod["securityContext"]["runAsUser"] == 1000
    assert "automountServiceAccountToken" not in pod
    assert pod["serviceAccountName"] == "agent"
    assert pod["nodeSelector"] == {"type": "kwok"}
    assert pod["tolerations"] == [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}]
    assert pod["affinity"] == {"nodeAffinity": {}}
    assert pod["priorityClassName"] == "evals"


def test_kueue_queue_name_becomes_a_label() -> None:
    """spec.queueName is passed to Kueue as the queue-name label."""
    spec = make_spec().model_copy(update={"queue_name": "team-a-queue"})
    assert build(spec)["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a-queue"


def test_builder_does_not_mutate_the_spec() -> None:
    """Building a pod leaves the spec's template untouched (pods are built many times)."""
    spec = make_spec()
    before = json.dumps(spec.trial.template, sort_keys=True)
    build(spec)
    build(spec, PodKey(0, 3, 0))
    assert json.dumps(spec.trial.template, sort_keys=True) == before


@pytest.mark.parametrize(
    "name", ["e", "refunds-regression", "a" * 253, "with.dots.in.name", "x-" * 100]
)
def test_names_are_deterministic_valid_and_short(name: str) -> None:
    """Names are the same for the same attempt, unique per attempt, DNS labels <= 63 chars."""
    ref = EvalRef("ns", name, "uid-1")
    keys = [PodKey(9999, 999, 100), PodKey(0, 0, 0), PodKey(0, 0, 1), PodKey(1, 0, 0)]
    names = [pod_name(ref, key) for key in keys]
    assert names == [pod_name(ref, key) for key in keys]
    assert len(set(names)) == len(names)
    for item in names:
        assert len(item) <= 63
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", item), item
    assert pod_name(EvalRef("ns", name, "uid-2"), keys[0]) != names[0]


def test_pod_key_refuses_bad_labels() -> None:
    """A pod without valid slot labels has no key."""
    assert pod_key({"metadata": {"labels": {LABEL_TASK: "1", LABEL_TRIAL: "x"}}}) is None
    assert pod_key({"metadata": {}}) is None
    labels = {LABEL_TASK: "1", LABEL_TRIAL: "-1", LABEL_ATTEMPT: "0"}
    assert pod_key({"metadata": {"labels": labels}}) is None


def test_privileged_opt_in_templates_stay_valid_pods() -> None:
    """A privileged, root template (allowed by the opt-in) gets no conflicting defaults."""
    spec = make_spec()
    container = spec.trial.template["spec"]["containers"][0]
    container["securityContext"] = {"privileged": True, "runAsUser": 0}
    pod = build(spec)["spec"]
    assert "allowPrivilegeEscalation" not in pod["containers"][0]["securityContext"]
    assert "runAsNonRoot" not in pod["securityContext"]
