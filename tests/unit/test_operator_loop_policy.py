"""The pass holds every template to the trial policy before a pod exists, and turns a pod the
API server cannot even decode (400, 413) into a ConfigError instead of retrying it forever."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from passhat.api.errors import SpecError
from passhat.api.load import parse_spec
from passhat.operator.loop import EvalLoop, PassState
from passhat.operator.policy import TrialPolicy
from passhat.operator.status import condition_status
from tests.unit.test_operator_loop import CONFIG, Harness, spec

AGENT = {"name": "agent", "image": "x"}


def harness_for(template_spec: dict[str, Any], policy: TrialPolicy | None = None) -> Harness:
    """One eval in namespace "ns" whose template's pod spec is `template_spec`, run by an
    operator with `policy`."""
    body = spec(trial={"timeoutSeconds": 60, "template": {"spec": template_spec}})
    harness = Harness(31, body=body)
    config = dataclasses.replace(CONFIG, trial_policy=policy or TrialPolicy())
    harness.loop = EvalLoop(harness.api, harness.ref, config=config, clock=harness.clock)
    return harness


def config_error(harness: Harness) -> str:
    """The eval's ConfigError message, asserting it stopped with no pods."""
    status = harness.status
    assert status["phase"] == "Failed"
    assert condition_status(status, "ConfigError") == "True"
    assert harness.api.pods == {}
    return str(status["message"])


def test_root_trial_is_refused_before_any_pod() -> None:
    """runAsUser 0 (which passed before) stops the eval in its first pass, naming the field."""
    agent = {**AGENT, "securityContext": {"runAsUser": 0}}
    harness = harness_for({"containers": [agent]})
    assert harness.loop.run_pass().state is PassState.DONE
    assert harness.api.created_names == []
    message = config_error(harness)
    assert message.startswith(
        "spec.trial.template.spec.containers[0].securityContext.runAsUser: 0 is root; "
        "trial pods must run as non-root"
    )
    assert "operator.privilegedNamespaces" in message


def test_privileged_trials_are_granted_per_namespace() -> None:
    """A privileged, root, host-network template runs in a namespace the admin granted, and
    is refused in any other namespace by the same operator."""
    agent = {**AGENT, "securityContext": {"privileged": True, "runAsUser": 0}}
    template_spec = {"containers": [agent], "hostNetwork": True}
    granted = harness_for(template_spec, TrialPolicy(privileged_namespaces=frozenset({"ns"})))
    assert granted.loop.run_pass().state is PassState.CONTINUE
    assert len(granted.api.pods) == 4
    pod = next(iter(granted.api.pods.values()))
    assert pod["spec"]["hostNetwork"] is True
    assert pod["spec"]["containers"][0]["securityContext"]["privileged"] is True

    elsewhere = harness_for(template_spec, TrialPolicy(privileged_namespaces=frozenset({"lab"})))
    assert elsewhere.loop.run_pass().state is PassState.DONE
    message = config_error(elsewhere)
    assert "securityContext.privileged" in message and "hostNetwork" in message


def test_scheduling_grants_name_their_chart_value() -> None:
    """nodeName is refused everywhere, even in a privileged namespace; a priority class is
    refused until the admin lists it."""
    pinned = harness_for(
        {"containers": [AGENT], "nodeName": "node-1"},
        TrialPolicy(privileged_namespaces=frozenset({"ns"})),
    )
    pinned.loop.run_pass()
    assert config_error(pinned).startswith("spec.trial.template.spec.nodeName: not allowed")

    urgent = {"containers": [AGENT], "priorityClassName": "urgent"}
    refused = harness_for(urgent)
    refused.loop.run_pass()
    assert "chart value operator.allowedPriorityClasses" in config_error(refused)
    allowed = harness_for(urgent, TrialPolicy(priority_classes=frozenset({"urgent"})))
    allowed.loop.run_pass()
    assert len(allowed.api.pods) == 4


