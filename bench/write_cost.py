#!/usr/bin/env python3
"""What one pod write costs the cluster, by the shape of the write.

`bench/throughput.py` charges the operator's side more API-server CPU per trial than the
Job's for the same requests (a create, a finalizer patch, kwok's two status patches per
pod). This isolates the writes: it makes `--pods` finished-looking pods (created behind a
scheduling gate, so that neither the scheduler nor kwok touches them, then given a
Succeeded status as kwok gives it) and sends each variant of a write to every one of them
from the same client, measuring the CPU of the API server and of etcd, the scheduler, kwok
and the controller-manager (which all watch pods) over each batch, net of their idle rate.

Variants (the operator's own bodies: `passhat.operator.pods.build_pod`, `Kube._keep_pod`):
- `create/job`: the benchmark's pod template, as the Job controller creates it (the labels
  and annotation a Job sets, a finalizer in place of its tracking one: see JOB_FINALIZER);
  `create/operator`: the pod the operator builds of it;
- `patch/job`: the Job controller's finalizer patch (`$deleteFromPrimitiveList` only);
- `patch/operator`: the operator's (the same, plus the pod's uid and the recorded label);
- `patch/uid`: the operator's without the label; `patch/label`: the label alone.

Rounds alternate the order of the variants; the JSON line gives microseconds of CPU per
write for each (median over rounds).

    hack/cluster/up.sh && python bench/write_cost.py [--pods 1000] [--rounds 3] [--threads 8]
    python bench/write_cost.py --smoke   # what CI runs
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from throughput import (  # noqa: E402
    BenchError,
    ClusterProcess,
    Kube,
    machine_info,
    operator_pod_template,
    pod_template,
)

from passhat.operator.pods import FINALIZER, LABEL_RECORDED  # noqa: E402

# NB: not the Job's own finalizer (batch.kubernetes.io/job-tracking): the Job controller
# takes that one out of every pod without a Job at once (its orphan-pod cleanup), and the
# "job" patch then changed nothing (a no-op the API server does not write: measured so).
JOB_FINALIZER = "passhat.dev/write-cost-job-tracking"
GATE = "passhat.dev/write-cost"
T = TypeVar("T")
# The processes that watch pods, besides the API server itself.
WATCHERS = ("etcd", "kube-scheduler", "kwok", "kube-controller-manager")


def log(message: str) -> None:
    print(f"[write-cost {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def job_pod(ns: str, name: str, index: int) -> dict[str, Any]:
    """The benchmark's template as an Indexed Job's controller makes a pod of it."""
    template = pod_template(5.0)
    uid = "00000000-0000-0000-0000-000000000001"
    meta = {
        "name": name,
        "namespace": ns,
        "labels": {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": "bench",
            "controller-uid": uid,
            "job-name": "bench",
            "batch.kubernetes.io/job-completion-index": str(index),
        },
        "annotations": {
            **template["metadata"]["annotations"],
            "batch.kubernetes.io/job-completion-index": str(index),
        },
        "finalizers": [JOB_FINALIZER],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}


def operator_pod(ns: str, name: str, index: int) -> dict[str, Any]:
    """The pod the operator builds of the same template (labels, finalizer, its spec)."""
    template = operator_pod_template(5.0)
    meta = {
        "name": name,
        "namespace": ns,
        "labels": {
            "passhat.dev/eval": "bench",
            "passhat.dev/eval-uid": "00000000-0000-0000-0000-000000000002",
            "passhat.dev/task": str(index // 10),
            "passhat.dev/trial": str(index % 10),
            "passhat.dev/attempt": "0",
        },
        "annotations": template["metadata"]["annotations"],
        "finalizers": [FINALIZER],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}


def gated(pod: dict[str, Any]) -> dict[str, Any]:
    pod["spec"] = {**pod["spec"], "schedulingGates": [{"name": GATE}]}
    return pod


def finished_status(pod: dict[str, Any]) -> dict[str, Any]:
    """A Succeeded status of the shape kwok writes (conditions, one terminated container)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    container = pod["spec"]["containers"][0]
    return {
        "status": {
            "phase": "Succeeded",
            "hostIP": "10.0.0.1",
            "podIP": "10.0.0.2",
            "startTime": now,
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": now}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {
                        "terminated": {
                            "exitCode": 0,
                            "reason": "Completed",
                            "startedAt": now,
                            "finishedAt": now,
                        }
                    },
                }
            ],
        }
    }


SHAPES: dict[str, Callable[[str, str, int], dict[str, Any]]] = {
    "job": job_pod,
    "operator": operator_pod,
}
PATCHES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "job": lambda pod: {"$deleteFromPrimitiveList/finalizers": [JOB_FINALIZER]},
    "operator": lambda pod: {
        "uid": pod["metadata"]["uid"],
        "$deleteFromPrimitiveList/finalizers": [FINALIZER],
        "labels": {LABEL_RECORDED: "true"},
    },
    "uid": lambda pod: {
        "uid": pod["metadata"]["uid"],
        "$deleteFromPrimitiveList/finalizers": [FINALIZER],
    },
    "label": lambda pod: {"labels": {LABEL_RECORDED: "true"}},
}
# Which pods each patch variant is sent to.
PATCH_SHAPE = {"job": "job", "operator": "operator", "uid": "operator", "label": "operator"}


