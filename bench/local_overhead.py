"""What `passhat run` costs over running the same commands in a bare subprocess loop.

Both sides run end to end as fresh Python processes on the same trivial trials at the same
parallelism, so interpreter start-up counts on both: `passhat run` (spec loading,
sandboxes, journal with fsync, transcripts, report) against a loop of
`subprocess.run(cmd)` in a thread pool of `--parallelism` workers. The trial command is
`true`, or `sleep S` with `--sleep S`. Each side runs `--repeat` times, alternating; the
medians are compared. The last output line is one JSON object: trials, parallelism,
sleep, passhat_seconds, bare_seconds, ratio.

    python bench/local_overhead.py --trials 1000 --parallelism 4
    python bench/local_overhead.py --trials 1000 --parallelism 4 --sleep 0.05
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

PASSHAT = "import sys; from passhat.cli import main; sys.argv[0] = 'passhat'; sys.exit(main())"
BARE = """
import subprocess, sys
from concurrent.futures import ThreadPoolExecutor
trials, parallelism, cmd = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
with ThreadPoolExecutor(parallelism) as pool:
    codes = list(pool.map(lambda _: subprocess.run(cmd).returncode, range(trials)))
sys.exit(1 if any(codes) else 0)
"""
TRIALS_PER_TASK = 10


def eval_spec(trials: int, parallelism: int, command: list[str]) -> dict[str, object]:
    """An eval of `trials` trivial trials (tasks of 10 trials each)."""
    tasks = max(1, math.ceil(trials / TRIALS_PER_TASK))
    per_task = min(trials, TRIALS_PER_TASK)
    return {
        "apiVersion": "passhat.dev/v1alpha1",
        "kind": "ConsistencyEval",
        "metadata": {"name": "local-overhead"},
        "spec": {
            "tasks": [{"id": f"task-{i:05d}"} for i in range(tasks)],
            "trials": per_task,
            "ks": [1],
            "parallelism": parallelism,
            "trial": {
                "timeoutSeconds": 600,
                "template": {"spec": {"containers": [{"name": "t", "command": command}]}},
            },
        },
    }


def timed(argv: list[str]) -> float:
    """Wall-clock seconds of one end-to-end run of `argv` (which must succeed)."""
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(argv)}\n{done.stderr.decode()[-2000:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; print progress and, last, the JSON result line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--sleep", type=float, default=0.0, help="trial = sleep S (default true)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    command = ["sleep", f"{args.sleep:g}"] if args.sleep > 0 else ["true"]
    spec = eval_spec(args.trials, args.parallelism, command)
    total = len(spec["spec"]["tasks"]) * spec["spec"]["trials"]  # type: ignore[index]
    passhat_times: list[float] = []
    bare_times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="passhat-bench-") as tmp:
        eval_path = Path(tmp) / "eval.yaml"
        eval_path.write_text(yaml.safe_dump(spec))
        for repeat in range(args.repeat):
            out = Path(tmp) / f"run-{repeat}"
            passhat = [sys.executable, "-c", PASSHAT, "run", str(eval_path), "--out", str(out)]
            passhat += ["--format", "json", "--quiet"]
            bare = [sys.executable, "-c", BARE, str(total), str(args.parallelism), *command]
            pair = [(passhat, passhat_times), (bare, bare_times)]
            for run_argv, times in pair if repeat % 2 == 0 else reversed(pair):
                times.append(timed(run_argv))
            print(
                f"repeat {repeat + 1}/{args.repeat}: passhat {passhat_times[-1]:.3f}s, "
                f"bare {bare_times[-1]:.3f}s",
                file=sys.stderr,
            )
    passhat_s, bare_s = statistics.median(passhat_times), statistics.median(bare_times)
    result = {
        "trials": total,
        "parallelism": args.parallelism,
        "sleep": args.sleep,
        "repeat": args.repeat,
        "passhat_seconds": round(passhat_s, 3),
        "bare_seconds": round(bare_s, 3),
        "ratio": round(passhat_s / bare_s, 3),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
