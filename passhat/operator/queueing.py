"""Trial pods in a Kueue queue: which ones wait for admission, and how far ahead to create.

On a shared cluster Kueue rations batch work: a ClusterQueue holds the quota, a LocalQueue
per team points at it, and a pod labelled `kueue.x-k8s.io/queue-name` (`spec.queueName`,
or the template's own label) joins Kueue's plain-pod integration as a Workload of its own.
Kueue's webhook gives the pod the scheduling gate `kueue.x-k8s.io/admission` when it is
created and removes it once the queue's quota admits the pod
(https://kueue.sigs.k8s.io/docs/tasks/run/plain_pods/). Until then the pod exists but no
scheduler, kubelet or clock touches it, so the operator counts it as *waiting*, not
running: `progress.waiting`, apart from `progress.running`; `timeoutSeconds` (the pod's
`activeDeadlineSeconds`, counted by the kubelet from the pod's start) has not begun; it is
neither unschedulable (the scheduler reports `SchedulingGated`, not `Unschedulable`) nor
an infra error. Any scheduling gate counts, Kueue's or another admission controller's:
a gated pod cannot run whoever holds the gate.

How many run is decided by both sides: the eval's `parallelism` bounds its live pods
(waiting or running), Kueue's quota bounds the running ones. So that an eval never floods
a queue with pods it cannot admit, a queued eval creates ahead of admission only as far as
`ahead_capacity` allows: at most max(1, running) of its pods wait at once. A queue with room
fills by doubling (each admitted pod lets one more wait), a full queue holds one waiting
pod of the eval, and a pod that ends is replaced at once by one already waiting.

A trial that Kueue preempts is stopped by Kueue with the pod condition `TerminationTarget`
(reason `WorkloadEvictedDueToPreempted`) and deleted; the classifier
(`passhat.trials.classify_pod`) makes that an infra error `preempted`, which is retried.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from passhat.api.spec import EvalSpec
from passhat.operator.pods import QUEUE_NAME_LABEL

__all__ = ["KUEUE_ADMISSION_GATE", "ahead_capacity", "queue_of", "waiting_for_admission"]

# The scheduling gate Kueue's pod webhook adds and its admission removes.
KUEUE_ADMISSION_GATE = "kueue.x-k8s.io/admission"


def queue_of(spec: EvalSpec) -> str | None:
    """The Kueue LocalQueue the eval's trial pods join (`spec.queueName`, else the
    template's `kueue.x-k8s.io/queue-name` label), or None."""
    if spec.queue_name:
        return spec.queue_name
    meta = spec.trial.template.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    name = labels.get(QUEUE_NAME_LABEL) if isinstance(labels, Mapping) else None
    return str(name) if name else None


def waiting_for_admission(pod: Mapping[str, Any]) -> bool:
    """Whether the pod still carries a scheduling gate (Kueue's until it is admitted)."""
    spec = pod.get("spec")
    gates = spec.get("schedulingGates") if isinstance(spec, Mapping) else None
    return isinstance(gates, list) and len(gates) > 0


def ahead_capacity(*, running: int, waiting: int) -> int:
    """How many more pods a queued eval may create now: at most max(1, running) of its
    pods wait for admission at once (each new pod is assumed to wait)."""
    return max(0, max(1, running) - waiting)
