"""template_safety_problems holds a pod template to Pod Security "restricted", field by field."""

from __future__ import annotations

from typing import Any

import pytest

from passhat.api import template_safety_problems
from passhat.api.podsecurity import RESTRICTED_VOLUME_TYPES

P = "spec.trial.template.spec"
C = f"{P}.containers[0].securityContext"
ANNOTATIONS = "spec.trial.template.metadata.annotations"


def pod(spec: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "agent"}], **spec}}


def with_container_security(**security: Any) -> dict[str, Any]:
    return pod({"containers": [{"name": "agent", "securityContext": security}]})


def with_pod_security(**security: Any) -> dict[str, Any]:
    return pod({"securityContext": security})


def test_restricted_template_is_safe() -> None:
    """A template inside the restricted profile, every allowed value spelled out, is safe."""
    template = pod({})
    template["metadata"] = {
        "annotations": {
            "container.apparmor.security.beta.kubernetes.io/agent": "runtime/default",
            "container.apparmor.security.beta.kubernetes.io/side": "localhost/agent-profile",
        }
    }
    template["spec"]["securityContext"] = {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "seccompProfile": {"type": "Localhost", "localhostProfile": "agent.json"},
        "appArmorProfile": {"type": "RuntimeDefault"},
        "seLinuxOptions": {"type": "container_t", "level": "s0:c123,c456"},
        "sysctls": [],
    }
    template["spec"]["containers"][0].update(
        securityContext={
            "privileged": False,
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
            "seccompProfile": {"type": "RuntimeDefault"},
            "procMount": "Default",
        },
        ports=[{"containerPort": 80, "hostPort": 0}],
        livenessProbe={"httpGet": {"path": "/", "port": 80, "host": ""}},
        readinessProbe={"tcpSocket": {"port": 80}},
    )
    template["spec"]["hostNetwork"] = False
    template["spec"]["volumes"] = [
        {"name": f"v{i}", kind: {}} for i, kind in enumerate(RESTRICTED_VOLUME_TYPES)
    ] + [{"name": "default-is-empty-dir"}]
    assert template_safety_problems(template) == []


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (pod({"hostNetwork": True}), f"{P}.hostNetwork: host namespaces are not allowed"),
        (pod({"hostPID": True}), f"{P}.hostPID: host namespaces are not allowed"),
        (pod({"hostIPC": True}), f"{P}.hostIPC: host namespaces are not allowed"),
        (
            pod({"volumes": [{"name": "v", "emptyDir": {}}, {"name": "h", "hostPath": {}}]}),
            f"{P}.volumes[1].hostPath: hostPath volumes are not allowed; use one of "
            + ", ".join(RESTRICTED_VOLUME_TYPES),
        ),
        (
            with_container_security(privileged=True),
            f"{C}.privileged: privileged is not allowed",
        ),
        (
            pod(
                {
                    "initContainers": [
                        {"name": "i", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}
                    ]
                }
            ),
            f"{P}.initContainers[0].securityContext.capabilities.add: "
            "added capabilities are not allowed (NET_ADMIN; only NET_BIND_SERVICE may be added)",
        ),
        (
            with_container_security(allowPrivilegeEscalation=True),
            f"{C}.allowPrivilegeEscalation: privilege escalation is not allowed",
        ),
        (
            pod({"containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 80}]}]}),
            f"{P}.containers[0].ports[0].hostPort: host ports are not allowed",
        ),
        (with_container_security(procMount="Unmasked"), f"{C}.procMount: must be Default"),
        (
            pod({"ephemeralContainers": [{"name": "e", "securityContext": {"privileged": True}}]}),
            f"{P}.ephemeralContainers[0].securityContext.privileged: privileged is not allowed",
        ),
    ],
    ids=[
        "hostNetwork",
        "hostPID",
        "hostIPC",
        "hostPath",
        "privileged",
        "capabilities",
        "escalation",
        "hostPort",
        "procMount",
        "ephemeral-privileged",
    ],
)
def test_baseline_fields_are_named(template: dict[str, Any], expected: str) -> None:
    """Each setting refused before (baseline) yields one line naming its field."""
    assert template_safety_problems(template) == [expected]


