"""What `passhat run` costs over running the same commands in a bare subprocess loop.

Both sides run end to end as fresh Python processes on the same trivial trials at the same
parallelism, so interpreter start-up counts on both: `python -m passhat run` (the same
entry point as the `passhat` command, without the console script's wrapper; spec loading,
sandboxes, journal with fsync, transcripts, report) against a loop of
`subprocess.run(cmd)` in a thread pool of `--parallelism` workers. The trial command is
`true`, or `sleep S` with `--sleep S`. Each side runs `--repeat` times, alternating; the
medians are compared. To split the fixed cost (interpreter, imports, spec, report) from
the cost per trial, each repeat also runs both sides on a single trial. The last output
line is one JSON object: trials, parallelism, sleep, passhat_seconds, bare_seconds, ratio,
and the split: passhat_fixed_seconds, bare_fixed_seconds (one-trial runs),
passhat_per_trial_ms, bare_per_trial_ms ((N-trial run - one-trial run) / (N - 1)) and
per_trial_ratio.

`--memory-limit 1Gi` gives passhat's trials that `limits.memory`, so passhat runs each in
a cgroup of the run's pool where cgroups are writable (the bare loop has no limit): what
enforcing the ceiling costs.

`--floor` adds a third side, the least any `passhat run` must do: load and validate the
eval file with passhat's own loader (the spec must be valid before a trial starts), then
the same bare loop; no sandbox, journal, transcript or report. The JSON line then also has
floor_seconds, floor_ratio (floor / bare) and floor_fixed_seconds (one trial). A ratio
target below floor_ratio cannot be met by any runner that validates its spec that way.

    python bench/local_overhead.py --trials 1000 --parallelism 4
    python bench/local_overhead.py --trials 1000 --parallelism 4 --floor
    python bench/local_overhead.py --trials 1000 --parallelism 4 --sleep 0.05
    TMPDIR=/dev/shm python bench/local_overhead.py --trials 10000

First it compiles passhat's modules to bytecode (`compileall`), as `pip install` of a
wheel does and as the first run does on most machines: where PYTHONDONTWRITEBYTECODE is
set (it is on this project's build VMs) and passhat is installed editable, every run would
otherwise compile its 45 modules again, which no installed passhat does.
`--no-compile` measures as found.

The runs' output directories (and passhat's scratch directory) go under TMPDIR. passhat
creates a transcript file per attempt; on an ext4 without a journal (this project's build
VMs' root file system) creating files within a minute or more of deleting thousands is
slow (the kernel skips recently deleted inodes one by one), so successive runs there
disturb each other; TMPDIR on tmpfs or a journaled file system avoids that.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

BARE = """
import subprocess, sys
from concurrent.futures import ThreadPoolExecutor
trials, parallelism, cmd = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
with ThreadPoolExecutor(parallelism) as pool:
    codes = list(pool.map(lambda _: subprocess.run(cmd).returncode, range(trials)))
