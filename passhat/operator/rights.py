"""Keep the operator's rights in a served namespace until it has let go of everything there.

In namespaced mode the operator's rights in a namespace are a RoleBinding *in that
namespace*. Deleting the namespace deletes it too, in parallel with the evals; an eval
still running there holds kopf's finalizer until the operator's delete handler has released
its pods, which it then no longer may: the namespace hung in Terminating (seen on the test
cluster). So the chart puts `passhat.dev/operator-rights` on the RoleBinding (the API
server still authorizes by a binding that is being deleted), and binds a ClusterRole
rather than a Role (a Role in the namespace would go with it; one object must carry the
last finalizer, and removing it must be the operator's last act there). The leader removes
it (`settle_rights`, from its renew loop) once the binding is being deleted and no eval of
the namespace holds kopf's finalizer and no pod of the operator's holds ours; the drain
removes it too (helm uninstall then deletes the bindings). Cluster-wide mode needs none of
this: its ClusterRoleBinding is not in any namespace.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from passhat.operator.ownership import PodSigner
from passhat.operator.pods import EVAL_FINALIZER, FINALIZER

__all__ = ["RIGHTS_FINALIZER", "RightsApi", "let_go_of_rights", "settle_rights"]

logger = logging.getLogger(__name__)

# On the operator's Role and RoleBinding in each served namespace (the chart's).
RIGHTS_FINALIZER = "passhat.dev/operator-rights"


class RightsApi(Protocol):
    """What `settle_rights` calls (`kube.Kube`): `resource` is always rolebindings."""

    def get_rbac(self, namespace: str, resource: str, name: str) -> dict[str, Any] | None: ...

    def remove_rbac_finalizer(
        self, namespace: str, resource: str, body: Mapping[str, Any], finalizer: str
    ) -> bool: ...

    def list_evals(self, namespace: str | None) -> list[dict[str, Any]]: ...

    def list_held_pods(self, namespace: str | None) -> list[dict[str, Any]]: ...


def settle_rights(api: RightsApi, namespace: str, name: str, *, pod_key: bytes) -> bool:
    """If the RoleBinding `name` in `namespace` is being deleted and nothing of the
    operator's is left there, let go of it; True when it did."""
    binding = api.get_rbac(namespace, "rolebindings", name)
    meta = (binding or {}).get("metadata") or {}
    if not meta.get("deletionTimestamp") or RIGHTS_FINALIZER not in (meta.get("finalizers") or []):
        return False
    evals = [
        body
        for body in api.list_evals(namespace)
        if EVAL_FINALIZER in ((body.get("metadata") or {}).get("finalizers") or [])
    ]
    signer = PodSigner(pod_key)
    held = [
        pod
        for pod in api.list_held_pods(namespace)
        if signer.owner_uid(pod) is not None
        and FINALIZER in ((pod.get("metadata") or {}).get("finalizers") or [])
    ]
    if evals or held:
        return False
    logger.info("namespace %s is being deleted and holds nothing of ours: letting go", namespace)
    return api.remove_rbac_finalizer(namespace, "rolebindings", binding or {}, RIGHTS_FINALIZER)


def let_go_of_rights(api: RightsApi, namespace: str, name: str) -> bool:
    """Remove the finalizer from the RoleBinding `name` (the drain, before uninstall)."""
    binding = api.get_rbac(namespace, "rolebindings", name)
    return binding is not None and api.remove_rbac_finalizer(
        namespace, "rolebindings", binding, RIGHTS_FINALIZER
    )
