"""The ConfigMaps behind `tasksFrom`, pinned when the eval starts.

An eval's ledger counts slots by task index, and the task list of a `tasksFrom` eval is
read from ConfigMaps that anyone with ConfigMap rights may change at any time. Read again
later (after an operator restart, or by `passhat report`), a changed ConfigMap would
silently give the same indexes other tasks: later slots would run tasks the eval did not
start with, and the report would name the wrong tasks. So the first pass that resolves the
tasks writes, per ConfigMap, what it read into `status.taskSources`: its uid,
resourceVersion and the sha256 of the data the eval uses. Later passes compare (a
metadata-only GET per ConfigMap; the data is read again only when the resourceVersion
moved) and stop the eval with a ConfigError (reason `TasksChanged`) naming the ConfigMap
when its uid or its data differ; `passhat report` compares the same digest before naming
the tasks. Pure functions, and `PinCheck`, the per-pass check that reads through `EvalApi`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from passhat.api.load import config_map_names
from passhat.api.spec import EvalSpec
from passhat.operator.kube import EvalApi

__all__ = ["PinCheck", "data_digest", "pin_problems", "pins_of"]


def _used_keys(spec: EvalSpec, name: str, data: Mapping[str, Any]) -> list[str]:
    """The keys of ConfigMap `name` the eval's tasks come from (all of them when an
    entry names no key)."""
    refs = [ref for ref in spec.tasks_from or [] if ref.config_map == name]
    if any(ref.key is None for ref in refs):
        return sorted(data)
    return sorted({ref.key for ref in refs if ref.key is not None and ref.key in data})


def data_digest(spec: EvalSpec, name: str, data: Mapping[str, Any]) -> str:
    """sha256 (hex) of the part of ConfigMap `name`'s data the eval reads its tasks from."""
    used = {key: data[key] for key in _used_keys(spec, name, data)}
    text = json.dumps(used, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def pins_of(spec: EvalSpec, config_maps: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`status.taskSources`: per ConfigMap `tasksFrom` reads (`config_maps`: name → the
    object as the API server returned it), its name, uid, resourceVersion and digest."""
    pins: list[dict[str, Any]] = []
    for name in config_map_names(spec):
        body = config_maps.get(name) or {}
        meta = body.get("metadata") or {}
        pins.append(
            {
                "configMap": name,
                "uid": str(meta.get("uid") or ""),
                "resourceVersion": str(meta.get("resourceVersion") or ""),
                "sha256": data_digest(spec, name, body.get("data") or {}),
            }
        )
    return pins


def pin_problems(
    spec: EvalSpec,
    pinned: Sequence[Mapping[str, Any]],
    config_maps: Mapping[str, Mapping[str, Any] | None],
    *,
    check_uid: bool = True,
) -> list[str]:
    """One line per pinned ConfigMap that is gone or differs now (`config_maps`: name →
    the object read now, None when it does not exist). `check_uid`: a ConfigMap deleted
    and created again counts as changed even with equal data (the operator); `passhat
    report` only needs the tasks to be the same."""
    problems: list[str] = []
    for pin in pinned:
        name = str(pin.get("configMap"))
        body = config_maps.get(name)
        at = f'ConfigMap "{name}"'
        if body is None:
            problems.append(f"{at} was deleted after the eval started")
            continue
        meta = body.get("metadata") or {}
        digest = data_digest(spec, name, body.get("data") or {})
        if check_uid and pin.get("uid") and meta.get("uid") != pin.get("uid"):
            problems.append(
                f"{at} was deleted and created again after the eval started "
                f"(uid {pin.get('uid')}, now {meta.get('uid')})"
            )
        elif digest != pin.get("sha256"):
            problems.append(
                f"{at} changed after the eval started (its tasks' data had sha256 "
                f"{str(pin.get('sha256'))[:12]} at resourceVersion "
                f"{pin.get('resourceVersion')}, now {digest[:12]} at "
                f"{meta.get('resourceVersion')})"
            )
    return problems


class PinCheck:
    """The per-pass check of an eval's pinned ConfigMaps: one metadata-only GET each; the
    data is read again (and its digest compared) only when the resourceVersion moved, and
    a resourceVersion whose data matched is remembered (a label change costs one read)."""

    def __init__(
        self, api: EvalApi, namespace: str, spec: EvalSpec, pins: Sequence[Mapping[str, Any]]
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.spec = spec
        self.pins = [dict(pin) for pin in pins]
        self._matching = {str(pin["configMap"]): {str(pin["resourceVersion"])} for pin in pins}

    def problems(self) -> list[str]:
        """One line per pinned ConfigMap that is gone or differs now."""
        found: list[str] = []
        for pin in self.pins:
            name = str(pin["configMap"])
            meta = self.api.get_config_map_meta(self.namespace, name)
            if (
                meta is not None
                and meta.get("uid") == pin["uid"]
                and str(meta.get("resourceVersion")) in self._matching[name]
            ):
                continue
            body = self.api.get_config_map(self.namespace, name) if meta is not None else None
            problems = pin_problems(self.spec, [pin], {name: body})
            if not problems and body is not None:
                self._matching[name].add(str((body.get("metadata") or {}).get("resourceVersion")))
            found.extend(problems)
        return found
