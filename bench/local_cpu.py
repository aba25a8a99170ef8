"""Where the CPU of a local run goes: passhat's threads against a bare subprocess loop.

`bench/local_overhead.py` times whole runs; this splits the CPU. Each side runs in a fresh
process on the same `true` trials at the same parallelism. The passhat side runs
`passhat run` in-process with its executor loop, spawner threads and journal syncer
wrapped to read their thread CPU time (`time.thread_time()`) as they end; both sides
report their own CPU (`RUSAGE_SELF`) and their children's (`RUSAGE_CHILDREN`: the trials).
The last output line is JSON: per side the wall seconds, the process and children CPU
seconds, and for passhat the CPU seconds of the loop thread and of all spawner threads;
and the per-trial figures in milliseconds.

    python bench/local_cpu.py --trials 5000 --parallelism 4 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from local_overhead import BARE, eval_spec


def _usage(start: float) -> dict[str, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "wall": time.perf_counter() - start,
        "cpu": own.ru_utime + own.ru_stime,
        "children_cpu": children.ru_utime + children.ru_stime,
    }


def passhat_side(eval_path: str, out: str) -> dict[str, float]:
    """Run `passhat run` in this process; its CPU split by thread."""
    from passhat.cli import main
    from passhat.local import executor, journal, spawner

    threads: dict[str, list[float]] = {"loop": [], "spawner": [], "fsync": []}

    def timed(cls: type, name: str, label: str) -> None:
        original: Callable[..., Any] = getattr(cls, name)

        def wrapper(self: object, *args: Any, **kwargs: Any) -> Any:
            try:
                return original(self, *args, **kwargs)
            finally:
                threads[label].append(time.thread_time())

        setattr(cls, name, wrapper)

    timed(executor.Executor, "_loop", "loop")
    timed(spawner.Spawner, "_work", "spawner")
    timed(journal.Journal, "_sync_loop", "fsync")
    start = time.perf_counter()
    argv = ["run", eval_path, "--format", "json", "--quiet", "--out", out]
    with open(os.devnull, "w") as sink:
        stdout = sys.stdout
        sys.stdout = sink
        try:
            code = main(argv)
        finally:
            sys.stdout = stdout
    if code != 0:
        sys.exit(f"passhat run exited {code}")
    usage = _usage(start)
    usage.update({label: sum(values) for label, values in threads.items()})
    return usage


def bare_side(trials: int, parallelism: int) -> dict[str, float]:
    """Run the bare loop of local_overhead.py in this process."""
    start = time.perf_counter()
    sys.argv = ["bare", str(trials), str(parallelism), "true"]
    try:
        exec(compile(BARE, "bare", "exec"), {"__name__": "bare"})
    except SystemExit as done:
        if done.code:
            sys.exit(f"the bare loop exited {done.code}")
    return _usage(start)


def main() -> int:
    """Run both sides `--repeat` times in fresh processes; print the medians as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5000)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--side", choices=["passhat", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--eval", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side == "passhat":
        print(json.dumps(passhat_side(args.eval, args.out)))
        return 0
    if args.side == "bare":
        print(json.dumps(bare_side(args.trials, args.parallelism)))
        return 0
    import yaml

    runs: dict[str, list[dict[str, float]]] = {"passhat": [], "bare": []}
    with tempfile.TemporaryDirectory(prefix="passhat-bench-") as tmp:
        eval_path = Path(tmp) / "eval.yaml"
        spec = eval_spec(args.trials, args.parallelism, ["true"])
        eval_path.write_text(yaml.safe_dump(spec))
        trials = len(spec["spec"]["tasks"]) * spec["spec"]["trials"]  # type: ignore[index]
        for repeat in range(args.repeat):
            for side in ("passhat", "bare"):
                argv = [sys.executable, __file__, "--side", side, "--trials", str(trials)]
                argv += ["--parallelism", str(args.parallelism), "--eval", str(eval_path)]
                argv += ["--out", str(Path(tmp) / f"run-{repeat}")]
                done = subprocess.run(argv, capture_output=True, text=True, check=True)
                runs[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"repeat {repeat + 1}/{args.repeat}: {runs['passhat'][-1]}", file=sys.stderr)
    result: dict[str, Any] = {"trials": trials, "parallelism": args.parallelism}
    for side, values in runs.items():
        for key in values[0]:
            result[f"{side}_{key}_s"] = round(statistics.median(v[key] for v in values), 3)
    per = {key: result[key] / trials * 1000 for key in result if key.endswith("_s")}
    result["per_trial_ms"] = {key[:-2]: round(value, 3) for key, value in per.items()}
    result["load_average"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
