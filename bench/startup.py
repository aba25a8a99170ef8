"""How long passhat's commands take to start: `passhat trial -- true`, `score`, a one-trial run.

`passhat trial` starts every attempt in a pod (and locally when a trial's command is the
wrapper), so its start-up is paid once per attempt. Each command runs end to end in a fresh
interpreter, `--repeat` times, interleaved with `python -c pass` (the floor); medians and
minima are printed, and the last line is JSON. Before timing, passhat's bytecode is compiled
(as `pip install` of a wheel does; see bench/local_overhead.py).

`--imports` adds where a one-trial `passhat run` spends its import time: a fresh
interpreter imports the modules the run needs in stages (pydantic, yaml, the spec models,
the loader, the local executor, the CLI), timing each stage after the ones before it, so a
module that an earlier stage already loaded costs nothing in a later one.

To compare two versions of the code, give each as `--tree DIR` (a directory holding a
`passhat` package, e.g. from `git archive HEAD passhat | tar -x -C DIR`); each is put first
on PYTHONPATH, and the runs interleave.

    python bench/startup.py --repeat 30
    python bench/startup.py --repeat 30 --imports
    python bench/startup.py --repeat 30 --tree /tmp/before --tree /tmp/after
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from local_overhead import compile_passhat, eval_spec

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "same-mean-uniform.jsonl"


def commands(tmp: str) -> dict[str, list[str]]:
    """The command lines to time, by label."""
    import yaml

    eval_path = Path(tmp) / "eval.yaml"
    eval_path.write_text(yaml.safe_dump(eval_spec(1, 1, ["true"])))
    passhat = [sys.executable, "-m", "passhat"]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "passhat trial -- true": [
            *passhat,
            *("trial", "--result", f"{tmp}/r.json", "--transcript", f"{tmp}/t.log", "--", "true"),
        ],
        "passhat score": [*passhat, "score", str(EXAMPLE), "--format", "json"],
        "passhat run (1 trial)": [
            *passhat,
            *("run", str(eval_path), "--format", "json", "--quiet", "--out", f"{tmp}/run"),
        ],
    }


# (label, statement): timed one after another in one fresh interpreter
IMPORT_STAGES = [
    ("pydantic", "from pydantic import BaseModel, ConfigDict, Field, field_validator"),
    ("yaml", "import yaml"),
    ("passhat.api.spec (the models built)", "import passhat.api.spec"),
    ("passhat.api.load", "import passhat.api.load"),
    ("passhat.local.driver", "import passhat.local.driver"),
    ("passhat.cli", "import passhat.cli"),
]
STAGES_SCRIPT = """
import json, sys, time
stages = json.loads(sys.argv[1])
times = []
for _, statement in stages:
    start = time.perf_counter()
    exec(statement)
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def import_stages(env: dict[str, str]) -> list[float]:
    """Seconds per stage of IMPORT_STAGES, in one fresh interpreter."""
    argv = [sys.executable, "-c", STAGES_SCRIPT, json.dumps(IMPORT_STAGES)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    times: list[float] = json.loads(done.stdout)
    return times


def main() -> int:
    """Time every command in every tree; print medians, then the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--tree", action="append", default=[], metavar="DIR")
    parser.add_argument(
        "--imports", action="store_true", help="also time the imports of a run, by stage"
    )
    args = parser.parse_args()
    trees = args.tree or [""]
    for tree in trees:
        if tree:
            subprocess.run([sys.executable, "-m", "compileall", "-q", tree], check=True)
        else:
            compile_passhat()
    times: dict[str, dict[str, list[float]]] = {tree: {} for tree in trees}
    with tempfile.TemporaryDirectory(prefix="passhat-startup-") as tmp:
        argvs = commands(tmp)
        for _ in range(args.repeat):
            for tree in trees:
                env = dict(os.environ)
                if tree:
                    env["PYTHONPATH"] = os.pathsep.join(filter(None, [tree, env.get("PYTHONPATH")]))
                for label, argv in argvs.items():
                    shutil.rmtree(f"{tmp}/run", ignore_errors=True)
                    start = time.perf_counter()
                    subprocess.run(argv, env=env, capture_output=True, check=True)
                    times[tree].setdefault(label, []).append(time.perf_counter() - start)
                if args.imports:
                    stages = import_stages(env)
                    for (label, _), seconds in zip(IMPORT_STAGES, stages, strict=True):
                        times[tree].setdefault(f"import {label}", []).append(seconds)
    result: dict[str, object] = {"repeat": args.repeat, "load_average": os.getloadavg()[0]}
    for tree in trees:
        medians = {}
        for label, values in times[tree].items():
            median, best = statistics.median(values) * 1000, min(values) * 1000
            print(f"{tree or 'installed'}: {label}: median {median:.1f} ms, min {best:.1f} ms")
            medians[label] = round(median, 1)
        result[tree or "installed"] = medians
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
