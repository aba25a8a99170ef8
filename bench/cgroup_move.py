"""How long a spawner thread takes to step into an attempt's cgroup and back (cgroup v1).

With `limits.memory`, `passhat run` puts each attempt into a cgroup of its pool by moving
the spawning thread into it around the spawn (`passhat.local.cgroup.Pool.entered`). The
kernel makes such a move wait for an RCU grace period when none happened for a moment, so
the cost depends on how long the machine was idle before. This times one move in and out,
`--repeat` times for each pause before it (a thread, not the main one, as passhat does).
The last output line is JSON: for each pause in seconds, the median and the maximum in ms.
Needs a writable memory cgroup (root, or a delegated cgroup).

    python bench/cgroup_move.py --repeat 40
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time

from passhat.local import cgroup

PAUSES = (0.0, 0.01, 0.05)


def main(argv: list[str] | None = None) -> int:
    """Time the moves; print the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args(argv)
    hierarchy = cgroup.detect()
    if hierarchy is None:
        sys.exit("no writable memory cgroup here (run as root, or in a delegated cgroup)")
    pool = cgroup.Pool(hierarchy, memory_limit=None, cpu_limit=None)
    result: dict[str, dict[str, float]] = {}

    def measure() -> None:
        slot = pool.acquire()
        for pause in PAUSES:
            times = []
            for _ in range(args.repeat):
                time.sleep(pause)
                start = time.perf_counter()
                with pool.entered(slot):
                    pass
                times.append((time.perf_counter() - start) * 1000)
            result[f"{pause:g}"] = {
                "median_ms": round(statistics.median(times), 3),
                "max_ms": round(max(times), 3),
            }

    try:
        thread = threading.Thread(target=measure)
        thread.start()
        thread.join()
    finally:
        pool.close()
    print(json.dumps({"cgroup_version": hierarchy.version, "placement": pool.placement, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
