"""How long reading an eval file takes: `passhat.api.parse_eval` on evals of growing size.

Times `parse_eval(text)` in-process (YAML parse, duplicate-key check, pydantic
validation), after one warm-up call, on `examples/eval.yaml` and on the evals
`bench/local_overhead.py` writes (10 trials per task) for `--tasks` tasks. To compare two
versions of the code, run it once per version with PYTHONPATH pointing at a directory that
holds that version's `passhat` package (`git archive REV passhat | tar -x -C DIR`). The
last line is JSON: median milliseconds by eval.

    python bench/spec_parse.py --repeat 15
    PYTHONPATH=/tmp/before python bench/spec_parse.py --repeat 15
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from local_overhead import eval_spec

from passhat.api import parse_eval

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "eval.yaml"


def main() -> int:
    """Time parse_eval on each eval; print the medians, then the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--tasks", type=int, nargs="+", default=[100, 500])
    args = parser.parse_args()
    texts = {"examples/eval.yaml": EXAMPLE.read_text()}
    for tasks in args.tasks:
        texts[f"{tasks} tasks"] = yaml.safe_dump(eval_spec(tasks * 10, 1, ["true"]))
    result: dict[str, float] = {}
    for label, text in texts.items():
        parse_eval(text, label)
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            parse_eval(text, label)
            times.append(time.perf_counter() - start)
        result[label] = round(statistics.median(times) * 1000, 2)
        print(f"{label}: median {result[label]:.2f} ms, min {min(times) * 1000:.2f} ms")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