class Writer:
    """The writes of one namespace, from the benchmark's client."""

    def __init__(self, kube: Kube, ns: str) -> None:
        self.kube, self.ns = kube, ns

    def _path(self, pod: dict[str, Any]) -> str:
        return f"/api/v1/namespaces/{self.ns}/pods/{pod['metadata']['name']}"

    def create(self, pod: dict[str, Any]) -> dict[str, Any]:
        return self.kube.create(f"/api/v1/namespaces/{self.ns}/pods", pod)

    def finish(self, pod: dict[str, Any]) -> None:
        self.kube.request(
            "PATCH",
            self._path(pod) + "/status",
            finished_status(pod),
            content_type="application/merge-patch+json",
        )

    def patch(self, body: Callable[[dict[str, Any]], dict[str, Any]], pod: dict[str, Any]) -> None:
        self.kube.request(
            "PATCH",
            self._path(pod),
            {"metadata": body(pod)},
            content_type="application/strategic-merge-patch+json",
        )

    def unhold(self, pod: dict[str, Any]) -> None:
        self.kube.request(
            "PATCH",
            self._path(pod),
            {"metadata": {"finalizers": None}},
            content_type="application/merge-patch+json",
            missing_ok=True,
        )


class Meter:
    """CPU seconds of the API server and the pod watchers over a batch, net of idle."""

    def __init__(self, run_dir: Path) -> None:
        self.processes = {
            name: ClusterProcess(run_dir, name) for name in ("kube-apiserver", *WATCHERS)
        }
        self.idle: dict[str, float] = {}

    def calibrate(self, seconds: float) -> None:
        """Each process's idle rate: the lowest of `seconds`-long samples (`idle_rate`)."""
        self.idle = {
            name: process.idle_rate(seconds, quiet=0.08, wait_s=12 * seconds)
            for name, process in self.processes.items()
        }

    def measure(self, batch: Callable[[], T]) -> tuple[dict[str, float], T]:
        before = {name: p.cpu_seconds() for name, p in self.processes.items()}
        start = time.monotonic()
        result = batch()
        # NB: the watchers get the batch's last events a little after the last response
        time.sleep(2.0)
        seconds = time.monotonic() - start
        cost = {
            name: max(0.0, p.cpu_seconds() - before[name] - self.idle.get(name, 0.0) * seconds)
            for name, p in self.processes.items()
        }
        return cost, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=1000, help="pods per variant")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=8, help="requests in flight")
    parser.add_argument("--kubeconfig", type=Path, default=REPO / ".cluster" / "kubeconfig")
    parser.add_argument(
        "--smoke", action="store_true", help="5 pods, 1 round, short idle samples (what CI runs)"
    )
    args = parser.parse_args(argv)
    idle_s = 5.0
    if args.smoke:
        args.pods, args.rounds, idle_s = 5, 1, 1.0
    kube = Kube(args.kubeconfig)
    meter = Meter(REPO / ".cluster" / "run")
    pool = ThreadPoolExecutor(args.threads)

    def each(call: Callable[[dict[str, Any]], object], items: list[dict[str, Any]]) -> list[Any]:
        return list(pool.map(call, items))

    results: dict[str, list[dict[str, float]]] = {}
    for round_ in range(args.rounds):
        ns = f"passhat-write-cost-{uuid.uuid4().hex[:6]}"
        kube.create("/api/v1/namespaces", {"metadata": {"name": ns}})
        pods: dict[str, list[dict[str, Any]]] = {}
        writer = Writer(kube, ns)
        try:
            meter.calibrate(idle_s)
            order = list(PATCHES) if round_ % 2 == 0 else list(reversed(PATCHES))
            for variant in order:
                shape = PATCH_SHAPE[variant]
                bodies = [gated(SHAPES[shape](ns, f"{variant}-{i}", i)) for i in range(args.pods)]
                cost, created = meter.measure(functools.partial(each, writer.create, bodies))
                results.setdefault(f"create/{shape}", []).append(cost)
                each(writer.finish, created)
                pods[variant] = created
            time.sleep(3.0)
            for variant in order:
                patch = functools.partial(writer.patch, PATCHES[variant])
                cost, _ = meter.measure(functools.partial(each, patch, pods[variant]))
                results.setdefault(f"patch/{variant}", []).append(cost)
                log(f"round {round_ + 1}: patch/{variant} {json.dumps(cost)}")
        finally:
            # NB: the pods' finalizers (the label-only variant kept its own) go first
            for made in pods.values():
                each(writer.unhold, made)
            kube.delete(f"/api/v1/namespaces/{ns}")
    per_write = {
        variant: {
            name: round(statistics.median(r[name] for r in rows) / args.pods * 1e6)
            for name in rows[0]
        }
        for variant, rows in sorted(results.items())
    }
    print(
        json.dumps(
            {
                "pods": args.pods,
                "rounds": args.rounds,
                "threads": args.threads,
                "cpu_us_per_write": per_write,
                "machine": machine_info(kube),
            },
            sort_keys=True,
        )
    )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"write_cost: {exc}", file=sys.stderr)
        sys.exit(1)
