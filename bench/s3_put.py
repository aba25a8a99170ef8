"""What one archived attempt costs the operator in its S3 client: boto3 against passhat's own.

Per attempt the operator PUTs a transcript (100 KiB here, `--transcript-kib`) and a
record (2 KiB, `--record-kib`) to the record store. This script times exactly that
against the test cluster's S3 server (SeaweedFS, `.cluster/s3.env`) with two clients:

- `boto3`: the store as it was until session 12 (boto3 S3 client, path-style, standard
  retries, pool of 32, checksums only when required, Content-MD5 on every PUT);
- `passhat`: `passhat.records.s3.S3Store` as it is now (passhat.records.s3client).

Each (client, repeat) runs in a fresh interpreter, so imports and caches start cold and
the two clients never share a process; the order alternates between repeats. A child
measures its own CPU (`time.process_time`, all threads) and resident memory (`VmRSS`)
at each stage: interpreter up, client module imported, client created, first attempt
done (the first request loads what a client loads lazily), all attempts done. CPU per
attempt is over `--attempts` attempts after `--warmup` untimed ones. The objects go
below `passhat-bench/s3put-<random>/` and are deleted at the end.

    source .cluster/s3.env   # or let the script read .cluster/s3.env itself
    python bench/s3_put.py --attempts 300 --repeat 5
    python bench/s3_put.py --attempts 300 --repeat 3 --threads 16   # as the release threads
    python bench/s3_put.py --context operator   # RSS on top of the operator's own modules
    python bench/s3_put.py --smoke

The last line of output is one JSON object; the table goes to stderr.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # NB: this tree's passhat, in this process as in the children
ENV_FILE = ROOT / ".cluster" / "s3.env"
ENV_NAMES = (
    "PASSHAT_S3_ENDPOINT",
    "PASSHAT_S3_BUCKET",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
)
CLIENTS = ("boto3", "passhat")


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _make_put(
    client: str, *, endpoint: str, bucket: str, region: str
) -> Callable[[str, bytes], None]:
    """`put(key, data)` of `client`, built the way the operator builds its store."""
    if client == "boto3":
        import base64
        import hashlib

        import boto3
        import botocore.config

        mark("import")
        config = botocore.config.Config(
            region_name=region,
            connect_timeout=3.0,
            read_timeout=30.0,
            retries={"mode": "standard", "total_max_attempts": 3},
            s3={"addressing_style": "path"},
            max_pool_connections=32,
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        s3: Any = boto3.session.Session().client("s3", endpoint_url=endpoint, config=config)
        mark("create")

        def put_boto3(key: str, data: bytes) -> None:
            md5 = base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()
            s3.put_object(Bucket=bucket, Key=key, Body=data, ContentMD5=md5)

        return put_boto3
    from passhat.records.s3 import S3Store

    mark("import")
    store = S3Store(bucket=bucket, endpoint=endpoint, region=region)
    mark("create")
    return store.put


_MARKS: list[tuple[str, float, int]] = []


def mark(stage: str) -> None:
    """Note CPU seconds and RSS KiB at the end of `stage`."""
    _MARKS.append((stage, time.process_time(), _rss_kib()))


def child(args: argparse.Namespace) -> None:
    """One client in this fresh process: the stages, then the timed attempts."""
    # NB: what the process holds before the client is imported: passhat.records (any
    # process that opens a store has it), or the whole operator (kubernetes, kopf,
    # urllib3 among them), so the stages show what the store adds to that.
    if args.context == "operator":
        import passhat.operator.main
    else:
        import passhat.records  # noqa: F401
    mark("start")
    put = _make_put(
        args.child,
        endpoint=os.environ["PASSHAT_S3_ENDPOINT"],
        bucket=os.environ["PASSHAT_S3_BUCKET"],
        region=os.environ["AWS_DEFAULT_REGION"],
    )
    transcript = os.urandom(args.transcript_kib * 1024)
    record = (json.dumps({"pad": "r" * (args.record_kib * 1024 - 12)}) + "\n").encode()
    base = f"{args.prefix}/{args.child}"

    def attempt(i: int) -> None:
        put(f"{base}/transcripts/{i}.log", transcript)
        put(f"{base}/attempts/{i}.json", record)

    attempt(0)
    mark("first attempt")
    for i in range(1, args.warmup + 1):
        attempt(i)
    first = args.warmup + 1
    cpu0, wall0, times0 = time.process_time(), time.perf_counter(), os.times()
    numbers = range(first, first + args.attempts)
    if args.threads == 1:
        for i in numbers:
            attempt(i)
    else:
        with ThreadPoolExecutor(args.threads) as pool:
            list(pool.map(attempt, numbers))
    cpu, wall, times = time.process_time() - cpu0, time.perf_counter() - wall0, os.times()
    mark("all attempts")
    stages = {}
    for (_, cpu_before, _), (stage, cpu_after, rss) in itertools.pairwise(_MARKS):
        stages[stage] = {"cpu_ms": round((cpu_after - cpu_before) * 1000, 2), "rss_kib": rss}
    print(
        json.dumps(
            {
                "client": args.child,
                "start_rss_kib": _MARKS[0][2],
                "stages": stages,
                "attempts": args.attempts,
                "cpu_ms_per_attempt": round(cpu / args.attempts * 1000, 3),
                # NB: user = Python and hashing; system = the kernel sending and receiving
                "user_ms_per_attempt": round((times.user - times0.user) / args.attempts * 1000, 3),
                "system_ms_per_attempt": round(
                    (times.system - times0.system) / args.attempts * 1000, 3
                ),
                "wall_ms_per_attempt": round(wall / args.attempts * 1000, 3),
            }
        )
    )


def _environment() -> dict[str, str]:
    """The S3 server's variables: from the environment when sourced, else the file."""
    env = {name: os.environ[name] for name in ENV_NAMES if os.environ.get(name)}
    if len(env) < len(ENV_NAMES):
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from throughput import read_env_file

        if not ENV_FILE.is_file():
            sys.exit(f"no {ENV_FILE}: run hack/cluster/up.sh (it starts the S3 server)")
        env = {name: value for name, value in read_env_file(ENV_FILE).items() if name in ENV_NAMES}
    missing = [name for name in ENV_NAMES if not env.get(name)]
    if missing:
        sys.exit(f"the S3 server's settings lack {', '.join(missing)}")
    return env


