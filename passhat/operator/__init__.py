"""passhat.operator: runs ConsistencyEvals on Kubernetes, one pod per trial attempt.

The pieces, bottom up: `pods` (the pure pod builder), `status` (status from the ledger),
`kube` (raw-JSON API access), `loop` (one exactly-once reconcile pass of one eval),
`handlers` (the kopf wiring: a daemon per eval, pod events that wake it). Importing this
package does not register kopf handlers; `passhat operator` imports `handlers` itself.
The names below are imported on first use, so `passhat.operator.command` (mounted by
every `passhat` invocation) does not pay for kopf.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

_HOME = {
    "OperatorConfig": "passhat.operator.config",
    "EvalLoop": "passhat.operator.loop",
    "PassResult": "passhat.operator.loop",
    "PassState": "passhat.operator.loop",
    "FINALIZER": "passhat.operator.pods",
    "EvalRef": "passhat.operator.pods",
    "PodKey": "passhat.operator.pods",
    "build_pod": "passhat.operator.pods",
    "pod_key": "passhat.operator.pods",
    "pod_name": "passhat.operator.pods",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
