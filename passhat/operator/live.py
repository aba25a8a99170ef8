"""Read a ConsistencyEval back from the cluster for `passhat report NAME`.

The eval's status keeps only capped lists, but its packed ledger holds every slot; so the
full report (every flaky task, every need-more-trials task) is rebuilt here from the
ledger and the spec's task ids, and rendered by the same code as `passhat score`. The
numbers therefore match the status the operator wrote and a `passhat score` of the same
trial rows exactly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from passhat.api.errors import InputError, SpecError, UsageError
from passhat.api.load import parse_spec, resolve_tasks
from passhat.api.spec import EvalSpec
from passhat.operator.kube import ApiError, Kube, load_client_config
from passhat.operator.taskpin import pin_problems
from passhat.stats import TaskTally
from passhat.trials.ledger import LedgerError, SlotLedger

__all__ = [
    "EvalNotFound",
    "LiveEval",
    "client_config",
    "current_namespace",
    "read_config_maps",
    "read_live_eval",
    "tallies_of",
]

_SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


class EvalNotFound(InputError):
    """No ConsistencyEval of that name in the namespace (its records may still be archived)."""


@dataclass(frozen=True)
class LiveEval:
    """One eval as the cluster has it: spec, task ids, per-task tallies and raw status."""

    namespace: str
    name: str
    spec: EvalSpec
    task_ids: list[str]
    tallies: list[TaskTally]
    status: Mapping[str, Any]
    # metadata.generation: the status's conditions count only when computed for it
    generation: int | None = None
    # task id -> its trial slots' marks in trial order (passhat.trials.strips)
    strips: Mapping[str, str] = field(default_factory=dict)


def current_namespace(kubeconfig: str | None = None) -> str:
    """The namespace of the current kubeconfig context (in a pod: its own; else default)."""
    from kubernetes import config

    list_contexts: Any = config.list_kube_config_contexts
    try:
        _, active = list_contexts(config_file=kubeconfig)
    except (config.ConfigException, OSError):
        active = None
    if active:
        namespace = (active.get("context") or {}).get("namespace")
        return str(namespace) if namespace else "default"
    if os.path.exists(_SA_NAMESPACE):
        with open(_SA_NAMESPACE) as handle:
            return handle.read().strip() or "default"
    return "default"


def client_config(kubeconfig: str | None = None) -> Any:
    """The API client configuration (kubeconfig, else in-cluster); UsageError if neither."""
    from kubernetes import config

    try:
        return load_client_config(kubeconfig)
    except (config.ConfigException, OSError, ValueError, TypeError) as err:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise UsageError(
            f"{where}: no usable kubeconfig, and not running in a pod ({err})"
        ) from None


def _client(kubeconfig: str | None) -> Kube:
    return Kube(client_config(kubeconfig))


def tallies_of(
    obj: Mapping[str, Any], config_maps: Mapping[str, Mapping[str, str]]
) -> tuple[EvalSpec, list[str], list[TaskTally]]:
    """(spec, task ids, tallies) of an eval object; SpecError/InputError when unreadable."""
    meta = obj.get("metadata") or {}
    where = f"consistencyeval/{meta.get('name')} in namespace {meta.get('namespace')}"
    try:
        spec = parse_spec(obj.get("spec"))
    except SpecError as err:
        raise SpecError(err.reason, field=err.field, path=where) from None
    status = obj.get("status") or {}
    # NB: the ledger counts the tasks the eval started with (status.taskSources): a
    # ConfigMap changed since then would name other tasks, so it is refused, never used
    pinned = status.get("taskSources") or []
    changed = pin_problems(
        spec,
        pinned,
        {name: {"data": data} for name, data in config_maps.items()},
        check_uid=False,
    )
    if changed:
        name = meta.get("name")
        raise InputError(
            f"spec.tasksFrom: {'; '.join(changed)}: the report cannot say which tasks the "
            "ledger counted; restore the ConfigMap's data, or score the eval's archived "
            f"attempts, which carry their task ids: passhat trials {name} --out "
            "trials.jsonl && passhat score trials.jsonl",
            path=where,
        )
    task_ids = [task.id for task in resolve_tasks(spec, config_maps, source=where)]
    packed = status.get("ledger")
    if not packed:
        ledger = SlotLedger(len(task_ids), spec.trials)
    else:
        try:
            ledger = SlotLedger.unpack(str(packed))
        except LedgerError as err:
            raise InputError(f"status.ledger: {err}", path=where) from None
    if (ledger.n_tasks, ledger.trials) != (len(task_ids), spec.trials):
        raise InputError(
            f"status.ledger has {ledger.n_tasks} tasks x {ledger.trials} trials but the spec "
            f"now gives {len(task_ids)} x {spec.trials} (was a tasks ConfigMap changed?)",
            path=where,
        )
    return spec, task_ids, ledger.tallies(task_ids)


def read_config_maps(
    kube: Kube, namespace: str, objs: Sequence[Mapping[str, Any]]
) -> dict[str, dict[str, str]]:
    """The data of every ConfigMap the evals' `tasksFrom` name, each read once (ApiError
    when the API server fails; a missing one is left out, for `tallies_of` to name)."""
    config_maps: dict[str, dict[str, str]] = {}
    for obj in objs:
        for ref in (obj.get("spec") or {}).get("tasksFrom") or []:
            cm_name = ref.get("configMap") if isinstance(ref, Mapping) else None
            if isinstance(cm_name, str) and cm_name not in config_maps:
                cm = kube.get_config_map(namespace, cm_name)
                if cm is not None:
                    config_maps[cm_name] = dict(cm.get("data") or {})
    return config_maps


def read_live_eval(name: str, namespace: str, *, kubeconfig: str | None = None) -> LiveEval:
    """GET the eval (and its tasks' ConfigMaps) and rebuild its per-task tallies."""
    kube = _client(kubeconfig)
    try:
        obj = kube.get_eval(namespace, name)
        if obj is None:
            raise EvalNotFound(f'consistencyeval "{name}" not found in namespace "{namespace}"')
        config_maps = read_config_maps(kube, namespace, [obj])
    except ApiError as err:
        raise UsageError(f"cannot read consistencyeval {namespace}/{name}: {err}") from None
    finally:
        kube.close()
    spec, task_ids, tallies = tallies_of(obj, config_maps)
    generation = (obj.get("metadata") or {}).get("generation")
    status = obj.get("status") or {}
    # NB: tallies_of checked the ledger unpacks and fits the tasks
    packed = status.get("ledger")
    strips = SlotLedger.unpack(str(packed)).strips(task_ids) if packed else {}
    return LiveEval(
        namespace,
        name,
        spec,
        task_ids,
        tallies,
        status,
        generation=generation if isinstance(generation, int) else None,
        strips=strips,
    )
