"""Where a throughput run's wall time goes, read back from the API server's audit log.

`bench/throughput.py` logs each side's namespace (`run 1: operator side in
passhat-bench-op-...`). Given one, this prints when the eval (or Job) was created, how
long the start ramp took, how many trial pods were in flight each second against
`--parallelism`, and how long a slot stayed empty between a pod's end and the next
create: the parts of "1.2 x the ideal schedule" that a faster controller could win back.

    python bench/audit_timeline.py passhat-bench-op-4d0977 [--audit-log .cluster/logs/audit.log]

A pod's end is kwok's last status patch of it (its second: Running, then Succeeded), its
start the first; the audit log's `stageTimestamp` of each request. A pod's life in stages
(its create, the scheduler's binding, kwok's Running patch, its end) says what the
cluster adds to each pod's 5 s whatever the controller does; the Job's pods are named by
`generateName`, so their binding stands in for their create.
"""

from __future__ import annotations

import argparse
import bisect
import datetime
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_AUDIT_LOG = REPO / ".cluster" / "logs" / "audit.log"
OWNERS = ("consistencyevals", "jobs")


@dataclass
class Pod:
    created: float | None = None
    bound: float | None = None
    status_patches: list[float] = field(default_factory=list)

    @property
    def ended(self) -> float | None:
        return self.status_patches[-1] if len(self.status_patches) >= 2 else None


def _seconds(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def read(audit_log: Path, namespace: str) -> tuple[float, dict[str, Pod]]:
    """(when the eval or Job of `namespace` was created, its pods by name)."""
    start: float | None = None
    pods: dict[str, Pod] = defaultdict(Pod)
    with audit_log.open() as lines:
        for line in lines:
            if namespace not in line:
                continue
            event: dict[str, Any] = json.loads(line)
            ref = event.get("objectRef") or {}
            if ref.get("namespace") != namespace:
                continue
            code = (event.get("responseStatus") or {}).get("code")
            at = _seconds(event.get("stageTimestamp") or event["requestReceivedTimestamp"])
            verb, resource, sub = event.get("verb"), ref.get("resource"), ref.get("subresource")
            if resource in OWNERS and verb == "create" and ref.get("name") != "warmup":
                start = at if start is None else start
            elif resource == "pods" and not sub and verb == "create" and code == 201:
                pods[ref.get("name", "")].created = at
            elif resource == "pods" and sub == "binding" and verb == "create":
                pods[ref.get("name", "")].bound = at
            elif resource == "pods" and sub == "status" and verb == "patch":
                pods[ref.get("name", "")].status_patches.append(at)
    if start is None:
        raise SystemExit(f"no eval or Job created in {namespace} in {audit_log}")
    for pod in pods.values():
        # NB: the Job controller creates its pods by generateName, so the audit log names
        # them first at their binding: that stands in for their create
        if pod.created is None and pod.bound is not None:
            pod.created, pod.bound = pod.bound, None
    return start, {
        name: pod for name, pod in pods.items() if name and pod.created and pod.created >= start
    }


def report(start: float, pods: dict[str, Pod], parallelism: int) -> list[str]:
    created = sorted(p.created - start for p in pods.values() if p.created is not None)
    ended = sorted(p.ended - start for p in pods.values() if p.ended is not None)
    if not created or not ended:
        return ["no finished trial pods"]
    last = ended[-1]
    # NB: a slot's gap: from a pod's end to the next create after it (the last wave's ends
    # have no successor)
    gaps = sorted(
        created[i] - end
        for end in ended[:-parallelism]
        if (i := bisect.bisect_left(created, end)) < len(created)
    )
    lives = sorted(p.ended - p.created for p in pods.values() if p.ended and p.created)
    busy = sum(lives)
    ramp = created[min(parallelism, len(created)) - 1]
    out = [
        f"{len(created)} pods, {len(ended)} ended; last ended {last:.2f} s after the create",
        f"start ramp: first pod {created[0]:.2f} s, pod {min(parallelism, len(created))} at "
        f"{ramp:.2f} s",
        f"pods in flight: {busy / last:.1f} of {parallelism} on average "
        f"({busy:.0f} pod-seconds in {last:.1f} s)",
    ]
    if gaps:
        out.append(
            f"a slot's gap from a pod's end to the next create: median "
            f"{gaps[len(gaps) // 2]:.3f} s, p90 {gaps[int(len(gaps) * 0.9)]:.3f} s"
        )
    # NB: a pod's life in stages: the scheduler's binding, kwok's Running patch, its end
    stages: dict[str, list[float]] = {
        "create to binding": [],
        "binding to Running": [],
        "Running to end": [],
    }
    for p in pods.values():
        if p.created is None or p.bound is None or p.ended is None:
            continue
        stages["create to binding"].append(p.bound - p.created)
        stages["binding to Running"].append(p.status_patches[0] - p.bound)
        stages["Running to end"].append(p.ended - p.status_patches[0])
    waves = -(-len(created) // parallelism)
    out.append(
        f"a pod's life from its create to its end: median {lives[len(lives) // 2]:.3f} s, "
        f"mean {busy / len(lives):.3f} s; {waves} waves x the mean life: "
        f"{waves * busy / len(lives):.2f} s (a controller with no ramp and no gap)"
    )
    for name, values in stages.items():
        if values:
            values.sort()
            out.append(
                f"{name}: median {values[len(values) // 2]:.3f} s, "
                f"p90 {values[int(len(values) * 0.9)]:.3f} s, max {values[-1]:.3f} s"
            )
    out.append("second  creates  ends  in-flight")
    for second in range(int(last) + 1):
        mid = second + 0.5
        flight = sum(
            1
            for p in pods.values()
            if p.created and p.ended and p.created - start <= mid < p.ended - start
        )
        made = bisect.bisect_left(created, second + 1) - bisect.bisect_left(created, second)
        done = bisect.bisect_left(ended, second + 1) - bisect.bisect_left(ended, second)
        out.append(f"{second:6d}  {made:7d}  {done:4d}  {flight:9d}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("namespace", help="a side's namespace, as bench/throughput.py logs it")
    p.add_argument("--audit-log", type=Path, default=DEFAULT_AUDIT_LOG)
    p.add_argument("--parallelism", type=int, default=100)
    args = p.parse_args(argv)
    start, pods = read(args.audit_log, args.namespace)
    print("\n".join(report(start, pods, args.parallelism)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
