"""The operator's own CPU per archived attempt, without the network: `Archiver.archive()`
with the log read from memory and a store that keeps nothing.

What is left is what `passhat.operator.archive` itself does per attempt: the keys, the
transcript assembled under its header, the record built from the pod and dumped as JSON,
the metrics. The S3 PUTs are `bench/s3_put.py`'s; the log GET and the rest of a trial's
path are `bench/throughput.py --archive`'s. `--profile` prints where the time goes.

    python bench/archive_cpu.py --attempts 20000 --repeat 5
    python bench/archive_cpu.py --profile
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # NB: this tree's passhat

from passhat.operator.archive import Archiver, RecordedAttempt  # noqa: E402
from passhat.operator.pods import EvalRef, PodKey  # noqa: E402
from passhat.trials.outcomes import Outcome, Verdict  # noqa: E402

POD = ROOT / "tests" / "fixtures" / "pods" / "kwok_exit0.json"


class _Logs:
    def __init__(self, log: bytes) -> None:
        self.log = log

    def read_pod_log(self, namespace: str, name: str, container: str, limit_bytes: int) -> bytes:
        return self.log[:limit_bytes]


class _NullStore:
    def put(self, key: str, data: bytes) -> None:
        pass

    def get(self, key: str) -> bytes | None:
        return None

    def exists(self, key: str) -> bool:
        return False

    def list(self, prefix: str) -> Iterator[str]:
        return iter(())

    def describe(self) -> str:
        return "nowhere"


def _run(archiver: Archiver, pod: Mapping[str, Any], start: int, count: int) -> None:
    ref = EvalRef("bench", "archive-cpu", "uid-1")
    manifest = {"kind": "ConsistencyEval", "taskIds": [f"t{i}" for i in range(100)]}
    for i in range(start, start + count):
        archiver.archive(
            ref,
            pod=pod,
            attempt=RecordedAttempt(
                f"t{i % 100}",
                PodKey(i % 100, i // 100, 1),
                Verdict(Outcome.PASS, "exit_code"),
                True,
            ),
            manifest=manifest,
            main_container="trial",
            fresh=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempts", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--transcript-kib", type=int, default=100)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one set")
    args = parser.parse_args()
    pod = json.loads(POD.read_text())
    archiver = Archiver(_NullStore(), _Logs(os.urandom(args.transcript_kib * 1024)))
    _run(archiver, pod, 0, 200)
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(_run, archiver, pod, 0, args.attempts)
        pstats.Stats(profile, stream=sys.stderr).sort_stats("tottime").print_stats(12)
    per_attempt = []
    for _ in range(args.repeat):
        cpu = time.process_time()
        _run(archiver, pod, 0, args.attempts)
        per_attempt.append((time.process_time() - cpu) / args.attempts * 1e6)
    print(
        json.dumps(
            {
                "attempts": args.attempts,
                "transcript_kib": args.transcript_kib,
                "cpu_us_per_attempt": round(statistics.median(per_attempt), 2),
                "cpu_us_per_attempt_runs": [round(x, 2) for x in per_attempt],
                "load_avg": [round(x, 2) for x in os.getloadavg()],
            }
        )
    )


if __name__ == "__main__":
    main()
