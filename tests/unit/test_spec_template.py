"""The pod template is free-form but must give passhat what it needs."""

from __future__ import annotations

from typing import Any

import pytest

from passhat.api import SpecError, parse_spec


def with_template(template: Any) -> dict[str, Any]:
    return {"tasks": [{"id": "a"}], "trials": 1, "trial": {"template": template}}


def container(**fields: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "agent", **fields}]}}


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ({}, "spec.trial.template.spec: required: a pod spec with containers"),
        (
            {"spec": {"containers": []}},
            "spec.trial.template.spec.containers: at least one container is required",
        ),
        ({"spec": {}}, "spec.trial.template.spec.containers: at least one container is required"),
        (
            {"spec": {"containers": [{"image": "x"}]}},
            "spec.trial.template.spec.containers[0].name: every container needs a name",
        ),
        (
            {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}},
            'spec.trial.template.spec.containers[1].name: duplicate container name "a"',
        ),
        (
            container(resources={"limits": {"memory": "4Gx"}}),
            "spec.trial.template.spec.containers[0].resources.limits.memory: "
            '"4Gx" is not a valid quantity (expected e.g. 500m, 2Gi)',
        ),
        (
            container(resources={"requests": {"cpu": "-1"}}),
            'spec.trial.template.spec.containers[0].resources.requests.cpu: "-1" is negative',
        ),
        (
            container(resources={"requests": {"memory": "8Gi"}, "limits": {"memory": "4Gi"}}),
            "spec.trial.template.spec.containers[0].resources.requests.memory: "
            "request 8Gi is more than the limit 4Gi",
        ),
        (
            {**container(), "metadata": {"labels": {"team": "a", "passhat.dev/recorded": "1"}}},
            'spec.trial.template.metadata.labels["passhat.dev/recorded"]: '
            "labels under passhat.dev/ are passhat's own",
        ),
        (
            container(resources={"requests": {"example.com/gpu": "x"}}),
            "spec.trial.template.spec.containers[0].resources.requests"
            '["example.com/gpu"]: "x" is not a valid quantity (expected e.g. 500m, 2Gi)',
        ),
        (
            container(resources=["cpu"]),
            "spec.trial.template.spec.containers[0].resources: "
            "must be an object with requests and/or limits",
        ),
    ],
)
def test_bad_template(template: Any, message: str) -> None:
    """A template passhat cannot use is refused with the field inside the template."""
    with pytest.raises(SpecError) as info:
        parse_spec(with_template(template))
    assert str(info.value) == message


def test_template_keeps_unknown_pod_fields() -> None:
    """Any PodTemplateSpec field passes through untouched (it is Kubernetes' to validate)."""
    template = container(
        image="x",
        command=["python", "-m", "agent"],
        resources={"requests": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": 1}},
    )
    template["metadata"] = {"labels": {"kueue.x-k8s.io/queue-name": "q"}}
    template["spec"]["nodeSelector"] = {"pool": "eval"}
    assert parse_spec(with_template(template)).trial.template == template


def test_command_is_not_required_by_the_model() -> None:
    """A container without command is valid (images have entrypoints); local checks it."""
    assert parse_spec(with_template(container(image="x"))).main_container == {
        "name": "agent",
        "image": "x",
    }