# Each of these passed the check before it followed the restricted profile in full.
RESTRICTED_CASES = {
    "container-uid-0": (
        with_container_security(runAsUser=0),
        f"{C}.runAsUser: 0 is root; trial pods must run as non-root",
    ),
    "pod-uid-0": (
        with_pod_security(runAsUser=0),
        f"{P}.securityContext.runAsUser: 0 is root; trial pods must run as non-root",
    ),
    "container-run-as-root-allowed": (
        with_container_security(runAsNonRoot=False),
        f"{C}.runAsNonRoot: false is not allowed; trial pods must run as non-root",
    ),
    "pod-run-as-root-allowed": (
        with_pod_security(runAsNonRoot=False),
        f"{P}.securityContext.runAsNonRoot: false is not allowed; trial pods must run as non-root",
    ),
    "pod-seccomp-unconfined": (
        with_pod_security(seccompProfile={"type": "Unconfined"}),
        f"{P}.securityContext.seccompProfile.type: Unconfined is not allowed; the seccomp "
        "profile must be RuntimeDefault or Localhost",
    ),
    "container-seccomp-unconfined": (
        with_container_security(seccompProfile={"type": "Unconfined"}),
        f"{C}.seccompProfile.type: Unconfined is not allowed; the seccomp profile must be "
        "RuntimeDefault or Localhost",
    ),
    "apparmor-field-unconfined": (
        with_container_security(appArmorProfile={"type": "Unconfined"}),
        f"{C}.appArmorProfile.type: Unconfined is not allowed; the AppArmor profile must be "
        "RuntimeDefault or Localhost",
    ),
    "pod-apparmor-field-unconfined": (
        with_pod_security(appArmorProfile={"type": "Unconfined"}),
        f"{P}.securityContext.appArmorProfile.type: Unconfined is not allowed; the AppArmor "
        "profile must be RuntimeDefault or Localhost",
    ),
    "apparmor-annotation-unconfined": (
        {
            **pod({}),
            "metadata": {
                "annotations": {
                    "container.apparmor.security.beta.kubernetes.io/agent": "unconfined"
                }
            },
        },
        f'{ANNOTATIONS}["container.apparmor.security.beta.kubernetes.io/agent"]: unconfined is '
        "not allowed; use runtime/default or localhost/<profile>",
    ),
    "seccomp-annotation-unconfined": (
        {
            **pod({}),
            "metadata": {"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}},
        },
        f'{ANNOTATIONS}["seccomp.security.alpha.kubernetes.io/pod"]: unconfined is not allowed; '
        "use runtime/default or localhost/<profile>",
    ),
    "selinux-type": (
        with_pod_security(seLinuxOptions={"type": "spc_t"}),
        f"{P}.securityContext.seLinuxOptions.type: spc_t is not allowed; use one of "
        "container_t, container_init_t, container_kvm_t, container_engine_t or leave it unset",
    ),
    "selinux-user": (
        with_container_security(seLinuxOptions={"user": "system_u"}),
        f"{C}.seLinuxOptions.user: custom SELinux users are not allowed",
    ),
    "selinux-role": (
        with_container_security(seLinuxOptions={"role": "sysadm_r"}),
        f"{C}.seLinuxOptions.role: custom SELinux roles are not allowed",
    ),
    "sysctls": (
        with_pod_security(sysctls=[{"name": "kernel.msgmax", "value": "65536"}]),
        f"{P}.securityContext.sysctls: sysctls are not allowed",
    ),
    "windows-host-process": (
        with_container_security(windowsOptions={"hostProcess": True}),
        f"{C}.windowsOptions.hostProcess: Windows host processes are not allowed",
    ),
    "pod-windows-host-process": (
        with_pod_security(windowsOptions={"hostProcess": True}),
        f"{P}.securityContext.windowsOptions.hostProcess: Windows host processes are not allowed",
    ),
    "probe-host": (
        pod({"containers": [{"name": "a", "livenessProbe": {"httpGet": {"host": "10.0.0.1"}}}]}),
        f"{P}.containers[0].livenessProbe.httpGet.host: probes and lifecycle hooks may not "
        "name a host (they would reach it from the node)",
    ),
    "lifecycle-host": (
        pod(
            {
                "containers": [
                    {"name": "a", "lifecycle": {"preStop": {"tcpSocket": {"host": "node"}}}}
                ]
            }
        ),
        f"{P}.containers[0].lifecycle.preStop.tcpSocket.host: probes and lifecycle hooks may "
        "not name a host (they would reach it from the node)",
    ),
}
REFUSED_VOLUMES = [
    "nfs",
    "iscsi",
    "rbd",
    "flexVolume",
    "gitRepo",
    "glusterfs",
    "cephfs",
    "cinder",
    "fc",
    "azureFile",
    "azureDisk",
    "awsElasticBlockStore",
    "gcePersistentDisk",
    "vsphereVolume",
    "portworxVolume",
    "photonPersistentDisk",
    "quobyte",
    "scaleIO",
    "storageos",
    "flocker",
    "image",
]


@pytest.mark.parametrize(
    ("template", "expected"), RESTRICTED_CASES.values(), ids=list(RESTRICTED_CASES)
)
def test_restricted_fields_are_named(template: dict[str, Any], expected: str) -> None:
    """Each setting beyond the restricted profile yields one line naming its field."""
    assert template_safety_problems(template) == [expected]


@pytest.mark.parametrize("kind", REFUSED_VOLUMES)
def test_only_restricted_volume_types(kind: str) -> None:
    """A volume of a type outside the restricted list is refused, naming the allowed ones."""
    template = pod({"volumes": [{"name": "v", kind: {"server": "x", "path": "/"}}]})
    assert template_safety_problems(template) == [
        f"{P}.volumes[0].{kind}: {kind} volumes are not allowed; use one of "
        + ", ".join(RESTRICTED_VOLUME_TYPES)
    ]


def test_every_problem_is_listed() -> None:
    """Several unsafe settings give several lines."""
    template = pod({"hostPID": True, "volumes": [{"name": "h", "hostPath": {"path": "/"}}]})
    assert len(template_safety_problems(template)) == 2


@pytest.mark.parametrize(
    "template",
    [
        pod({"securityContext": "root"}),
        pod({"securityContext": None, "volumes": "all", "tolerations": 3}),
        pod({"containers": ["x", {"name": "a", "securityContext": {"capabilities": "all"}}]}),
        with_container_security(capabilities={"add": "SYS_ADMIN"}),
        with_pod_security(seLinuxOptions="spc_t", windowsOptions=[]),
        {**pod({}), "metadata": {"annotations": ["x"]}},
    ],
)
def test_odd_types_never_crash_the_check(template: dict[str, Any]) -> None:
    """Fields of the wrong type are either refused or left to the API server (which refuses
    the pod), never a crash of the check."""
    problems = template_safety_problems(template)
    assert all(isinstance(line, str) for line in problems)


def test_capabilities_as_a_string_are_refused() -> None:
    """`add: SYS_ADMIN` (not a list) is refused rather than read letter by letter."""
    template = with_container_security(capabilities={"add": "SYS_ADMIN"})
    assert template_safety_problems(template) == [
        f"{C}.capabilities.add: must be a list of capabilities"
    ]
