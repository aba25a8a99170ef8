"""The cluster benchmark works: `bench/throughput.py --smoke` runs both sides to completion.

Benchmarks are not timed tests; this only checks that the script still runs against the
current operator and cluster and prints the JSON line `docs/benchmarks.md` relies on.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
KEYS = {
    "trials",
    "parallelism",
    "operator_seconds",
    "job_seconds",
    "operator_api_writes_per_trial",
    "job_api_writes_per_trial",
    "operator_rss_mib",
    "operator_cpu_seconds",
    "throughput_ratio",
    "operator_apiserver_cpu_s",
    "job_apiserver_cpu_s",
    "operator_passes",
    "machine",
}

pytestmark = pytest.mark.cluster


def run_bench(script: str, *args: str, timeout: int) -> dict[str, Any]:
    """Run `bench/<script> <args>`; its last stdout line, the result JSON (exit 0 asserted)."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-5000:]}"
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.slow
def test_throughput_smoke_completes_both_sides(cluster: Any) -> None:
    """A smoke run completes the eval and the Indexed Job and ends with the result JSON."""
    result = run_bench("throughput.py", "--smoke", timeout=840)
    assert not KEYS - result.keys(), f"missing keys: {sorted(KEYS - result.keys())}"
    assert (result["trials"], result["parallelism"]) == (20, 10)
    assert result["operator_seconds"] > 0 and result["job_seconds"] > 0
    assert result["operator_api_writes_per_trial"] > 0 and result["job_api_writes_per_trial"] > 0
    assert result["operator_rss_mib"] > 0
    assert result["operator_apiserver_cpu_s"] >= 0 and result["job_apiserver_cpu_s"] >= 0
    assert result["operator_passes"]["passes"] > 0


@pytest.mark.slow
def test_throughput_archive_smoke_archives_every_attempt(cluster: Any, s3_server: Any) -> None:
    """`--smoke --archive` runs the operator with and without the record store (the
    cluster's S3 server) on kwok pods that log 100 KiB each: every attempt's record and
    whole transcript are in the store (the benchmark counts them), and the prefix is gone
    afterwards."""
    result = run_bench("throughput.py", "--smoke", "--archive", timeout=840)
    assert not KEYS - result.keys(), f"missing keys: {sorted(KEYS - result.keys())}"
    assert result["archive"] is True and result["transcript_kib"] == 100
    assert result["records_match_attempts"] is True
    assert result["records_archived"] == result["archive_attempts"]
    assert min(result["records_archived"]) >= 20
    assert result["transcript_bytes_min"] >= 100 * 1024
    assert result["operator_archive_seconds"] > 0 and result["archive_overhead"] > 0
    assert result["store_prefixes"]
    for prefix in result["store_prefixes"]:
        left = s3_server.client().list_objects_v2(Bucket=s3_server.bucket, Prefix=prefix)
        assert not left.get("Contents"), f"the benchmark left objects below {prefix}"


def test_s3_put_smoke_times_both_clients(cluster: Any, s3_server: Any) -> None:
    """`bench/s3_put.py --smoke` PUTs through boto3 and passhat's client against the
    cluster's S3 server, reports CPU and RSS for both, and deletes what it wrote."""
    result = run_bench("s3_put.py", "--smoke", timeout=300)
    assert set(result["clients"]) == {"boto3", "passhat"}
    for figures in result["clients"].values():
        assert figures["cpu_ms_per_attempt"] > 0 and figures["end_rss_mib"] > 0
    # 2 objects per attempt: the first, 1 warm-up and 5 timed, per client
    assert result["objects_deleted"] == 2 * 2 * 7
    left = s3_server.client().list_objects_v2(
        Bucket=s3_server.bucket, Prefix="passhat-bench/s3put-"
    )
    assert not left.get("Contents"), "the benchmark left objects behind"


def test_write_cost_smoke_prices_every_variant(cluster: Any) -> None:
    """`bench/write_cost.py --smoke` creates and patches its pods and prints the CPU per
    write of every variant, for the API server and the pod watchers."""
    result = run_bench("write_cost.py", "--smoke", timeout=300)
    variants = {"create/job", "create/operator"} | {
        f"patch/{name}" for name in ("job", "operator", "uid", "label")
    }
    assert set(result["cpu_us_per_write"]) == variants
    for costs in result["cpu_us_per_write"].values():
        assert set(costs) == {"kube-apiserver", "etcd", "kube-scheduler", "kwok"} | {
            "kube-controller-manager"
        }
        assert all(value >= 0 for value in costs.values())


def test_job_watcher_smoke_watches_every_job_pod(cluster: Any) -> None:
    """`--sides job --job-watcher`: the operator's pod watch runs on the Job's pods (which
    carry the eval-uid label it selects on) and sees their events, the Job still completes."""
    result = run_bench(
        "throughput.py", "--smoke", "--sides", "job", "--job-watcher", "--runs", "1", timeout=600
    )
    assert result["job_seconds"] > 0
    (events,) = result["job_watcher_events_runs"]
    assert events >= result["trials"]  # NB: at least one event per pod (about five)


def test_request_cost_smoke_prices_every_client(cluster: Any) -> None:
    """`bench/request_cost.py --smoke` reads its ConfigMap from each client (HTTP/2 really
    negotiated where asked for, the token accepted) and prices a request for each."""
    result = run_bench("request_cost.py", "--smoke", timeout=300)
    clients = {"urllib3-h1-cert", "urllib3-h1-token", "httpx-h2-cert", "httpx-h1-cert"}
    assert set(result["apiserver_cpu_us_per_request"]) == clients
    assert set(result["client_wall_us_per_request"]) == clients
    assert all(value >= 0 for value in result["apiserver_cpu_us_per_request"].values())
