"""The requests floor: an attempt starts only when its cpu and memory requests fit.

On a cluster the scheduler guarantees `requests`; locally passhat does: the machine's
cores (`os.cpu_count()`) and the memory available when the run starts (`MemAvailable`)
are the capacity, and an attempt starts only when its requests fit beside those of the
attempts already running. As on Kubernetes, a resource with a limit but no request is
requested at its limit. A request that can never fit is a spec error, not a hang.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from passhat.api.errors import SpecError
from passhat.api.quantity import parse_cpu, parse_memory

__all__ = ["Capacity", "Resources", "container_resources", "mem_available"]


@dataclass(frozen=True)
class Resources:
    """Cores and bytes (requests or limits of one attempt); None where not given."""

    cpu: float | None = None
    memory: int | None = None


def container_resources(container: Mapping[str, Any]) -> tuple[Resources, Resources]:
    """(requests, limits) of a container; a missing request defaults to its limit."""
    resources = container.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}

    def read(entries: Mapping[str, Any]) -> Resources:
        cpu, memory = entries.get("cpu"), entries.get("memory")
        return Resources(
            cpu=parse_cpu(cpu) if cpu is not None else None,
            memory=parse_memory(memory) if memory is not None else None,
        )

    limit = read(limits)
    request = read(requests)
    request = Resources(
        cpu=request.cpu if request.cpu is not None else limit.cpu,
        memory=request.memory if request.memory is not None else limit.memory,
    )
    return request, limit


def mem_available(meminfo: str = "/proc/meminfo") -> int:
    """Bytes of memory available for new work now (MemAvailable)."""
    with open(meminfo) as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise OSError(f"no MemAvailable in {meminfo}")


def _gib(value: float) -> str:
    return f"{value / 2**30:.1f}Gi"


class Capacity:
    """What is free for new attempts: total capacity minus the running attempts' requests."""

    def __init__(self, *, cpu: float, memory: int) -> None:
        self.cpu = cpu
        self.memory = memory
        self._cpu_used = 0.0
        self._memory_used = 0

    @classmethod
    def of_machine(cls) -> Capacity:
        """This machine: all its cores and the memory available right now."""
        return cls(cpu=float(os.cpu_count() or 1), memory=mem_available())

    def check(self, request: Resources, *, source: str | None) -> None:
        """SpecError when `request` could not fit even on an idle machine."""
        field = "spec.trial.template.spec.containers[0].resources.requests"
        if request.cpu is not None and request.cpu > self.cpu:
            raise SpecError(
                f"a cpu request of {request.cpu:g} can never fit: this machine has "
                f"{self.cpu:g} cores",
                field=f"{field}.cpu",
                path=source,
            )
        if request.memory is not None and request.memory > self.memory:
            raise SpecError(
                f"a memory request of {_gib(request.memory)} can never fit: "
                f"{_gib(self.memory)} is available on this machine",
                field=f"{field}.memory",
                path=source,
            )

    def fits(self, request: Resources) -> bool:
        """Whether an attempt with `request` fits beside the running ones."""
        return (request.cpu or 0.0) + self._cpu_used <= self.cpu + 1e-9 and (
            request.memory or 0
        ) + self._memory_used <= self.memory

    def take(self, request: Resources) -> None:
        """Reserve `request` for a starting attempt."""
        self._cpu_used += request.cpu or 0.0
        self._memory_used += request.memory or 0

    def give(self, request: Resources) -> None:
        """Return the reservation of a finished attempt."""
        self._cpu_used = max(0.0, self._cpu_used - (request.cpu or 0.0))
        self._memory_used = max(0, self._memory_used - (request.memory or 0))
