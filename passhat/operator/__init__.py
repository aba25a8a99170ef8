"""passhat.operator: runs ConsistencyEvals on Kubernetes, one pod per trial attempt.

The pieces, bottom up: `pods` (the pure pod builder), `status` (status from the ledger),
`kube` (raw-JSON API access), `loop` (one exactly-once reconcile pass of one eval),
`handlers` (the kopf wiring: a daemon per eval, pod events that wake it). Importing this
package does not register kopf handlers; `passhat operator` imports `handlers` itself.
"""

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
