"""What a trial's container used, read by `passhat trial` from its own cgroup at exit.

On a cluster the operator sees a pod's outcome but not what it used: the kubelet's summary
API reports running containers only, and their working set, not the peak, so a finished
attempt's use is gone by the time it is recorded. The container's cgroup knows both until
the container ends, so the wrapper reads it after the agent and the grader have finished
and puts it in the result JSON (`resources`), which the termination message carries.

cgroup v2: `memory.peak` (Linux 5.19+) and `cpu.stat` usage_usec; v1:
`memory.max_usage_in_bytes` and `cpuacct.usage`. The figures cover the whole container:
the agent, the grader and this wrapper (about 22 MiB of Python). Without a readable cgroup,
the CPU seconds of the agent and grader processes (rusage of the waited-for children)
are all that is reported. Outside a pod (`passhat run` measures its attempts itself) the
wrapper reports nothing.
"""

from __future__ import annotations

import os
import resource

from passhat.trials.usage import Resources

__all__ = ["container_resources", "in_pod"]

_ROOT = "/sys/fs/cgroup"


def in_pod(environ: os._Environ[str] | dict[str, str] = os.environ) -> bool:
    """Whether this process runs in a Kubernetes pod (the kubelet sets this in every one)."""
    return bool(environ.get("KUBERNETES_SERVICE_HOST"))


def _read(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return None


def _own_dir(root: str, controller: str, proc_cgroup: str) -> str | None:
    """This process's cgroup directory of `controller` ("" for v2) under `root`.

    With a cgroup namespace (the default on cgroup v2) the path is `/`: the mount is the
    container's cgroup. Without one the mount still is (the runtime mounts the container's
    cgroup there), but the path names it from the host's root, and does not exist below it.
    """
    text = _read(proc_cgroup) or ""
    for line in text.splitlines():
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        names = controllers.split(",") if controllers else [""]
        if controller not in names:
            continue
        base = os.path.join(root, controller) if controller else root
        inside = os.path.normpath(os.path.join(base, path.lstrip("/")))
        return inside if os.path.isdir(inside) else base
    return None


def _int(text: str | None) -> int | None:
    try:
        return int((text or "").split()[0])
    except (ValueError, IndexError):
        return None


def _v2(directory: str) -> tuple[int | None, float | None]:
    peak = _int(_read(os.path.join(directory, "memory.peak")))
    cpu = None
    for line in (_read(os.path.join(directory, "cpu.stat")) or "").splitlines():
        name, _, value = line.partition(" ")
        if name == "usage_usec" and value.strip().isdigit():
            cpu = int(value) / 1e6
    return peak, cpu


def _v1(root: str, proc_cgroup: str) -> tuple[int | None, float | None]:
    memory = _own_dir(root, "memory", proc_cgroup)
    cpuacct = _own_dir(root, "cpuacct", proc_cgroup)
    peak = _int(_read(os.path.join(memory, "memory.max_usage_in_bytes"))) if memory else None
    usage = _int(_read(os.path.join(cpuacct, "cpuacct.usage"))) if cpuacct else None
    return peak, usage / 1e9 if usage is not None else None


def container_resources(
    root: str = _ROOT, *, proc_cgroup: str = "/proc/self/cgroup"
) -> Resources | None:
    """The container's peak memory and CPU seconds so far (cgroup), else the CPU seconds
    of the children this process waited for (rusage); None when neither is known."""
    unified = _own_dir(root, "", proc_cgroup)
    if unified is not None and os.path.exists(os.path.join(unified, "cgroup.controllers")):
        peak, cpu = _v2(unified)
    else:
        peak, cpu = _v1(root, proc_cgroup)
    if peak is not None or cpu is not None:
        return Resources(peak_memory_bytes=peak, cpu_seconds=cpu, source="cgroup")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return Resources(cpu_seconds=usage.ru_utime + usage.ru_stime, source="rusage")