sys.exit(1 if any(codes) else 0)
"""
# The floor (`--floor`): what every `passhat run` must do before its first trial, and nothing
# more: load and validate the eval file with passhat's own loader (YAML, the pydantic
# models of `passhat.api`), then the bare loop. No sandbox, journal, transcript or report.
FLOOR = "import sys\nfrom passhat.api.load import load_eval\nload_eval(sys.argv.pop(1))\n" + BARE
TRIALS_PER_TASK = 10


def eval_spec(
    trials: int, parallelism: int, command: list[str], memory_limit: str | None = None
) -> dict[str, object]:
    """An eval of `trials` trivial trials (tasks of 10 trials each)."""
    tasks = max(1, math.ceil(trials / TRIALS_PER_TASK))
    per_task = min(trials, TRIALS_PER_TASK)
    container: dict[str, object] = {"name": "t", "command": command}
    if memory_limit is not None:
        container["resources"] = {"limits": {"memory": memory_limit}}
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
                "template": {"spec": {"containers": [container]}},
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


def compile_passhat() -> None:
    """Write the bytecode of the passhat package `python -m passhat` imports."""
    spec = importlib.util.find_spec("passhat")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("passhat is not installed: python -m pip install -e .")
    package = next(iter(spec.submodule_search_locations))
    subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True)


def wait_quiet(load: float) -> None:
    """Sleep until the 1-minute load average is below `load` (the machine may be shared)."""
    while os.getloadavg()[0] >= load:
        time.sleep(5)


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; print progress and, last, the JSON result line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--sleep", type=float, default=0.0, help="trial = sleep S (default true)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--wait-quiet",
        type=float,
        metavar="LOAD",
        help="before each repeat, wait until the 1-minute load average is below LOAD",
    )
    parser.add_argument(
        "--memory-limit",
        metavar="QUANTITY",
        help="give passhat's trials this limits.memory (a cgroup per slot where writable)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also time the floor: passhat's spec loading followed by the bare loop",
    )
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="do not compile passhat's bytecode first (measure it as found)",
    )
    args = parser.parse_args(argv)
    if not args.no_compile:
        compile_passhat()
    command = ["sleep", f"{args.sleep:g}"] if args.sleep > 0 else ["true"]
    spec = eval_spec(args.trials, args.parallelism, command)
    total = len(spec["spec"]["tasks"]) * spec["spec"]["trials"]  # type: ignore[index]
    sides = ["passhat", "bare", *(["floor"] if args.floor else [])]
    times: dict[str, list[float]] = {side + n: [] for side in sides for n in ("", "1")}
    with tempfile.TemporaryDirectory(prefix="passhat-bench-") as tmp:
        argvs: dict[str, list[str]] = {}
        for label, trials in (("", args.trials), ("1", 1)):
            spec = eval_spec(trials, args.parallelism, command, args.memory_limit)
            eval_path = Path(tmp) / f"eval{label}.yaml"
            eval_path.write_text(yaml.safe_dump(spec))
            count = len(spec["spec"]["tasks"]) * spec["spec"]["trials"]  # type: ignore[index]
            argvs["passhat" + label] = [sys.executable, "-m", "passhat", "run", str(eval_path)]
            argvs["passhat" + label] += ["--format", "json", "--quiet", "--out"]
            argvs["bare" + label] = [sys.executable, "-c", BARE, str(count), str(args.parallelism)]
            argvs["bare" + label] += command
            argvs["floor" + label] = [sys.executable, "-c", FLOOR, str(eval_path)]
            argvs["floor" + label] += argvs["bare" + label][3:]
        for repeat in range(args.repeat):
            if args.wait_quiet is not None:
                wait_quiet(args.wait_quiet)
            order = [*sides, *(side + "1" for side in sides)]
            for side in order if repeat % 2 == 0 else reversed(order):
                argv = argvs[side]
                if side.startswith("passhat"):
                    argv = [*argv, str(Path(tmp) / f"run-{side}-{repeat}")]
                times[side].append(timed(argv))
            print(
                f"repeat {repeat + 1}/{args.repeat}: passhat {times['passhat'][-1]:.3f}s, "
                f"bare {times['bare'][-1]:.3f}s (one trial: passhat "
                f"{times['passhat1'][-1]:.3f}s, bare {times['bare1'][-1]:.3f}s)",
                file=sys.stderr,
            )
            if args.floor:
                print(
                    f"  floor {times['floor'][-1]:.3f}s (one trial: {times['floor1'][-1]:.3f}s)",
                    file=sys.stderr,
                )
    med = {side: statistics.median(values) for side, values in times.items()}
    per_trial = {side: (med[side] - med[side + "1"]) / max(1, total - 1) for side in sides}
    result = {
        "trials": total,
        "parallelism": args.parallelism,
        "sleep": args.sleep,
        "repeat": args.repeat,
        "load_average": round(os.getloadavg()[0], 2),
        "bytecode": "as found" if args.no_compile else "compiled",
        "memory_limit": args.memory_limit,
        "passhat_seconds": round(med["passhat"], 3),
        "bare_seconds": round(med["bare"], 3),
        "ratio": round(med["passhat"] / med["bare"], 3),
        "passhat_fixed_seconds": round(med["passhat1"], 3),
        "bare_fixed_seconds": round(med["bare1"], 3),
        "passhat_per_trial_ms": round(per_trial["passhat"] * 1000, 3),
        "bare_per_trial_ms": round(per_trial["bare"] * 1000, 3),
        "per_trial_ratio": round(per_trial["passhat"] / per_trial["bare"], 3)
        if per_trial["bare"] > 0
        else None,
    }
    if args.floor:
        result["floor_seconds"] = round(med["floor"], 3)
        result["floor_ratio"] = round(med["floor"] / med["bare"], 3)
        result["floor_fixed_seconds"] = round(med["floor1"], 3)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