def _machine() -> dict[str, Any]:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "?",
    )
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "python": sys.version.split()[0],
        "commit": commit,
        "load_avg_before": [round(x, 2) for x in os.getloadavg()],
    }


def _delete_prefix(env: dict[str, str], prefix: str) -> int:
    from passhat.records.s3 import S3Store

    os.environ.update(env)

    store = S3Store(
        bucket=env["PASSHAT_S3_BUCKET"],
        endpoint=env["PASSHAT_S3_ENDPOINT"],
        region=env["AWS_DEFAULT_REGION"],
    )
    keys = list(store.list(prefix + "/"))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda key: store.client.delete_object(store.bucket, key), keys))
    return len(keys)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempts", type=int, default=300, help="timed attempts per child")
    parser.add_argument("--warmup", type=int, default=20, help="untimed attempts first")
    parser.add_argument("--repeat", type=int, default=3, help="children per client")
    parser.add_argument("--threads", type=int, default=1, help="threads putting at once")
    parser.add_argument("--transcript-kib", type=int, default=100)
    parser.add_argument("--record-kib", type=int, default=2)
    parser.add_argument("--clients", default=",".join(CLIENTS), help="boto3,passhat")
    parser.add_argument(
        "--context",
        choices=("records", "operator"),
        default="records",
        help="loaded before the client: passhat.records, or the operator's modules",
    )
    parser.add_argument("--smoke", action="store_true", help="5 attempts, 1 repeat (CI)")
    parser.add_argument("--child", choices=CLIENTS, help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.smoke:
        args.attempts, args.warmup, args.repeat = 5, 1, 1
    env = _environment()
    clients = [name for name in args.clients.split(",") if name]
    info = _machine()
    prefix = f"passhat-bench/s3put-{secrets.token_hex(4)}"
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in clients}
    try:
        for repeat in range(args.repeat):
            order = clients if repeat % 2 == 0 else clients[::-1]
            for name in order:
                command = [
                    sys.executable,
                    __file__,
                    *("--child", name, "--prefix", f"{prefix}/r{repeat}"),
                    *("--attempts", str(args.attempts), "--warmup", str(args.warmup)),
                    *("--threads", str(args.threads), "--context", args.context),
                    *("--transcript-kib", str(args.transcript_kib)),
                    *("--record-kib", str(args.record_kib)),
                ]
                proc = subprocess.run(
                    command,
                    env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if proc.returncode != 0:
                    sys.exit(f"{name} child failed:\n{proc.stderr[-3000:]}")
                run = json.loads(proc.stdout.strip().splitlines()[-1])
                runs[name].append(run)
                print(
                    f"repeat {repeat} {name:8s} cpu/attempt {run['cpu_ms_per_attempt']:7.3f} ms"
                    f" (user {run['user_ms_per_attempt']:6.3f}, system"
                    f" {run['system_ms_per_attempt']:6.3f})"
                    f"  wall/attempt {run['wall_ms_per_attempt']:7.3f} ms"
                    f"  rss after create {run['stages']['create']['rss_kib'] / 1024:6.1f} MiB",
                    file=sys.stderr,
                )
    finally:
        deleted = _delete_prefix(env, prefix)
    info["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    summary: dict[str, Any] = {}
    for name, items in runs.items():

        def median(
            pick: Callable[[dict[str, Any]], float], items: list[dict[str, Any]] = items
        ) -> float:
            return round(statistics.median(pick(run) for run in items), 3)

        summary[name] = {
            "cpu_ms_per_attempt": median(lambda run: run["cpu_ms_per_attempt"]),
            "cpu_ms_per_attempt_runs": [run["cpu_ms_per_attempt"] for run in items],
            "user_ms_per_attempt": median(lambda run: run["user_ms_per_attempt"]),
            "system_ms_per_attempt": median(lambda run: run["system_ms_per_attempt"]),
            "wall_ms_per_attempt": median(lambda run: run["wall_ms_per_attempt"]),
            "start_rss_mib": median(lambda run: run["start_rss_kib"] / 1024),
            "import_rss_mib": median(
                lambda run: (run["stages"]["import"]["rss_kib"] - run["start_rss_kib"]) / 1024
            ),
            "create_rss_mib": median(
                lambda run: (
                    (run["stages"]["create"]["rss_kib"] - run["stages"]["import"]["rss_kib"]) / 1024
                )
            ),
            "first_attempt_rss_mib": median(
                lambda run: (
                    (run["stages"]["first attempt"]["rss_kib"] - run["stages"]["create"]["rss_kib"])
                    / 1024
                )
            ),
            "end_rss_mib": median(lambda run: run["stages"]["all attempts"]["rss_kib"] / 1024),
            "import_cpu_ms": median(lambda run: run["stages"]["import"]["cpu_ms"]),
            "create_cpu_ms": median(lambda run: run["stages"]["create"]["cpu_ms"]),
            "first_attempt_cpu_ms": median(lambda run: run["stages"]["first attempt"]["cpu_ms"]),
        }
    for name, figures in summary.items():
        print(f"{name}: {json.dumps(figures)}", file=sys.stderr)
    result = {
        "attempts": args.attempts,
        "repeat": args.repeat,
        "threads": args.threads,
        "context": args.context,
        "transcript_kib": args.transcript_kib,
        "record_kib": args.record_kib,
        "objects_deleted": deleted,
        "clients": summary,
        "machine": info,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
