"""passhat.operator: runs ConsistencyEvals on Kubernetes, one pod per trial attempt.

The pieces, bottom up: `policy` (what a trial template may ask for: the cluster admin's
grants), `pods` (the pure pod builder), `status` (status from the ledger),
`kube` (raw-JSON API access), `loop` (one exactly-once reconcile pass of one eval),
`handlers` (the kopf wiring: a daemon per eval, pod events that wake it). Importing this
package does not register kopf handlers; `passhat operator` imports `handlers` itself.
The names below are imported on first use, so `passhat.operator.command` (mounted by
every `passhat` invocation) does not pay for kopf.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from passhat import lazy_exports

if TYPE_CHECKING:
    from passhat.operator.config import OperatorConfig
    from passhat.operator.loop import EvalLoop, PassResult, PassState
    from passhat.operator.pods import FINALIZER, EvalRef, PodKey, build_pod, pod_key, pod_name

__all__ = [
    "FINALIZER",
    "EvalLoop",
    "EvalRef",
    "OperatorConfig",
    "PassResult",
    "PassState",
    "PodKey",
    "build_pod",
    "pod_key",
    "pod_name",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "OperatorConfig": "config",
        "EvalLoop": "loop",
        "PassResult": "loop",
        "PassState": "loop",
        "FINALIZER": "pods",
        "EvalRef": "pods",
        "PodKey": "pods",
        "build_pod": "pods",
        "pod_key": "pods",
        "pod_name": "pods",
    },
)