def test_spec_priority_class_name_is_the_templates_within_the_admins_list() -> None:
    """spec.priorityClassName (#23) sets the trial pods' priorityClassName, held to the same
    allowed list as the template's field, which it may not contradict."""
    body = spec(priorityClassName="urgent")
    refused = Harness(31, body=body)
    refused.loop.run_pass()
    message = config_error(refused)
    assert message.startswith("spec.trial.template.spec.priorityClassName: urgent is not")
    assert "chart value operator.allowedPriorityClasses" in message

    allowed = Harness(31, body=body)
    config = dataclasses.replace(
        CONFIG, trial_policy=TrialPolicy(priority_classes=frozenset({"urgent"}))
    )
    allowed.loop = EvalLoop(allowed.api, allowed.ref, config=config, clock=allowed.clock)
    allowed.loop.run_pass()
    assert len(allowed.api.pods) == 4
    assert {pod["spec"]["priorityClassName"] for pod in allowed.api.pods.values()} == {"urgent"}

    template = {"spec": {"containers": [AGENT], "priorityClassName": "batch-low"}}
    with pytest.raises(
        SpecError,
        match=r"spec.priorityClassName: urgent differs from the "
        r"trial template's priorityClassName batch-low; give it in one place",
    ):
        parse_spec(
            spec(priorityClassName="urgent", trial={"timeoutSeconds": 60, "template": template})
        )


def test_type_confusion_is_a_config_error_with_the_servers_message() -> None:
    """`hostNetwork: "true"` gets past the CRD, the model and the restricted check (it is not
    true); the API server cannot decode the pod (400). The pass that met the 400 creates
    nothing and asks for the next pass right away, which stops the eval with the server's
    words (it raised before, and was retried forever with no event)."""
    harness = harness_for({"containers": [AGENT], "hostNetwork": "true"})
    events: list[Any] = []
    harness.loop._post_event = lambda body, event: events.append(event)
    assert harness.loop.run_pass().state is PassState.CONFLICT  # NB: run again right away
    assert harness.loop.run_pass().state is PassState.DONE
    message = config_error(harness)
    assert "the API server refused the trial pod: create: HTTP 400" in message
    assert "PodSpec.spec.hostNetwork of type bool" in message
    assert [event.reason for event in events] == ["Started", "ConfigError"]


def test_pod_too_large_for_the_api_server_is_a_config_error() -> None:
    """A task whose params, copied into every container's env, make a pod body over the API
    server's 3 MiB request limit (413) stops the eval instead of being retried forever
    (63 KiB of params, under their 64 KiB limit, in 52 containers)."""
    harness = harness_for({"containers": [{**AGENT, "name": f"c{i}"} for i in range(52)]})
    body = harness.api.evals["demo"]
    body["spec"]["tasks"][0]["params"] = {"blob": "x" * (63 * 1024)}
    harness.loop.run_pass()
    harness.loop.run_pass()
    message = config_error(harness)
    assert "HTTP 413" in message and "Request entity too large" in message


def test_odd_security_context_types_reach_the_api_server_not_a_crash() -> None:
    """A securityContext that is not an object is left for the API server to refuse (here
    only checked: building the pod does not crash, so the pass gets that far)."""
    from passhat.operator.pods import EvalRef, PodKey, build_pod

    harness = harness_for({"containers": [AGENT]})
    resolved = harness.loop._resolve(harness.api.evals["demo"], started=False)
    odd = copy.deepcopy(resolved.spec)
    odd.trial.template["spec"]["securityContext"] = "root"
    odd.trial.template["spec"]["containers"][0]["securityContext"] = None
    odd.trial.template["spec"]["initContainers"] = [
        "x",
        {"name": "i", "securityContext": {"capabilities": {"drop": "ALL"}}},
    ]
    pod = build_pod(
        eval_ref=EvalRef("ns", "demo", "u"), spec=odd, task=resolved.tasks[0], key=PodKey(0, 0, 0)
    )
    assert pod["spec"]["securityContext"] == "root"
    assert pod["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False
