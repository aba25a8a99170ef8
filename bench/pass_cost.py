"""The operator's own CPU per reconcile pass on a large eval, without a cluster.

Issue #22: at 100,000 trials (10,000 tasks x 10) and parallelism 2,000 the operator spent
0.74 CPU s a pass, against 0.2 s at 10,000 trials: work that grows with the eval, not with
what a pass records. This runs `EvalLoop.run_pass` (the real pass: fold, ledger, status,
pacing, pod bodies) against the unit tests' in-memory API server and kubelet
(`tests/unit/operator_fake.py`), which ends `--end-share` of the running pods before each
pass (0.05 of 2,000: about the 100 trials a pass recorded in the cluster run). After
`--warmup` passes (the slow start fills the slots) it measures `--passes` passes: each
pass's CPU, less the CPU spent inside the fake's methods (its deep copies are the test
double's, not the operator's), so the figure is the loop's own CPU without the API client
(the HTTP requests and their JSON are not in it).

`--profile N` prints the N functions of the operator's code with the most own time
(cProfile; the fake's share left out). To compare versions, give each as `--tree DIR` (a
directory holding a `passhat` package, e.g. `git archive HEAD passhat | tar -x -C DIR`):
each is measured in a child process with DIR first on its PYTHONPATH.

    python bench/pass_cost.py                                   # 10,000 x 10, parallelism 2,000
    python bench/pass_cost.py --tasks 1000 --parallelism 1000   # 10,000 trials
    python bench/pass_cost.py --profile 25
    python bench/pass_cost.py --tree /tmp/before --tree /tmp/after
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import os
import pstats
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# The fake API's methods the loop calls: their CPU is the test double's, not the loop's.
FAKE_METHODS = (
    "get_eval",
    "list_pods",
    "get_pod",
    "get_config_map",
    "get_config_map_meta",
    "patch_eval_status",
    "settle",
    "keep_pods",
    "create_pods",
    "release_pods",
    "releasing",
    "read_pod_log",
)


def eval_spec(tasks: int, trials: int, parallelism: int) -> dict[str, Any]:
    """An eval of `tasks` x `trials`, finished pods deleted (as the 100,000-trial run)."""
    return {
        "tasks": [{"id": f"task-{index}"} for index in range(tasks)],
        "trials": trials,
        "ks": [1, 3],
        "parallelism": parallelism,
        "podRetention": "none",
        "trial": {
            "timeoutSeconds": 600,
            "template": {"spec": {"containers": [{"name": "agent", "image": "x"}]}},
        },
    }


def outcome(task: int, trial: int, attempt: int) -> str:
    """A fixed outcome per slot: 70 % pass, with some flaky tasks among them."""
    return "pass" if random.Random(f"{task}/{trial}").random() < 0.7 else "fail"


class Meter:
    """CPU seconds spent inside the wrapped methods (the fake's share of a pass)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds += time.process_time() - started

        return timed


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Run the passes in this process; the loop's own CPU per measured pass."""
    from passhat.operator.config import OperatorConfig
    from passhat.operator.loop import EvalLoop, PassState
    from passhat.operator.pods import EvalRef
    from tests.unit.operator_fake import FakeApi, FakeKubelet

    clock = [1_700_000_000.0]
    api = FakeApi(rng=random.Random(1), clock=lambda: clock[0])
    meta = api.add_eval("ns", "big", eval_spec(args.tasks, args.trials, args.parallelism))[
        "metadata"
    ]
    meter = Meter()
    for name in FAKE_METHODS:
        setattr(api, name, meter.wrap(getattr(api, name)))
    kubelet = FakeKubelet(api, outcome, rng=random.Random(2))
    loop = EvalLoop(
        api, EvalRef("ns", "big", meta["uid"]), config=OperatorConfig(), clock=lambda: clock[0]
    )
    profile = cProfile.Profile() if args.profile else None
    own: list[float] = []
    recorded = 0
    for index in range(args.warmup + args.passes):
        clock[0] += 1.0  # NB: >= status_interval_s: every pass that records writes status
        kubelet.step(share=args.end_share)
        measured = index >= args.warmup
        fake0, started = meter.seconds, time.process_time()
        if measured and profile is not None:
            profile.enable()
        result = loop.run_pass()
        if measured and profile is not None:
            profile.disable()
        if measured:
            own.append(time.process_time() - started - (meter.seconds - fake0))
            recorded += len(result.recorded)
        if result.state is PassState.DONE:
            break
    if profile is not None:
        print_profile(profile, args.profile)
    return {
        "tasks": args.tasks,
        "trials": args.trials,
        "parallelism": args.parallelism,
        "passes": len(own),
        "recorded_per_pass": round(recorded / max(len(own), 1), 1),
        "pods_in_flight": len(api.pods),
        "own_cpu_ms_median": round(statistics.median(own) * 1000, 1),
        "own_cpu_ms_mean": round(statistics.fmean(own) * 1000, 1),
    }


def print_profile(profile: cProfile.Profile, top: int) -> None:
    """The operator's functions with the most own time (the fake's and stdlib's left out)."""
    stats = pstats.Stats(profile)
    rows = []
    for (path, line, name), (_, calls, own, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        # NB: slim_pod runs in the fake's LIST (once per pod per pass); the operator's pod
        # cache slims a pod once per watch event instead
        fake = f"{os.sep}tests{os.sep}" in path or path.endswith("slimpod.py")
        if f"{os.sep}passhat{os.sep}" in path and not fake:
            short = path.split(f"{os.sep}passhat{os.sep}", 1)[1]
            rows.append((own, cumulative, calls, f"passhat/{short}:{line}({name})"))
    rows.sort(reverse=True)
    print(
        f"{'own s':>8} {'cum s':>8} {'calls':>9}  function (cProfile, measured passes)",
        file=sys.stderr,
    )
    for own, cumulative, calls, where in rows[:top]:
        print(f"{own:8.3f} {cumulative:8.3f} {calls:9d}  {where}", file=sys.stderr)


def one_run(tree: Path | None, args: argparse.Namespace) -> dict[str, Any]:
    """Measure one version of the code in a child process."""
    env = dict(os.environ)
    paths = [str(tree)] if tree is not None else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(ROOT), env.get("PYTHONPATH", "")])
    sizes = [
        *("--tasks", str(args.tasks), "--trials", str(args.trials)),
        *("--parallelism", str(args.parallelism), "--end-share", str(args.end_share)),
        *("--warmup", str(args.warmup), "--passes", str(args.passes)),
        *("--profile", str(args.profile)),
    ]
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", *sizes],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return {"tree": str(tree) if tree else "this checkout", **result}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=10_000)
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--parallelism", type=int, default=2000)
    p.add_argument("--end-share", type=float, default=0.05, help="running pods ended per pass")
    p.add_argument("--warmup", type=int, default=25, help="passes before measuring")
    p.add_argument("--passes", type=int, default=30, help="passes measured")
    p.add_argument("--profile", type=int, default=0, metavar="N", help="print the top N")
    p.add_argument("--tree", type=Path, action="append", default=[])
    p.add_argument("--smoke", action="store_true", help="tiny run (what CI runs)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.smoke:
        args.tasks, args.parallelism, args.warmup, args.passes = 50, 100, 3, 3
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(measure(args)), flush=True)
        return 0
    results = [one_run(tree, args) for tree in args.tree or [None]]
    for result in results:
        print(
            f"{result['tree']}: {result['tasks']} x {result['trials']}, parallelism "
            f"{result['parallelism']}: {result['own_cpu_ms_median']} ms own CPU per pass "
            f"(median of {result['passes']}; mean {result['own_cpu_ms_mean']}), "
            f"{result['recorded_per_pass']} recorded per pass",
            file=sys.stderr,
        )
    print(json.dumps({"runs": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
