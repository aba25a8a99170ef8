"""The Pod Security "restricted" profile, checked on a trial's pod template.

Whoever may create a ConsistencyEval gets pods run by the operator, so the operator, not
the namespace's own Pod Security labels, decides what a trial pod may be: every control of
the Pod Security Standards' `baseline` and `restricted` profiles (Kubernetes v1.34), field
by field, plus no sysctls at all (the profile allows a few namespaced ones; no trial needs
them). `template_safety_problems` lists what a template asks for beyond that profile; the
operator refuses such a template with a ConfigError (unless the cluster admin granted the
eval's namespace privileged trials) and fills in the profile's settings where the template
is silent (`passhat.operator.pods`). Locally the same list is only a warning.

The check is semantic: a field of the wrong JSON type (`hostNetwork: "true"`) is left to
the API server, which refuses the pod (400) and so stops the eval with a ConfigError too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "ADDABLE_CAPABILITIES",
    "RESTRICTED_VOLUME_TYPES",
    "SELINUX_TYPES",
    "template_safety_problems",
]

BASE = "spec.trial.template"
# The volume types of the restricted profile ("Volume Types"); anything else is refused.
RESTRICTED_VOLUME_TYPES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
# The only capability a restricted container may add.
ADDABLE_CAPABILITIES = ("NET_BIND_SERVICE",)
# SELinux types a container may ask for (baseline, v1.31+); user and role must stay unset.
SELINUX_TYPES = ("container_t", "container_init_t", "container_kvm_t", "container_engine_t")
_PROFILE_TYPES = ("RuntimeDefault", "Localhost")
_HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
_CONTAINER_KINDS = ("initContainers", "containers", "ephemeralContainers")
_HANDLERS = ("livenessProbe", "readinessProbe", "startupProbe")
_HOOKS = ("postStart", "preStop")
_APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
_SECCOMP_ANNOTATIONS = (
    "seccomp.security.alpha.kubernetes.io/pod",
    "container.seccomp.security.alpha.kubernetes.io/",
)


def template_safety_problems(template: Mapping[str, Any]) -> list[str]:
    """Every field of a pod template beyond the Pod Security `restricted` profile, one line
    each naming the field, e.g. `spec.trial.template.spec.containers[0].securityContext.
    runAsUser: 0 is root; trial pods must run as non-root` (empty when the template is
    within it). Unset fields are fine: the operator fills in the profile's values."""
    problems = list(_annotation_problems(template.get("metadata")))
    spec = template.get("spec")
    if not isinstance(spec, Mapping):
        return problems
    base = f"{BASE}.spec"
    for key in _HOST_NAMESPACES:
        if spec.get(key) is True:
            problems.append(f"{base}.{key}: host namespaces are not allowed")
    problems += _security_problems(spec.get("securityContext"), f"{base}.securityContext")
    problems += _volume_problems(spec.get("volumes"), f"{base}.volumes")
    for kind in _CONTAINER_KINDS:
        for index, container in _objects(spec.get(kind)):
            problems += _container_problems(container, f"{base}.{kind}[{index}]")
    return problems


def _container_problems(container: Mapping[str, Any], at: str) -> Iterator[str]:
    security = container.get("securityContext")
    where = f"{at}.securityContext"
    if isinstance(security, Mapping):
        if security.get("privileged") is True:
            yield f"{where}.privileged: privileged is not allowed"
        if security.get("allowPrivilegeEscalation") is True:
            yield f"{where}.allowPrivilegeEscalation: privilege escalation is not allowed"
        yield from _capability_problems(security.get("capabilities"), f"{where}.capabilities")
        if security.get("procMount") not in (None, "Default"):
            yield f"{where}.procMount: must be Default"
    yield from _security_problems(security, where)
    for index, port in _objects(container.get("ports")):
        if port.get("hostPort"):
            yield f"{at}.ports[{index}].hostPort: host ports are not allowed"
    handlers = [(name, container.get(name)) for name in _HANDLERS]
    lifecycle = container.get("lifecycle")
    if isinstance(lifecycle, Mapping):
        handlers += [(f"lifecycle.{hook}", lifecycle.get(hook)) for hook in _HOOKS]
    for name, handler in handlers:
        if not isinstance(handler, Mapping):
            continue
        for action in ("httpGet", "tcpSocket"):
            target = handler.get(action)
            if isinstance(target, Mapping) and target.get("host") not in (None, ""):
                yield (
                    f"{at}.{name}.{action}.host: probes and lifecycle hooks may not name a "
                    "host (they would reach it from the node)"
                )


