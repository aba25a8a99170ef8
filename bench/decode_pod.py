#!/usr/bin/env python3
"""The operator's cost of reading one pod: protobuf into the slim pod, against JSON
decoded whole and then cut down (what each watch event and listed pod costs it).

Reads the pods one API server encoded both ways (tests/fixtures/wire/pods.json) and
prints one JSON line: per fixture and in total, microseconds per pod for each reader
(the best of `--repeat` timings of `--number` decodes), and the bytes on the wire.

    python bench/decode_pod.py [--number 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import platform
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from passhat.operator import protowire  # noqa: E402
from passhat.operator.slimpod import decode_pod, slim_pod  # noqa: E402

WIRE = REPO / "tests" / "fixtures" / "wire" / "pods.json"


def _from_json(text: bytes) -> object:
    return slim_pod(json.loads(text))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=2000, help="decodes per timing")
    parser.add_argument("--repeat", type=int, default=5, help="timings; the best is kept")
    args = parser.parse_args(argv)
    pods = json.loads(WIRE.read_text())["pods"]
    number, repeat = int(args.number), int(args.repeat)

    def best(run: Callable[[], object]) -> float:
        times = timeit.repeat(run, number=number, repeat=repeat)
        return round(min(times) / number * 1e6, 1)

    rows = {}
    for name, captured in sorted(pods.items()):
        content = base64.b64decode(captured["protobuf"])
        text = json.dumps(captured["json"], separators=(",", ":")).encode()
        raw = protowire.unwrap(content)[1]
        assert decode_pod(raw) == slim_pod(json.loads(text)), name
        rows[name] = {
            "protobuf_us": best(functools.partial(decode_pod, raw)),
            "json_us": best(functools.partial(_from_json, text)),
            "protobuf_bytes": len(content),
            "json_bytes": len(text),
        }
    total = {
        key: round(sum(float(row[key]) for row in rows.values()) / len(rows), 1)
        for key in ("protobuf_us", "json_us", "protobuf_bytes", "json_bytes")
    }
    print(
        json.dumps(
            {
                "python": platform.python_version(),
                "machine": platform.processor() or platform.machine(),
                "mean_per_pod": total,
                "pods": rows,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
