"""What one records-API read of an eval's trials costs the operator's process.

The records API (`passhat.operator.records_api`) runs in the operator's process and builds
each `trials` answer whole in memory; this prints, for an eval of `--records` archived
attempts (records as the archiver writes them, in a file store), one read's CPU and wall
time, the answer's size and the peak RSS it added, measured in a fresh interpreter per
read so the numbers are not one read's leftovers. A read answers one page (at most
`PAGE_RECORDS`); run it from a tree before paging (`PYTHONPATH=OLD`) to see a whole eval
in one answer. Why: it sizes the pages and the read slots (docs/security.md).

    python bench/records_read.py --records 20000 --repeat 3
    python bench/records_read.py --smoke

The last output line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NAMESPACE, NAME, UID = "team-a", "big", "uid-1"
CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def write_store(root: str, records: int) -> None:
    """An archived eval of `records` attempts, 100 trials a task, the archiver's fields."""
    from passhat.records import FileStore, StoreLayout

    store = FileStore(root)
    layout = StoreLayout(NAMESPACE, NAME, UID)
    tasks = [f"task-{index:05d}" for index in range(max(1, records // 100))]
    manifest = {"namespace": NAMESPACE, "name": NAME, "uid": UID, "taskIds": tasks}
    store.put(layout.eval_key, json.dumps(manifest).encode())
    for index in range(records):
        task, trial = divmod(index, 100)
        record = {
            "task_id": tasks[task],
            "trial": trial,
            "attempt": 0,
            "outcome": "pass",
            "reason": "exit_code",
            "exit_code": 0,
            "duration_s": 12.345,
            "final": True,
            "pod": f"{NAME}-abcdef-t{task}-{trial}-a0",
            "node": "kwok-node-0",
            "started_at": "2026-12-05T07:00:00Z",
            "finished_at": "2026-12-05T07:00:12Z",
            "log_bytes": 102400,
            "log_truncated": False,
        }
        store.put(layout.record_key(task, trial, 0), json.dumps(record).encode())


def read_once(root: str) -> dict[str, Any]:
    """One `trials` read in this process: the numbers, as a dict."""
    from email.message import Message

    from passhat.operator.records_api import RecordsApi, RequestHeaderConfig
    from passhat.records import FileStore

    class Access:
        def get_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
            return None

        def get_eval(self, namespace: str, name: str) -> dict[str, Any] | None:
            return {"metadata": {"name": name, "uid": UID}}

        def create_access_review(self, body: Any) -> dict[str, Any]:
            return {"status": {"allowed": True}}

    api = RecordsApi(store=FileStore(root), access=Access(), config=RequestHeaderConfig(CA))
    headers = Message()
    headers["X-Remote-User"] = "alice"
    path = f"/apis/records.passhat.dev/v1alpha1/namespaces/{NAMESPACE}/evals/{NAME}/trials"
    peer = {"subject": ((("commonName", "front-proxy-client"),),)}
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    wall, cpu = time.perf_counter(), time.process_time()
    answer = api.handle("GET", path, headers, peer)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert answer.code == 200, answer.body[:300]
    page = json.loads(answer.body)
    return {
        "records_in_answer": len(page["records"]),
        "cpu_seconds": round(cpu, 3),
        "wall_seconds": round(wall, 3),
        "body_mib": round(len(answer.body) / 2**20, 2),
        "peak_rss_added_mib": round((rss_after - rss_before) / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="500 records, one read")
    parser.add_argument("--read", help=argparse.SUPPRESS)  # NB: the child's mode
    args = parser.parse_args()
    if args.read:
        print(json.dumps(read_once(args.read)))
        return
    records, repeat = (500, 1) if args.smoke else (args.records, args.repeat)
    with tempfile.TemporaryDirectory() as root:
        started = time.perf_counter()
        write_store(root, records)
        print(f"wrote {records} records in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        runs = []
        for _ in range(repeat):
            proc = subprocess.run(
                [sys.executable, __file__, "--read", root],
                capture_output=True,
                text=True,
                check=True,
            )
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(runs[-1], file=sys.stderr)
    keys = ("cpu_seconds", "wall_seconds", "body_mib", "peak_rss_added_mib")
    result: dict[str, Any] = {"records": records, "repeat": repeat}
    result.update({key: statistics.median(run[key] for run in runs) for key in keys})
    answered = runs[0]["records_in_answer"]
    result["records_in_answer"] = answered
    result["cpu_us_per_record"] = round(1e6 * result["cpu_seconds"] / answered, 1)
    result["rss_kib_per_record"] = round(1024 * result["peak_rss_added_mib"] / answered, 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