def _capability_problems(capabilities: Any, at: str) -> Iterator[str]:
    if not isinstance(capabilities, Mapping) or capabilities.get("add") in (None, []):
        return
    added = capabilities.get("add")
    if not isinstance(added, list):
        yield f"{at}.add: must be a list of capabilities"
        return
    extra = [str(name) for name in added if name not in ADDABLE_CAPABILITIES]
    if extra:
        yield (
            f"{at}.add: added capabilities are not allowed ({', '.join(extra)}; only "
            f"{', '.join(ADDABLE_CAPABILITIES)} may be added)"
        )


def _security_problems(security: Any, at: str) -> Iterator[str]:
    """The controls a pod-level and a container-level securityContext share."""
    if not isinstance(security, Mapping):
        return
    if security.get("runAsNonRoot") is False:
        yield f"{at}.runAsNonRoot: false is not allowed; trial pods must run as non-root"
    user = security.get("runAsUser")
    if user == 0 and not isinstance(user, bool):
        yield f"{at}.runAsUser: 0 is root; trial pods must run as non-root"
    for field, name in (("seccompProfile", "seccomp"), ("appArmorProfile", "AppArmor")):
        profile = security.get(field)
        if isinstance(profile, Mapping) and profile.get("type") not in (None, *_PROFILE_TYPES):
            yield (
                f"{at}.{field}.type: {profile.get('type')} is not allowed; the {name} "
                "profile must be RuntimeDefault or Localhost"
            )
    selinux = security.get("seLinuxOptions")
    if isinstance(selinux, Mapping):
        if selinux.get("type") not in (None, "", *SELINUX_TYPES):
            yield (
                f"{at}.seLinuxOptions.type: {selinux.get('type')} is not allowed; use one of "
                f"{', '.join(SELINUX_TYPES)} or leave it unset"
            )
        for key in ("user", "role"):
            if selinux.get(key) not in (None, ""):
                yield f"{at}.seLinuxOptions.{key}: custom SELinux {key}s are not allowed"
    if security.get("sysctls") not in (None, []):
        yield f"{at}.sysctls: sysctls are not allowed"
    windows = security.get("windowsOptions")
    if isinstance(windows, Mapping) and windows.get("hostProcess") is True:
        yield f"{at}.windowsOptions.hostProcess: Windows host processes are not allowed"


def _volume_problems(volumes: Any, at: str) -> Iterator[str]:
    for index, volume in _objects(volumes):
        for key in volume:
            if key != "name" and key not in RESTRICTED_VOLUME_TYPES:
                yield (
                    f"{at}[{index}].{key}: {key} volumes are not allowed; use one of "
                    f"{', '.join(RESTRICTED_VOLUME_TYPES)}"
                )


def _annotation_problems(metadata: Any) -> Iterator[str]:
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping):
        return
    for key, value in annotations.items():
        where = f'{BASE}.metadata.annotations["{key}"]'
        if str(key).startswith(_APPARMOR_ANNOTATION) and not (
            value == "runtime/default" or str(value).startswith("localhost/")
        ):
            yield f"{where}: {value} is not allowed; use runtime/default or localhost/<profile>"
        if str(key).startswith(_SECCOMP_ANNOTATIONS) and not (
            value in ("runtime/default", "docker/default") or str(value).startswith("localhost/")
        ):
            yield f"{where}: {value} is not allowed; use runtime/default or localhost/<profile>"


def _objects(value: Any) -> Iterator[tuple[int, Mapping[str, Any]]]:
    if isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, Mapping):
                yield index, item
