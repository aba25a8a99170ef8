"""template_safety_problems names every unsafe field of a pod template."""

from __future__ import annotations

from typing import Any

import pytest

from passhat.api import template_safety_problems

P = "spec.trial.template.spec"


def pod(spec: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "agent"}], **spec}}


def test_restricted_template_is_safe() -> None:
    """A template inside the restricted profile has no problems."""
    template = pod({})
    template["spec"]["containers"][0]["securityContext"] = {
        "privileged": False,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    template["spec"]["hostNetwork"] = False
    template["spec"]["volumes"] = [{"name": "tmp", "emptyDir": {}}]
    assert template_safety_problems(template) == []


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"hostNetwork": True}, f"{P}.hostNetwork: host namespaces are not allowed"),
        ({"hostPID": True}, f"{P}.hostPID: host namespaces are not allowed"),
        ({"hostIPC": True}, f"{P}.hostIPC: host namespaces are not allowed"),
        (
            {"volumes": [{"name": "v", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/"}}]},
            f"{P}.volumes[1].hostPath: hostPath volumes are not allowed",
        ),
        (
            {"containers": [{"name": "a", "securityContext": {"privileged": True}}]},
            f"{P}.containers[0].securityContext.privileged: privileged is not allowed",
        ),
        (
            {
                "initContainers": [
                    {"name": "i", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}
                ]
            },
            f"{P}.initContainers[0].securityContext.capabilities.add: "
            "added capabilities are not allowed",
        ),
        (
            {"containers": [{"name": "a", "securityContext": {"allowPrivilegeEscalation": True}}]},
            f"{P}.containers[0].securityContext.allowPrivilegeEscalation: "
            "privilege escalation is not allowed",
        ),
        (
            {"containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 80}]}]},
            f"{P}.containers[0].ports[0].hostPort: host ports are not allowed",
        ),
    ],
)
def test_unsafe_fields_are_named(spec: dict[str, Any], expected: str) -> None:
    """Each unsafe setting yields one line naming its field."""
    assert template_safety_problems(pod(spec)) == [expected]


def test_every_problem_is_listed() -> None:
    """Several unsafe settings give several lines."""
    template = pod({"hostPID": True, "volumes": [{"name": "h", "hostPath": {"path": "/"}}]})
    assert len(template_safety_problems(template)) == 2
