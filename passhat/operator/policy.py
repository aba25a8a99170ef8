"""What a trial pod may ask for on this cluster: the cluster admin's grants to eval authors.

An eval author is a tenant the operator does not trust (docs/security.md). Their template
is held to the Pod Security `restricted` profile (`passhat.api.podsecurity`) unless the
cluster admin granted the eval's namespace privileged trials, and to the scheduling grants
below: `nodeName` is never allowed (it bypasses the scheduler, and with it node taints and
the scheduler's admission checks), a toleration of every taint only when the admin allows
it, and priority and runtime classes only from the admin's lists. Kueue's
WorkloadPriorityClass (the pod label `kueue.x-k8s.io/priority-class`) decides preemption in
a queue as a PriorityClass does on nodes, so it is held to the same list. Each grant is a chart
value and a `passhat operator` flag; each refusal names the chart value that would allow it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from passhat.api.podsecurity import BASE, template_safety_problems

__all__ = ["WORKLOAD_PRIORITY_LABEL", "TrialPolicy"]

_SPEC = f"{BASE}.spec"
# The pod label naming a Kueue WorkloadPriorityClass (kueue.x-k8s.io/priority-class).
WORKLOAD_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


@dataclass(frozen=True)
class TrialPolicy:
    """The cluster admin's grants (chart values under `operator.`); none by default."""

    # Namespaces whose trial templates may go beyond the restricted profile.
    privileged_namespaces: frozenset[str] = frozenset()
    # PriorityClasses a template may name (`priorityClassName`), and Kueue
    # WorkloadPriorityClasses (its `kueue.x-k8s.io/priority-class` label).
    priority_classes: frozenset[str] = frozenset()
    # RuntimeClasses a template may name (`runtimeClassName`).
    runtime_classes: frozenset[str] = frozenset()
    # Whether a toleration of every taint (`operator: Exists` without a key) is allowed.
    tolerate_all: bool = False

    def problems(self, template: Mapping[str, Any], *, namespace: str) -> list[str]:
        """Why this template may not run in `namespace` (empty when it may), one line per
        field; the line says which chart value would allow it."""
        problems: list[str] = []
        if namespace not in self.privileged_namespaces:
            unsafe = template_safety_problems(template)
            if unsafe:
                unsafe[-1] += (
                    f' (trial pods must meet Pod Security "restricted"; only the cluster admin '
                    f"can grant namespace {namespace} more: chart value "
                    "operator.privilegedNamespaces)"
                )
            problems += unsafe
        spec = template.get("spec")
        if isinstance(spec, Mapping):
            problems += self._scheduling_problems(spec)
        meta = template.get("metadata")
        labels = meta.get("labels") if isinstance(meta, Mapping) else None
        if isinstance(labels, Mapping):
            problems += _listed(
                labels.get(WORKLOAD_PRIORITY_LABEL),
                self.priority_classes,
                field=f'metadata.labels["{WORKLOAD_PRIORITY_LABEL}"]',
                what="workload priority class",
                value="operator.allowedPriorityClasses",
                flag="--allow-priority-class",
                base=BASE,
            )
        return problems

    def _scheduling_problems(self, spec: Mapping[str, Any]) -> Iterator[str]:
        if spec.get("nodeName") not in (None, ""):
            yield (
                f"{_SPEC}.nodeName: not allowed: it bypasses the scheduler and node taints; "
                "use nodeSelector or affinity"
            )
        tolerations = spec.get("tolerations")
        if isinstance(tolerations, list) and not self.tolerate_all:
            for index, toleration in enumerate(tolerations):
                if (
                    isinstance(toleration, Mapping)
                    and toleration.get("operator") == "Exists"
                    and not toleration.get("key")
                ):
                    yield (
                        f"{_SPEC}.tolerations[{index}]: operator Exists without a key "
                        "tolerates every taint; allowed only with the chart value "
                        "operator.allowTolerateAll (passhat operator --allow-tolerate-all)"
                    )
        yield from _listed(
            spec.get("priorityClassName"),
            self.priority_classes,
            field="priorityClassName",
            what="priority class",
            value="operator.allowedPriorityClasses",
            flag="--allow-priority-class",
        )
        yield from _listed(
            spec.get("runtimeClassName"),
            self.runtime_classes,
            field="runtimeClassName",
            what="runtime class",
            value="operator.allowedRuntimeClasses",
            flag="--allow-runtime-class",
        )


def _listed(
    name: Any,
    allowed: frozenset[str],
    *,
    field: str,
    what: str,
    value: str,
    flag: str,
    base: str = _SPEC,
) -> Iterator[str]:
    if name in (None, "") or (isinstance(name, str) and name in allowed):
        return
    listed = ", ".join(sorted(allowed)) or "none"
    yield (
        f"{base}.{field}: {name} is not an allowed {what} (allowed: {listed}); the cluster "
        f"admin lists them in the chart value {value} (passhat operator {flag} NAME)"
    )
