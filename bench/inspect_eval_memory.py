"""Peak memory of `passhat score` on a large Inspect `.eval` log, made by the real Inspect.

passhat reads a `.eval` (a zip of zstd members) one sample member at a time, so its
memory should follow the largest sample, not the log. This makes a log with the real
`inspect eval` (no model: a solver writes SAMPLES answers of OUTPUT_KB random base64 each,
right or wrong by a seeded plan), then runs `passhat score LOG --format json` in a child
process and reads the child's peak RSS (`wait4`). With `--convert` it also converts the
log to Inspect's JSON format (`inspect log convert --to json`) and scores that, for the
comparison docs/scoring.md makes.

    python bench/inspect_eval_memory.py --inspect "$PASSHAT_TEST_INSPECT" \\
        --samples 200 --epochs 2 --output-kb 140 --convert

inspect-ai is not a passhat dependency: hack/test.sh keeps a venv of it with the build
cache (`/var/cache/passhat/inspect-venv-0.3.285/bin/inspect`). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TASK = """
import base64, random
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput
from inspect_ai.scorer import includes
from inspect_ai.solver import solver


@solver
def long_answer(size):
    async def solve(state, generate):
        rng = random.Random(f"{state.sample_id}/{state.epoch}")
        noise = base64.b64encode(rng.randbytes(size * 3 // 4)).decode()
        right = rng.random() < 0.7
        state.output = ModelOutput.from_content("none", noise + (" 42" if right else " 41"))
        return state

    return solve


@task
def big():
    samples = [Sample(id=f"s{i:04d}", input="answer", target="42") for i in range(SAMPLES)]
    return Task(dataset=samples, solver=long_answer(OUTPUT_BYTES), scorer=includes())
"""


def peak_rss_mib(argv: list[str]) -> tuple[float, float, int]:
    """(peak RSS of the child in MiB, its wall seconds, its exit code)."""
    started = time.monotonic()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    if child.stderr is not None:
        child.stderr.close()
    return usage.ru_maxrss / 1024, wall, os.waitstatus_to_exitcode(status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inspect", default=os.environ.get("PASSHAT_TEST_INSPECT", "inspect"))
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--output-kb", type=int, default=140)
    parser.add_argument("--convert", action="store_true", help="also score the JSON format")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="passhat-bench-inspect-") as tmp:
        root = Path(tmp)
        task_file = root / "big.py"
        task_file.write_text(
            TASK.replace("SAMPLES", str(args.samples)).replace(
                "OUTPUT_BYTES", str(args.output_kb * 1024)
            )
        )
        logs = root / "logs"
        env = {**os.environ, "INSPECT_DISPLAY": "none"}
        started = time.monotonic()
        subprocess.run(
            [args.inspect, "eval", f"{task_file}@big", "--model", "none",
             "--epochs", str(args.epochs), "--log-dir", str(logs)],
            env=env, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        inspect_s = time.monotonic() - started
        (log,) = logs.glob("*.eval")
        import zipfile

        with zipfile.ZipFile(log) as archive:
            members = sum(info.file_size for info in archive.infolist())
        score = [sys.executable, "-m", "passhat", "score", str(log), "--format", "json"]
        rss, wall, code = peak_rss_mib(score)
        result: dict[str, object] = {
            "samples": args.samples,
            "epochs": args.epochs,
            "output_kb": args.output_kb,
            "eval_mib": round(log.stat().st_size / 2**20, 1),
            "members_mib": round(members / 2**20, 1),
            "inspect_eval_s": round(inspect_s, 1),
            "score_eval_peak_rss_mib": round(rss, 1),
            "score_eval_s": round(wall, 2),
            "score_eval_exit": code,
        }
        if args.convert:
            out = root / "json"
            subprocess.run(
                [args.inspect, "log", "convert", str(log), "--to", "json",
                 "--output-dir", str(out)],
                env=env, check=True, stdout=subprocess.DEVNULL,
            )  # fmt: skip
            (converted,) = out.rglob("*.json")
            rss, wall, code = peak_rss_mib(
                [sys.executable, "-m", "passhat", "score", str(converted), "--format", "json"]
            )
            result.update(
                json_mib=round(converted.stat().st_size / 2**20, 1),
                score_json_peak_rss_mib=round(rss, 1),
                score_json_s=round(wall, 2),
                score_json_exit=code,
            )
        result.update(
            machine=f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}",
            load_average=[round(x, 2) for x in os.getloadavg()],
        )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
