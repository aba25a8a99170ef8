"""The operator side by side with the Kubernetes Job controller, on the same cluster, in one run.

A user who does not adopt passhat would run the same trials as a native Indexed Job, so
that is the anchor: N trials through the operator (an eval of N/10 tasks x 10 trials) and
an Indexed Job with N completions, at the same parallelism, on the test cluster's kwok
nodes where every pod ends after the same scripted delay. Running both in one process,
one after the other (alternating which goes first), lets the machine's noise cancel out.

Measured for each side: wall time from create to done (the eval's `Complete` condition,
the Job's `Complete` condition), API write requests per trial issued by that controller
(counted in the API server's audit log by user: the Job controller runs as
`system:serviceaccount:kube-system:job-controller`, the operator is started here with a
token of its own service account so its writes can be told apart from everything else),
and for the operator its peak RSS (VmHWM) and CPU seconds.

`--scale` instead keeps 10,000 trial pods in flight at once (long fake durations) and
reports the operator's peak RSS and the eval's status size.

`--archive` adds a third side: the operator with a record store (the test cluster's S3
server, `.cluster/s3.env`) archiving every attempt's transcript before its pod is let go,
while kwok serves a `--transcript-kib` log for every trial pod (a ClusterLogs object per
namespace; hack/cluster/up.sh makes kwok serve pod logs through the API server). The
operator without and with the archive alternate their order between runs;
`archive_overhead` is the median of the per-run ratios (on / off), and the records in the
store are counted against the attempts. `--scale --archive`: the 10,000 pods end after
`--scale-duration-s` and are archived while the others are still tracked; the operator's
peak RSS covers the whole run. `--smoke` is a tiny run that
the cluster test suite uses to check that the benchmark works; it asserts no timing.

Everything is created in namespaces named `passhat-bench-*` and removed afterwards (left-
over finalizers stripped), since the cluster is shared with the test suite. The last line
of output is one JSON object.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import functools
import json
import os
import platform
import re
import secrets
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3
import yaml

from passhat.operator.pods import LABEL_EVAL_UID
from passhat.records.layout import StoreLayout

REPO = Path(__file__).resolve().parents[1]
DEFAULT_KUBECONFIG = REPO / ".cluster" / "kubeconfig"
DEFAULT_AUDIT_LOG = REPO / ".cluster" / "logs" / "audit.log"
# hack/cluster/up.sh records each component's pid here (`<name>.pid`).
DEFAULT_RUN_DIR = REPO / ".cluster" / "run"

BENCH_USER_AGENT = "passhat-bench/1"
JOB_CONTROLLER_USER = "system:serviceaccount:kube-system:job-controller"
OPERATOR_SA = "passhat-bench-operator"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})

EVAL_API = "/apis/passhat.dev/v1alpha1"
# A list of objects as metadata only (a PartialObjectMetadataList).
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
NS_PREFIX = "passhat-bench-"
OWNER_ANNOTATION = "passhat.dev/bench-owner"  # host/pid of the benchmark that made it

# How the test cluster's kwok nodes are reached and how a pod's fake run time is scripted
# (hack/cluster/: kwok nodes are labelled type=kwok and tainted; a Stage ends a pod
# after the duration in this annotation).
KWOK_NODE_SELECTOR = {"type": "kwok"}
KWOK_TOLERATIONS = [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]
DURATION_ANNOTATION = "passhat.dev/fake-duration"
FOREVER_ANNOTATION = "passhat.dev/fake-run-forever"
TRIAL_IMAGE = "localhost/passhat/busybox:test"

TASK_TRIALS = 10  # the operator side runs N/10 tasks x 10 trials
# `passhat operator ...` through the CLI's main(), or straight through run_operator() while
# the CLI has no `operator` subcommand yet.
OPERATOR_LAUNCHER = """
import sys
try:
    from passhat.cli import main
except ImportError:
    from passhat.operator.main import OperatorOptions, run_operator
    args = sys.argv[1:]
    namespaces = [args[i + 1] for i, arg in enumerate(args) if arg == "--namespace"]
    run_operator(OperatorOptions(namespaces=namespaces, metrics_port=0))
else:
    sys.exit(main())
"""
OPERATOR_CMD = (sys.executable, "-c", OPERATOR_LAUNCHER)
CRD_NAME = "consistencyevals.passhat.dev"
# kwok's pod logs (hack/cluster/up.sh runs kwok with the ClusterLogs CRD): one object per
# benchmark namespace, named like it, pointing at a CRI-format log file of the benchmark's.
CLUSTER_LOGS_API = "/apis/kwok.x-k8s.io/v1alpha1/clusterlogs"
CLUSTER_LOGS_CRD = "clusterlogs.kwok.x-k8s.io"
DEFAULT_S3_ENV = REPO / ".cluster" / "s3.env"
S3_ENV_NAMES = (
    "PASSHAT_S3_ENDPOINT",
    "PASSHAT_S3_BUCKET",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
)
LABEL_EVAL = "passhat.dev/eval"
# Trial pods not yet kept (released and labelled recorded) or deleted by the operator.
UNKEPT = "passhat.dev/eval-uid,!passhat.dev/recorded"
CRD_FILE = REPO / "crds" / f"{CRD_NAME}.yaml"


def log(message: str) -> None:
    """Progress for the human (stderr); stdout carries the table and the JSON line."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class BenchError(Exception):
    """A side did not complete, or the cluster is not usable for the benchmark."""


class Restarted(BenchError):
    """A cluster process restarted during a side's window (the cluster is shared: other
    test runs restart the API server): the run is measured again."""


# --------------------------------------------------------------------------- the API


class Kube:
    """A thin JSON client over the kubernetes package (raw paths, no model classes).

    Model classes would cost seconds per list of 10,000 pods; this keeps the benchmark's
    own CPU out of the way of what it measures.
    """

    def __init__(self, kubeconfig: Path) -> None:
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig), client_configuration=cfg
        )
        self.configuration = cfg
        cfg.connection_pool_maxsize = 32
        self.api = client.ApiClient(cfg)
        self.api.user_agent = BENCH_USER_AGENT

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, str] | None = None,
        content_type: str = "application/json",
        missing_ok: bool = False,
        accept: str = "application/json",
    ) -> dict[str, Any] | None:
        """One request; the decoded JSON body, or None for a 404 when `missing_ok`."""
        method, url, headers, _, _ = self.api.param_serialize(
            method,
            path,
            query_params=list((query or {}).items()),
            header_params={"Content-Type": content_type, "Accept": accept},
            auth_settings=["BearerToken"],
        )
        # NB: a shared test cluster's API server may restart under us: retry for a while
        deadline = time.monotonic() + 180
        while True:
            try:
                # NB: the REST layer serializes `body` itself for every JSON content type
                resp = self.api.call_api(
                    method, url, header_params=headers, body=body, _request_timeout=60
                )
                data: bytes = resp.read()  # type: ignore[no-untyped-call]
                status: int = resp.status
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                status, data = 0, str(exc).encode()
            if (status == 0 or status == 429 or status >= 500) and time.monotonic() < deadline:
                time.sleep(1)
                continue
            break
        if status == 404 and missing_ok:
            return None
        if status == 0 or status >= 400:
            raise BenchError(f"{method} {path}: HTTP {status}: {data[:300]!r}")
        out: dict[str, Any] = json.loads(data) if data else {}
        return out

    def get(self, path: str, **query: str) -> dict[str, Any] | None:
        return self.request("GET", path, query=query, missing_ok=True)

    def text(self, path: str) -> str:
        """A plain-text GET (the API server's /metrics)."""
        method, url, headers, _, _ = self.api.param_serialize(
            "GET", path, header_params={"Accept": "text/plain"}, auth_settings=["BearerToken"]
        )
        resp = self.api.call_api(method, url, header_params=headers, _request_timeout=60)
        data: bytes = resp.read()  # type: ignore[no-untyped-call]
        if resp.status != 200:
            raise BenchError(f"GET {path}: HTTP {resp.status}")
        return data.decode()

    def raw(self, path: str, *, timeout: float = 60, **query: str) -> bytes:
        """A GET's body as bytes (the API server's /debug/pprof)."""
        method, url, headers, _, _ = self.api.param_serialize(
            "GET", path, query_params=list(query.items()), auth_settings=["BearerToken"]
        )
        resp = self.api.call_api(method, url, header_params=headers, _request_timeout=timeout)
        data: bytes = resp.read()  # type: ignore[no-untyped-call]
        if resp.status != 200:
            raise BenchError(f"GET {path}: HTTP {resp.status}: {data[:300]!r}")
        return data

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        out = self.request("POST", path, body)
        assert out is not None
        return out

    def merge_patch(self, path: str, body: dict[str, Any]) -> None:
        self.request(
            "PATCH", path, body, content_type="application/merge-patch+json", missing_ok=True
        )

    def delete(self, path: str, **query: str) -> None:
        body = {"propagationPolicy": "Background"}
        self.request("DELETE", path, body, query=query, missing_ok=True)


def free_port() -> int:
    """A TCP port nothing listens on now (for the operator's /metrics)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(
    what: str, check: Callable[[], bool], *, timeout: float, interval: float = 0.25
) -> float:
    """Poll `check` until it holds; the monotonic time it first held. BenchError on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return time.monotonic()
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def condition_true(obj: dict[str, Any] | None, kind: str) -> bool:
    """Whether `obj.status.conditions` has `kind` with status True."""
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


# ------------------------------------------------------------------------ audit log


class AuditWindow:
    """Counts one user's write requests in one namespace, from the API server's audit log.

    The log is JSON lines (hack/cluster/audit-policy.yaml logs every write at Metadata
    level); a request is one event at stage ResponseComplete, audit IDs deduplicated.
    Counting starts where the log ends when the window opens and reads on incrementally,
    following the file across a rotation (the rotated file keeps its inode).
    """

    def __init__(self, path: Path, *, user: str, namespace: str) -> None:
        if not path.exists():
            raise BenchError(f"no audit log at {path} (hack/cluster/up.sh writes it)")
        self.path, self.user, self.namespace = path, user, namespace
        st = path.stat()
        self._inode, self._offset = st.st_ino, st.st_size
        self.counts: Counter[str] = Counter()
        self._seen: set[str] = set()

    def poll(self) -> int:
        """Read what was logged since the last poll; the total count so far."""
        if self.path.stat().st_ino != self._inode:
            rotated = [p for p in self.path.parent.glob("*") if p.stat().st_ino == self._inode]
            if rotated:
                self._read(rotated[0])
            self._inode, self._offset = self.path.stat().st_ino, 0
        self._read(self.path)
        return sum(self.counts.values())

    def _read(self, path: Path) -> None:
        with path.open("rb") as f:
            f.seek(self._offset)
            for line in f:
                if not line.endswith(b"\n"):
                    break  # NB: a line still being written; read it next time
                self._offset += len(line)
                with contextlib.suppress(ValueError):
                    self._count(json.loads(line))

    def _count(self, event: dict[str, Any]) -> None:
        if event.get("stage") != "ResponseComplete" or event.get("verb") not in WRITE_VERBS:
            return
        if (event.get("user") or {}).get("username") != self.user:
            return
        ref = event.get("objectRef") or {}
        if ref.get("namespace") != self.namespace:
            return
        audit_id = event.get("auditID", "")
        if audit_id in self._seen:
            return
        self._seen.add(audit_id)
        resource = ref.get("resource", "?")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        self.counts[f"{event['verb']} {resource}"] += 1

    def wait_quiet(self, quiet_s: float = 3.0, timeout: float = 120) -> Counter[str]:
        """Wait until no new write has been logged for `quiet_s` seconds; the counts."""
        last, since = self.poll(), time.monotonic()
        deadline = since + timeout
        while time.monotonic() < deadline:
            time.sleep(0.5)
            total = self.poll()
            if total != last:
                last, since = total, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                break
        return Counter(self.counts)


# ----------------------------------------------------------------- the operator process


class OperatorProcess:
    """`passhat operator --namespace NS` as a child process, with its CPU and peak RSS."""

    def __init__(
        self,
        *,
        namespace: str,
        kubeconfig: Path,
        log_path: Path,
        settings: list[str],
        extra_args: list[str] | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        env = {
            **os.environ,
            **(extra_env or {}),
            "KUBECONFIG": str(kubeconfig),
            "PYTHONUNBUFFERED": "1",
        }
        self.metrics_port = free_port()
        cmd = [
            *OPERATOR_CMD,
            *("operator", "--namespace", namespace, "--metrics-port", str(self.metrics_port)),
            *(arg for setting in settings for arg in ("--set", setting)),
            *(extra_args or []),
        ]
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the operator so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mib(self) -> float:
        """The operator's peak resident set (VmHWM) in MiB."""
        return self._status_kib("VmHWM") / 1024

    def rss_mib(self) -> float:
        """The operator's resident set now, in MiB."""
        return self._status_kib("VmRSS") / 1024

    def _status_kib(self, field: str) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise BenchError(f"no {field} in /proc/{self.proc.pid}/status")

    def pass_seconds(self) -> dict[str, float]:
        """The operator's reconcile passes so far, from its /metrics histogram: how many,
        their mean, and the median and 90th percentile as the upper bound of the bucket
        they fall in (`passhat_reconcile_duration_seconds`)."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        try:
            text = urllib3.request("GET", url, timeout=10).data.decode()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise BenchError(f"cannot read the operator's metrics at {url}: {exc}") from None
        name = "passhat_reconcile_duration_seconds"
        buckets: list[tuple[float, float]] = []
        total = count = 0.0
        for line in text.splitlines():
            if line.startswith(name + "_bucket{"):
                bound = line.split('le="', 1)[1].split('"', 1)[0]
                buckets.append((float(bound), float(line.rsplit(" ", 1)[1])))
            elif line.startswith(name + "_sum "):
                total = float(line.split()[1])
            elif line.startswith(name + "_count "):
                count = float(line.split()[1])

        def quantile(q: float) -> float:
            return next((bound for bound, seen in buckets if seen >= q * count), float("inf"))

        return {
            "passes": count,
            "mean_s": round(total / count, 3) if count else 0.0,
            "median_le_s": quantile(0.5),
            "p90_le_s": quantile(0.9),
        }

    def stop(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self._log.close()

    def tail(self, lines: int = 20) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


# ------------------------------------------------------------------------ CPU by process

# The cluster's processes whose CPU a side's window is split into (by /proc comm: 15 chars).
CPU_PROCESSES = ("kube-apiserver", "etcd", "kwok", "weed", "kube-controller", "kube-scheduler")


def cpu_snapshot(operator: OperatorProcess | None = None) -> dict[str, float]:
    """CPU seconds so far of the cluster's processes, the operator, and the machine (busy:
    all but idle and iowait in /proc/stat), to subtract two snapshots."""
    tck = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = dict.fromkeys(CPU_PROCESSES, 0.0)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            head, _, rest = stat.read_text().rpartition(")")
            name = head.split("(", 1)[1]
            if name in out:
                fields = rest.split()
                out[name] += (int(fields[11]) + int(fields[12])) / tck
    if operator is not None and operator.alive():
        out["operator"] = operator.cpu_seconds()
    cpu = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    out["machine_busy"] = (sum(cpu) - cpu[3] - cpu[4]) / tck
    return out


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds spent between two snapshots, by process; `other` is the machine's busy
    time not spent by the listed processes (other work, the benchmark itself)."""
    delta = {k: round(after.get(k, 0.0) - v, 2) for k, v in before.items()}
    delta["other"] = round(
        delta["machine_busy"] - sum(v for k, v in delta.items() if k != "machine_busy"), 2
    )
    return delta


class ClusterProcess:
    """One component of the test cluster by the pid hack/cluster/up.sh recorded for it
    (`.cluster/run/<name>.pid`): its CPU seconds and memory, read from /proc.

    The API server is shared by every client of the cluster, the benchmark's own polling
    included, so a side's window is charged what the API server spent in it minus its
    idle rate, measured just before the window (`idle_rate`)."""

    def __init__(self, run_dir: Path, name: str) -> None:
        self.name = name
        pid_file = run_dir / f"{name}.pid"
        try:
            self.pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            raise BenchError(f"no pid of {name} in {pid_file} (hack/cluster/up.sh)") from None
        if not Path(f"/proc/{self.pid}/stat").exists():
            raise BenchError(f"{name} (pid {self.pid} in {pid_file}) is not running")

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the process so far (Restarted once it is gone)."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            raise Restarted(f"{self.name} (pid {self.pid}) exited during the window") from None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mib(self) -> float:
        """Resident set now, in MiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def idle_rate(self, seconds: float = 5.0, *, quiet: float = 0.1, wait_s: float = 60.0) -> float:
        """CPU seconds per second the process spends while this benchmark asks nothing of
        it (other clients of the shared cluster, its own housekeeping): the lowest of
        `seconds`-long samples, taken until one is under `quiet` or `wait_s` have passed.

        NB: one sample right before a window used to catch the end of the previous side's
        teardown or the warm-up eval's deletion (0.4 s/s against 0.025 s/s idle, measured
        on this cluster), and subtracting that from the window made a side look cheap."""
        lowest, deadline = float("inf"), time.monotonic() + wait_s
        while True:
            before, start = self.cpu_seconds(), time.monotonic()
            time.sleep(seconds)
            rate = (self.cpu_seconds() - before) / (time.monotonic() - start)
            lowest = min(lowest, rate)
            if rate < quiet or time.monotonic() >= deadline:
                if rate >= quiet:
                    log(f"{self.name} not quiet before the window: {lowest:.3f} CPU s/s")
                return lowest


@dataclass
class CpuWindow:
    """A process's CPU over one side's window, net of its idle rate before the window."""

    process: ClusterProcess
    idle_per_s: float
    cpu0: float = 0.0
    start: float = 0.0
    total_s: float = 0.0
    seconds: float = 0.0

    @classmethod
    def open(cls, process: ClusterProcess) -> CpuWindow:
        window = cls(process, process.idle_rate())
        window.cpu0, window.start = process.cpu_seconds(), time.monotonic()
        return window

    def close(self) -> None:
        self.total_s = self.process.cpu_seconds() - self.cpu0
        self.seconds = time.monotonic() - self.start

    @property
    def net_s(self) -> float:
        """CPU seconds in the window beyond the idle rate (not below 0)."""
        return max(0.0, self.total_s - self.idle_per_s * self.seconds)

    def summary(self) -> dict[str, float]:
        return {
            "cpu_s": round(self.total_s, 2),
            "net_cpu_s": round(self.net_s, 2),
            "idle_cpu_per_s": round(self.idle_per_s, 3),
            "window_s": round(self.seconds, 1),
        }


class MemorySampler:
    """The peak resident set of cluster processes over a window, sampled every `every_s`
    from a thread (`with MemorySampler(...) as sampler:`)."""

    def __init__(self, processes: list[ClusterProcess], every_s: float = 2.0) -> None:
        import threading

        self.processes, self.every_s = processes, every_s
        self.peak_mib: dict[str, float] = {p.name: 0.0 for p in processes}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self._sample()

    def _sample(self) -> None:
        for process in self.processes:
            with contextlib.suppress(OSError):
                rss = process.rss_mib()
                self.peak_mib[process.name] = max(self.peak_mib[process.name], rss)


class ApiProfile:
    """The API server's Go CPU profile over the first `seconds` of a side's window.

    `--profile DIR` asks the API server's /debug/pprof/profile (it must run with
    `--profiling=true`: `PASSHAT_APISERVER_PROFILING=true hack/cluster/up.sh`) in a thread
    opened with the side's window, and writes `DIR/<side>-run<n>.pprof`; read them with
    `go tool pprof -top DIR/operator-run1.pprof`. Give both sides the same `seconds`, no
    longer than the faster side's window, so that the two profiles cover equal busy time."""

    def __init__(self, kube: Kube, path: Path, seconds: int) -> None:
        self.path, self.error = path, ""
        path.parent.mkdir(parents=True, exist_ok=True)

        def fetch() -> None:
            try:
                data = kube.raw("/debug/pprof/profile", timeout=seconds + 60, seconds=str(seconds))
                path.write_bytes(data)
            except Exception as exc:  # reported by close(), never fatal
                self.error = str(exc)

        self._thread = threading.Thread(target=fetch, name="apiserver-pprof", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._thread.join()
        if self.error:
            log(f"the API server's profile failed: {self.error}")
        else:
            log(f"the API server's CPU profile: {self.path}")


def start_profile(args: argparse.Namespace, kube: Kube, side: str, i: int) -> ApiProfile | None:
    if args.profile is None:
        return None
    return ApiProfile(kube, args.profile / f"{side}-run{i + 1}.pprof", args.profile_seconds)


def storage_objects(kube: Kube) -> dict[str, float]:
    """What the API server's storage holds (its /metrics): objects of the resources that
    grow with an eval, and the etcd database size."""
    # NB: Kubernetes v1.34's names (apiserver_storage_objects before), updated about once
    # a minute by the API server
    wanted = {
        'apiserver_resource_objects{group="",resource="pods"}': "pods",
        'apiserver_resource_objects{group="",resource="events"}': "events",
        'apiserver_resource_objects{group="passhat.dev",resource="consistencyevals"}': "evals",
        'apiserver_resource_size_estimate_bytes{group="",resource="pods"}': "pods_bytes",
    }
    out: dict[str, float] = {}
    with contextlib.suppress(BenchError, urllib3.exceptions.HTTPError, OSError):
        for line in kube.text("/metrics").splitlines():
            key, _, value = line.rpartition(" ")
            if key in wanted:
                out[wanted[key]] = float(value)
            elif key.startswith("apiserver_storage_size_bytes"):
                out["etcd_db_mib"] = round(float(value) / 2**20, 1)
    return out


_LABEL = re.compile(r'(\w+)="([^"]*)"')


def request_counts(kube: Kube) -> Counter[str]:
    """The API server's requests so far by verb and resource (`apiserver_request_total`),
    as "VERB resource[/subresource]", and its requests to etcd (`etcd_request_duration_
    seconds_count`) as "etcd operation resource": a side's window is the difference of two.
    Every client's requests are in it (the benchmark's own polls too), so it is read
    beside the audit log's per-user writes, not instead of them."""
    out: Counter[str] = Counter()
    with contextlib.suppress(BenchError, urllib3.exceptions.HTTPError, OSError):
        for line in kube.text("/metrics").splitlines():
            if line.startswith("etcd_request_duration_seconds_count{"):
                # NB: what the API server asked etcd for ("etcd get pods"): its own reads
                # (an update whose cached object was stale reads it again) show here only
                key, _, value = line.rpartition(" ")
                labels = dict(_LABEL.findall(key))
                out[f"etcd {labels.get('operation')} {labels.get('resource')}"] += int(float(value))
                continue
            if not line.startswith("apiserver_request_total{"):
                continue
            key, _, value = line.rpartition(" ")
            labels = dict(_LABEL.findall(key))
            resource = labels.get("resource", "")
            if labels.get("subresource"):
                resource += "/" + labels["subresource"]
            out[f"{labels.get('verb', '?')} {resource or labels.get('path', '-')}"] += int(
                float(value)
            )
    return out


def request_delta(before: Counter[str], after: Counter[str]) -> dict[str, int]:
    """The requests of a window, largest first, at least 10 each (the rest is noise)."""
    delta = after - before
    return {key: n for key, n in delta.most_common() if n >= 10}


# ------------------------------------------------------------------- the record store


def read_env_file(path: Path) -> dict[str, str]:
    """The `export NAME=value` lines of a shell file (up.sh's `.cluster/s3.env`)."""
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["export"] and len(words) == 2 and "=" in words[1]:
            name, _, value = words[1].partition("=")
            values[name] = value
    return values


class ArchiveStore:
    """The test cluster's S3 server as the operator's record store, below `prefix`.

    Each sandbox archives below a sub-prefix of its own (its namespace) and deletes it in
    its teardown; the credentials go to the operator's environment, never to output.
    """

    def __init__(self, env_file: Path, prefix: str = "passhat-bench") -> None:
        if not env_file.is_file():
            raise BenchError(f"no {env_file}: hack/cluster/up.sh writes it with the S3 server")
        env = read_env_file(env_file)
        missing = [name for name in S3_ENV_NAMES if not env.get(name)]
        if missing:
            raise BenchError(f"{env_file} lacks {', '.join(missing)}")
        import boto3
        import botocore.config

        self.env = {name: env[name] for name in S3_ENV_NAMES}
        self.endpoint, self.bucket = env["PASSHAT_S3_ENDPOINT"], env["PASSHAT_S3_BUCKET"]
        self.region, self.prefix = env["AWS_DEFAULT_REGION"], prefix.strip("/")
        self.client = boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            config=botocore.config.Config(
                s3={"addressing_style": "path"},
                connect_timeout=3,
                read_timeout=30,
                retries={"max_attempts": 3},
            ),
        )

    def check(self) -> None:
        """A put and a delete work (BenchError naming the endpoint otherwise)."""
        key = f"{self.prefix}/probe-{secrets.token_hex(4)}"
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=b"probe")
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except Exception as exc:  # NB: boto3's and botocore's errors share no base class
            raise BenchError(f"the S3 store at {self.endpoint} does not work: {exc}") from None

    def operator_args(self, sub: str) -> list[str]:
        return [
            *("--records-store", f"s3://{self.bucket}/{self.prefix}/{sub}"),
            *("--records-s3-endpoint", self.endpoint, "--records-s3-region", self.region),
        ]

    def operator_env(self) -> dict[str, str]:
        # NB: boto3 must never look for credentials off this machine
        return {**self.env, "AWS_EC2_METADATA_DISABLED": "true"}

    def objects(self, sub: str) -> dict[str, int]:
        """key (below `sub`) -> size of every object below `sub`."""
        base = f"{self.prefix}/{sub}/"
        found: dict[str, int] = {}
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=base
            ):
                for item in page.get("Contents") or []:
                    found[item["Key"][len(base) :]] = int(item["Size"])
        except Exception as exc:  # NB: boto3's and botocore's errors share no base class
            raise BenchError(f"listing {base} in the S3 store failed: {exc}") from None
        return found

    def delete(self, sub: str) -> None:
        """Delete every object below `sub` (BenchError if the store fails)."""
        keys = [f"{self.prefix}/{sub}/{key}" for key in self.objects(sub)]
        try:
            for i in range(0, len(keys), 1000):
                self.client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": key} for key in keys[i : i + 1000]]},
                )
        except Exception as exc:  # NB: as above
            raise BenchError(f"deleting below {self.prefix}/{sub}/ failed: {exc}") from None


@dataclass
class Archived:
    """What the store holds of one eval: its attempt records and transcript sizes."""

    records: int
    transcript_bytes: list[int]


def archived(store: ArchiveStore, sub: str, namespace: str, eval_name: str) -> Archived:
    """Count eval `eval_name`'s records (any uid) in the store."""
    prefix = StoreLayout.evals_prefix(namespace, eval_name)
    records, sizes = 0, []
    for key, size in store.objects(sub).items():
        if not key.startswith(prefix):
            continue
        if StoreLayout.parse_record_key(key) is not None:
            records += 1
        elif "/transcripts/" in key:
            sizes.append(size)
    return Archived(records, sorted(sizes))


def write_cri_log(path: Path, size: int) -> Path:
    """A container log in the CRI format (what kwok reads, like a kubelet) whose content
    is `size` bytes of text lines."""
    stamp = "2026-01-01T00:00:00.000000000Z stdout F "
    lines, left, i = [], size, 0
    while left > 0:
        text = f"transcript line {i:06d} " + "x" * 80
        text = text[: min(len(text), left - 1)]
        lines.append(stamp + text + "\n")
        left -= len(text) + 1
        i += 1
    path.write_text("".join(lines))
    path.chmod(0o644)
    return path


def create_cluster_logs(kube: Kube, namespace: str, log_file: Path) -> None:
    """Make kwok serve `log_file` as the log of every container in `namespace`."""
    if (
        kube.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CLUSTER_LOGS_CRD}")
        is None
    ):
        raise BenchError(
            f"no {CLUSTER_LOGS_CRD} CRD: kwok serves no pod logs (run hack/cluster/up.sh)"
        )
    kube.create(
        CLUSTER_LOGS_API,
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "ClusterLogs",
            "metadata": {"name": namespace},
            "spec": {
                "selector": {"matchNamespaces": [namespace]},
                "logs": [{"logsFile": str(log_file)}],
            },
        },
    )


# ------------------------------------------------------------------------ namespaces


@dataclass
class Sandbox:
    """A namespace of the benchmark's own, and (for the operator) its identity."""

    kube: Kube
    namespace: str
    workdir: Path
    binding: str | None = None
    operator: OperatorProcess | None = None
    operator_settings: list[str] = field(default_factory=list)
    # With a record store: the operator archives every attempt below a prefix of its own.
    store: ArchiveStore | None = None

    @classmethod
    def create(
        cls,
        kube: Kube,
        side: str,
        workdir: Path,
        operator_settings: list[str] | None = None,
        *,
        store: ArchiveStore | None = None,
        transcript_kib: int = 0,
    ) -> Sandbox:
        """A fresh namespace; with `transcript_kib`, kwok serves every pod in it a log
        of that many KiB."""
        name = f"{NS_PREFIX}{side}-{secrets.token_hex(3)}"
        owner = {OWNER_ANNOTATION: f"{platform.node()}/{os.getpid()}"}
        kube.create("/api/v1/namespaces", {"metadata": {"name": name, "annotations": owner}})
        wait_for(
            f"default service account in {name}",
            lambda: kube.get(f"/api/v1/namespaces/{name}/serviceaccounts/default") is not None,
            timeout=60,
        )
        box = cls(kube, name, workdir, operator_settings=list(operator_settings or []))
        if transcript_kib:
            log_file = write_cri_log(workdir / f"{name}.log", transcript_kib * 1024)
            create_cluster_logs(kube, name, log_file)
        box.store = store
        return box

    @property
    def store_prefix(self) -> str:
        """Where in the store this sandbox's operator archives (below the run's prefix)."""
        return self.namespace

    def start_operator(self) -> OperatorProcess:
        """Run the operator for this namespace with a service-account identity of its own."""
        ns, kube = self.namespace, self.kube
        kube.create(f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": OPERATOR_SA}})
        self.binding = ns
        kube.create(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "metadata": {"name": self.binding},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [{"kind": "ServiceAccount", "name": OPERATOR_SA, "namespace": ns}],
            },
        )
        token = kube.create(
            f"/api/v1/namespaces/{ns}/serviceaccounts/{OPERATOR_SA}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )["status"]["token"]
        kubeconfig = self.workdir / f"{ns}.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(token_kubeconfig(kube, token)))
        store = self.store
        self.operator = OperatorProcess(
            namespace=ns,
            kubeconfig=kubeconfig,
            log_path=self.workdir / f"{ns}.operator.log",
            settings=self.operator_settings,
            extra_args=store.operator_args(self.store_prefix) if store else None,
            extra_env=store.operator_env() if store else None,
        )
        return self.operator

    def teardown(self, *, timeout: float = 900, release_wait: float = 120) -> None:
        """Delete everything this sandbox made; strip finalizers nobody will remove."""
        ns, kube = self.namespace, self.kube
        with contextlib.suppress(BenchError):
            for ev in list_items(kube, f"{EVAL_API}/namespaces/{ns}/consistencyevals"):
                kube.delete(f"{EVAL_API}/namespaces/{ns}/consistencyevals/{name_of(ev)}")
        if (operator := self.operator) is not None:
            # NB: give a live operator the chance to release its own pods first
            try:
                wait_for(
                    "the operator to release its pods",
                    lambda: not (operator.alive() and held_pods(kube, ns)),
                    timeout=release_wait,
                    interval=2,
                )
            except BenchError as exc:
                log(f"teardown: {exc}")
            finally:
                operator.stop()
        if self.binding:
            kube.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{self.binding}")
        kube.delete(f"{CLUSTER_LOGS_API}/{ns}")  # NB: 404 (none, or no CRD) is fine
        if self.store is not None:
            try:
                self.store.delete(self.store_prefix)
            except BenchError as exc:  # NB: keep tearing down; the objects stay (said here)
                log(f"teardown: {exc}")
        # NB: force-delete the pods at once rather than wait for kwok to confirm each one
        strip_finalizers(kube, ns)
        with contextlib.suppress(BenchError):  # NB: may outlast the client timeout; best effort
            kube.delete(f"/api/v1/namespaces/{ns}/pods", gracePeriodSeconds="0")
        kube.delete(f"/api/v1/namespaces/{ns}")

        def gone() -> bool:
            strip_finalizers(kube, ns)
            return kube.get(f"/api/v1/namespaces/{ns}") is None

        wait_for(f"namespace {ns} to be deleted", gone, timeout=timeout, interval=3)


def token_kubeconfig(kube: Kube, token: str) -> dict[str, Any]:
    """A kubeconfig for the same API server that authenticates with `token`."""
    cfg = kube.configuration
    cluster: dict[str, Any] = {"server": cfg.host}
    if cfg.ssl_ca_cert:
        ca = Path(cfg.ssl_ca_cert).read_bytes()
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    else:
        cluster["insecure-skip-tls-verify"] = True
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "bench", "cluster": cluster}],
        "users": [{"name": "operator", "user": {"token": token}}],
        "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "operator"}}],
        "current-context": "bench",
    }


def list_items(kube: Kube, path: str, **query: str) -> list[dict[str, Any]]:
    return list((kube.get(path, **query) or {}).get("items") or [])


def count_pods(kube: Kube, ns: str) -> int:
    """Pods in `ns`, cheaply (a one-item page says how many remain)."""
    page = kube.get(f"/api/v1/namespaces/{ns}/pods", limit="1") or {}
    remaining = int((page.get("metadata") or {}).get("remainingItemCount") or 0)
    return len(page.get("items") or []) + remaining


def held_pods(kube: Kube, ns: str) -> list[str]:
    """Names of the pods in `ns` that still hold a finalizer."""
    pods = list_items(kube, f"/api/v1/namespaces/{ns}/pods")
    return [name_of(pod) for pod in pods if pod["metadata"].get("finalizers")]


def name_of(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def list_paged(kube: Kube, path: str, **query: str) -> list[dict[str, Any]]:
    """Every item at `path` (pages of 500: a namespace may hold 100,000 pods), as
    metadata only (PartialObjectMetadata)."""
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        page = kube.request(
            "GET",
            path,
            query={**query, "limit": "500", **({"continue": token} if token else {})},
            accept=METADATA_LIST,
        )
        items += (page or {}).get("items") or []
        token = ((page or {}).get("metadata") or {}).get("continue") or ""
        if not token:
            return items


def strip_finalizers(kube: Kube, ns: str) -> None:
    """Remove finalizers from pods and evals left in `ns` (their controller is gone)."""
    for path in (f"/api/v1/namespaces/{ns}/pods", f"{EVAL_API}/namespaces/{ns}/consistencyevals"):
        with contextlib.suppress(BenchError):
            held = [
                f"{path}/{name_of(obj)}"
                for obj in list_paged(kube, path)
                if obj["metadata"].get("finalizers")
            ]
            with ThreadPoolExecutor(max_workers=16) as pool:
                list(
                    pool.map(
                        lambda p: kube.merge_patch(p, {"metadata": {"finalizers": None}}), held
                    )
                )


def ensure_crd(kube: Kube) -> None:
    """Install the ConsistencyEval CRD from `crds/` unless the cluster has it already."""
    path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}"
    if kube.get(path) is None:
        log(f"installing the CRD from {CRD_FILE.relative_to(REPO)}")
        kube.create(path.rsplit("/", 1)[0], yaml.safe_load(CRD_FILE.read_text()))
    wait_for(
        "the CRD to be established",
        lambda: condition_true(kube.get(path), "Established"),
        timeout=60,
    )


def leftover_namespaces(kube: Kube) -> list[str]:
    """Namespaces an earlier, interrupted benchmark left behind (its process is gone)."""
    leftovers = []
    for ns in list_items(kube, "/api/v1/namespaces"):
        owner = (ns["metadata"].get("annotations") or {}).get(OWNER_ANNOTATION, "")
        host, _, pid = owner.partition("/")
        running = host == platform.node() and pid.isdigit() and Path(f"/proc/{pid}").exists()
        if name_of(ns).startswith(NS_PREFIX) and not running:
            leftovers.append(name_of(ns))
    return leftovers


# ------------------------------------------------------------------------- the sides


def pod_template(duration_s: float | None) -> dict[str, Any]:
    """The trial pod both sides run: a kwok pod that ends (exit 0) after `duration_s`.

    `None` runs until deleted (kwok's pod-complete stage skips it).
    """
    annotations = (
        {FOREVER_ANNOTATION: "true"}
        if duration_s is None
        else {DURATION_ANNOTATION: f"{int(duration_s * 1000)}ms"}
    )
    return {
        "metadata": {"annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": dict(KWOK_NODE_SELECTOR),
            "tolerations": [dict(t) for t in KWOK_TOLERATIONS],
            "containers": [
                {
                    "name": "trial",
                    "image": TRIAL_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "exit 0"],
                }
            ],
        },
    }


def operator_pod_template(duration_s: float | None) -> dict[str, Any]:
    """The pod the operator makes of `pod_template` (`pods.build_pod`: its env, the
    restricted security context, the deadline, the task annotation), minus what the Job
    sets itself (labels, owner, finalizer): `--job-pod operator` runs the Job on the same
    pods, so the two sides differ in their controller and not in their pods' size."""
    from passhat.api.spec import EvalSpec
    from passhat.operator.pods import EvalRef, PodKey, build_pod

    spec = EvalSpec.model_validate(
        eval_body("bench", tasks=1, trials=1, parallelism=1, duration_s=duration_s)["spec"]
    )
    pod = build_pod(
        eval_ref=EvalRef("bench", "bench", "00000000-0000-0000-0000-000000000000"),
        spec=spec,
        task=(spec.tasks or [])[0],
        key=PodKey(0, 0, 0),
    )
    return {"metadata": {"annotations": pod["metadata"]["annotations"]}, "spec": pod["spec"]}


def eval_body(
    name: str,
    *,
    tasks: int,
    trials: int,
    parallelism: int,
    duration_s: float | None,
    pod_retention: str = "all",
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "passhat.dev/v1alpha1",
        "kind": "ConsistencyEval",
        "metadata": {"name": name},
        "spec": {
            "tasks": [{"id": f"t{i:05d}"} for i in range(tasks)],
            "trials": trials,
            "ks": [1],
            "parallelism": parallelism,
            "trial": {"timeoutSeconds": 86400, "template": pod_template(duration_s)},
        },
    }
    if pod_retention != "all":
        body["spec"]["podRetention"] = pod_retention  # NB: so older CRDs take the default
    return body


@dataclass
class SideResult:
    """What one side of one run measured."""

    seconds: float
    writes: Counter[str]
    trials: int
    rss_mib: float | None = None
    cpu_seconds: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # The API server's CPU over the side's window (CpuWindow.summary()), when measured.
    apiserver: dict[str, float] = field(default_factory=dict)

    @property
    def writes_per_trial(self) -> float:
        return sum(self.writes.values()) / self.trials


class PodWatchLoad:
    """The operator's pod watch (`passhat.operator.kube.Kube.watch_pods`: a LIST, then a
    protobuf watch over HTTP/1.1) on one namespace, from a thread, reopened as the operator
    reopens it; counts the events it gets (`--job-watcher`)."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        from passhat.operator.kube import Kube as OperatorKube
        from passhat.operator.kube import load_client_config

        self.kube = OperatorKube(load_client_config(str(kubeconfig)))
        self.namespace, self.events = namespace, 0
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="job-watcher")
        self._thread.start()

    def _run(self) -> None:
        def count(kind: str, pod: object) -> None:
            self.events += 1

        while not self._stopped.is_set():
            try:
                self.kube.watch_pods(self.namespace, count)
            except Exception as exc:  # NB: reopened, as the operator's watcher does
                log(f"job watcher: {exc}")
                self._stopped.wait(1.0)

    def stop(self) -> int:
        """Stop reopening (the open watch ends with its namespace) and let go of the API
        wrapper's write pools, which this watcher never used; the events seen."""
        self._stopped.set()
        self.kube.close()
        return self.events


def run_job(
    kube: Kube,
    audit: Path,
    box: Sandbox,
    *,
    trials: int,
    parallelism: int,
    duration_s: float,
    apiserver: ClusterProcess | None = None,
    profile: Callable[[], ApiProfile | None] = lambda: None,
    template: dict[str, Any] | None = None,
    watcher: Path | None = None,
) -> SideResult:
    """N completions of an Indexed Job at `parallelism`; create to Complete. `template`:
    the pod template (default `pod_template(duration_s)`). `watcher`: a kubeconfig for the
    operator's own pod watch (`Kube.watch_pods`) on the Job's pods, which then carry the
    eval-uid label it selects on, from before the Job is created to its end."""
    ns = box.namespace
    template = copy.deepcopy(template or pod_template(duration_s))
    watching: PodWatchLoad | None = None
    if watcher is not None:
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        labels[LABEL_EVAL_UID] = "bench-job"
        watching = PodWatchLoad(watcher, ns)
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "bench"},
        "spec": {
            "completions": trials,
            "parallelism": parallelism,
            "completionMode": "Indexed",
            "backoffLimit": trials,
            "template": template,
        },
    }
    path = f"/apis/batch/v1/namespaces/{ns}/jobs/bench"
    window = AuditWindow(audit, user=JOB_CONTROLLER_USER, namespace=ns)
    api_cpu = CpuWindow.open(apiserver) if apiserver is not None else None
    profiling = profile()
    requests_before = request_counts(kube)
    cpu_before = cpu_snapshot()
    start = time.monotonic()
    kube.create(f"/apis/batch/v1/namespaces/{ns}/jobs", body)

    def done() -> bool:
        # NB: both sides poll from the API server's watch cache (resourceVersion 0), so
        # that the benchmark's own four reads a second cost either side little
        job = kube.get(path, resourceVersion="0")
        if condition_true(job, "Failed"):
            raise BenchError(f"the Job failed: {json.dumps((job or {}).get('status'))}")
        return condition_true(job, "Complete")

    end = wait_for(
        "the Job to complete", done, timeout=timeout_for(trials, parallelism, duration_s)
    )
    cpu = cpu_delta(cpu_before, cpu_snapshot())
    watched = watching.stop() if watching is not None else None
    if api_cpu is not None:
        api_cpu.close()
    requests = request_delta(requests_before, request_counts(kube))
    job = kube.get(path) or {}
    succeeded = int((job.get("status") or {}).get("succeeded") or 0)
    if succeeded != trials:
        raise BenchError(f"the Job completed with {succeeded} of {trials} succeeded")
    writes = window.wait_quiet()
    if profiling is not None:
        profiling.close()
    return SideResult(
        end - start,
        writes,
        trials,
        extra={
            "succeeded": succeeded,
            "cpu": cpu,
            "apiserver_requests": requests,
            **({"watcher_events": watched} if watched is not None else {}),
        },
        apiserver=api_cpu.summary() if api_cpu is not None else {},
    )


def run_operator(
    kube: Kube,
    audit: Path,
    box: Sandbox,
    *,
    trials: int,
    parallelism: int,
    duration_s: float,
    expect_bytes: int = 0,
    apiserver: ClusterProcess | None = None,
    etcd: ClusterProcess | None = None,
    pod_retention: str = "all",
    profile: Callable[[], ApiProfile | None] = lambda: None,
) -> SideResult:
    """An eval of trials/10 tasks x 10 trials through a fresh operator; create to Complete.

    With a record store (`box.store`), the attempts archived are counted in the store
    against the attempts made (the eval's pods, kept until it is deleted). Also measured:
    the operator's passes (its /metrics), the API server's and etcd's peak RSS over the
    window and what the API server's storage holds at the end (before the teardown)."""
    ns = box.namespace
    operator = box.start_operator()
    evals = f"{EVAL_API}/namespaces/{ns}/consistencyevals"
    # NB: a one-trial warm-up eval makes sure the operator is up and watching before the clock
    # starts (its start-up is not what is compared), then is deleted again.
    kube.create(evals, eval_body("warmup", tasks=1, trials=1, parallelism=1, duration_s=0))
    wait_eval(kube, operator, f"{evals}/warmup", timeout=180)
    if box.store is not None:
        check_warmup_transcript(box, expect_bytes)
    kube.delete(f"{evals}/warmup")
    wait_for("the warm-up eval to go", lambda: kube.get(f"{evals}/warmup") is None, timeout=120)
    user = f"system:serviceaccount:{ns}:{OPERATOR_SA}"
    AuditWindow(audit, user=user, namespace=ns).wait_quiet(quiet_s=2)

    api_cpu = CpuWindow.open(apiserver) if apiserver is not None else None
    profiling = profile()
    requests_before = request_counts(kube)
    window, cpu0 = AuditWindow(audit, user=user, namespace=ns), operator.cpu_seconds()
    cpu_before = cpu_snapshot(operator)
    sampler = MemorySampler([p for p in (apiserver, etcd) if p is not None])
    start = time.monotonic()
    with sampler:
        kube.create(
            evals,
            eval_body(
                "bench",
                tasks=trials // TASK_TRIALS,
                trials=TASK_TRIALS,
                parallelism=parallelism,
                duration_s=duration_s,
                pod_retention=pod_retention,
            ),
        )
        if pod_retention != "all" and "podRetention" not in (
            (kube.get(f"{evals}/bench") or {}).get("spec") or {}
        ):
            raise BenchError(
                "the cluster's ConsistencyEval CRD predates spec.podRetention (the API server "
                f"dropped it): install {CRD_FILE.relative_to(REPO)} to measure retention"
            )
        end = wait_eval(
            kube, operator, f"{evals}/bench", timeout=timeout_for(trials, parallelism, duration_s)
        )
    cpu = cpu_delta(cpu_before, cpu_snapshot(operator))
    status = (kube.get(f"{evals}/bench") or {}).get("status") or {}
    done = int((status.get("progress") or {}).get("done") or 0)
    if done != trials:
        raise BenchError(f"the eval completed with progress.done={done}, expected {trials}")
    # NB: like a Job's, finished trial pods stay until the eval is deleted; only released
    # (their API writes are part of the side's window; asked with a selector, so that the
    # benchmark's own LISTs cost the API server little)
    wait_for(
        "the operator to release its finished pods",
        lambda: not list_items(kube, f"/api/v1/namespaces/{ns}/pods", labelSelector=UNKEPT),
        timeout=120,
        interval=1,
    )
    if api_cpu is not None:
        api_cpu.close()
    requests = request_delta(requests_before, request_counts(kube))
    # NB: a kept pod lost our finalizer in the patch that labelled it; at 100,000 pods the
    # whole list would be a few hundred MB of JSON: checked on smaller runs only
    if trials <= 10000 and (held := held_pods(kube, ns)):
        raise BenchError(f"{len(held)} trial pods still hold a finalizer, e.g. {held[0]}")
    writes = window.wait_quiet()
    if profiling is not None:
        profiling.close()
    extra: dict[str, Any] = {
        "status_bytes": json_size(status),
        "summary": status.get("summary"),
        "cpu": cpu,
        "passes": operator.pass_seconds(),
        "cluster_peak_rss_mib": {k: round(v, 1) for k, v in sampler.peak_mib.items()},
        "storage_objects_end": storage_objects(kube),
        "pods_left": count_pods(kube, ns),
        "pod_retention": pod_retention,
        "apiserver_requests": requests,
    }
    if box.store is not None:
        attempts = len(
            list_items(kube, f"/api/v1/namespaces/{ns}/pods", labelSelector=f"{LABEL_EVAL}=bench")
        )
        found = archived(box.store, box.store_prefix, ns, "bench")
        extra |= {
            "attempts": attempts,
            "records": found.records,
            "transcripts": len(found.transcript_bytes),
            "transcript_bytes_min": min(found.transcript_bytes, default=0),
        }
        log(f"archive: {found.records} records in the store for {attempts} attempts")
    return SideResult(
        end - start,
        writes,
        trials,
        rss_mib=operator.peak_rss_mib(),
        cpu_seconds=operator.cpu_seconds() - cpu0,
        extra=extra,
        apiserver=api_cpu.summary() if api_cpu is not None else {},
    )


def check_warmup_transcript(box: Sandbox, expect_bytes: int) -> None:
    """The warm-up attempt's transcript is in the store with the whole log kwok serves
    (else kwok serves no logs through the API server and the benchmark would time nothing)."""
    assert box.store is not None
    found = Archived(0, [])

    def in_store() -> bool:
        nonlocal found
        found = archived(box.store, box.store_prefix, box.namespace, "warmup")  # type: ignore[arg-type]
        return found.records >= 1

    wait_for("the warm-up attempt's record in the store", in_store, timeout=120, interval=1)
    if min(found.transcript_bytes, default=0) < expect_bytes:
        raise BenchError(
            f"the warm-up transcript has {found.transcript_bytes} bytes, expected >= "
            f"{expect_bytes}: does kwok serve pod logs? (hack/cluster/up.sh, docs/cluster.md)"
        )


def wait_eval(kube: Kube, operator: OperatorProcess, path: str, *, timeout: float) -> float:
    """Wait for the eval's Complete condition; fail fast on ConfigError or a dead operator.
    Every 30 s the progress goes to stderr (a long run cut short still says how far it
    got and at what cost)."""
    last = [time.monotonic()]

    def done() -> bool:
        if not operator.alive():
            raise BenchError(f"the operator exited:\n{operator.tail()}")
        ev = kube.get(path, resourceVersion="0")
        if condition_true(ev, "ConfigError"):
            raise BenchError(f"the eval has a ConfigError: {json.dumps(ev and ev.get('status'))}")
        if time.monotonic() - last[0] > 30:
            last[0] = time.monotonic()
            status = (ev or {}).get("status") or {}
            log(
                f"progress {json.dumps(status.get('progress'))}, status {json_size(status)} B, "
                f"operator RSS {operator.rss_mib():.0f} MiB (peak {operator.peak_rss_mib():.0f}), "
                f"load {os.getloadavg()[0]:.2f}"
            )
        return condition_true(ev, "Complete")

    return wait_for(f"{path} to complete", done, timeout=timeout)


def timeout_for(trials: int, parallelism: int, duration_s: float) -> float:
    """A generous deadline: 20x the ideal time plus a fixed 10 minutes (a loaded 2-core box)."""
    waves = -(-trials // parallelism)
    return 600 + 20 * waves * max(duration_s, 1.0) + 0.5 * trials


def json_size(obj: Any) -> int:
    return len(json.dumps(obj, separators=(",", ":")).encode())


# ------------------------------------------------------------------------------ scale


def run_scale(
    kube: Kube, workdir: Path, args: argparse.Namespace, *, timeout: float
) -> dict[str, Any]:
    """Keep `tasks` x 10 trial pods in flight; the operator's RSS and the status size then."""
    tasks: int = args.scale_tasks
    parallelism = tasks * TASK_TRIALS
    duration: float | None = args.scale_duration_s
    box = Sandbox.create(
        kube,
        "scale",
        workdir,
        args.operator_set,
        store=args.store,
        transcript_kib=args.transcript_kib if args.archive else 0,
    )
    try:
        operator = box.start_operator()
        evals = f"{EVAL_API}/namespaces/{box.namespace}/consistencyevals"
        pods = tasks * TASK_TRIALS
        start = time.monotonic()
        kube.create(
            evals,
            eval_body(
                "scale",
                tasks=tasks,
                trials=TASK_TRIALS,
                parallelism=parallelism,
                duration_s=duration,
            ),
        )
        last = [0.0]

        def all_created() -> bool:
            if not operator.alive():
                raise BenchError(f"the operator exited:\n{operator.tail()}")
            live = count_pods(kube, box.namespace)
            if time.monotonic() - last[0] > 30:
                last[0] = time.monotonic()
                log(
                    f"scale: {live}/{pods} trial pods exist, "
                    f"operator RSS {operator.rss_mib():.0f} MiB"
                )
            return live >= min(pods, parallelism)

        end = wait_for("every trial pod to be created", all_created, timeout=timeout, interval=2)
        time.sleep(15)  # NB: let the operator run passes with every pod tracked
        live = count_pods(kube, box.namespace)
        ev = kube.get(f"{evals}/scale") or {}
        result: dict[str, Any] = {
            "scale_pods": live,
            "scale_tasks": tasks,
            "scale_seconds_to_create": round(end - start, 1),
            "scale_duration_s": duration,
            "operator_rss_mib_when_created": round(operator.peak_rss_mib(), 1),
            "status_bytes": json_size(ev.get("status") or {}),
            "object_bytes": json_size(ev),
        }
        if box.store is not None:
            result |= archive_all(kube, box, operator, pods=pods, start=start, timeout=timeout)
        result["operator_rss_mib"] = round(operator.peak_rss_mib(), 1)
        result["operator_cpu_seconds"] = round(operator.cpu_seconds(), 1)
        return result
    finally:
        # NB: 10,000 releases through the operator take long; strip the finalizers instead
        try:
            box.teardown(timeout=1800, release_wait=0)
        except BenchError as exc:
            log(f"teardown of {box.namespace} failed: {exc}")


def archive_all(
    kube: Kube,
    box: Sandbox,
    operator: OperatorProcess,
    *,
    pods: int,
    start: float,
    timeout: float,
) -> dict[str, Any]:
    """--scale --archive: wait until every pod's attempt is in the store (they end after
    `--scale-duration-s`); what the store holds then."""
    assert box.store is not None
    found = Archived(0, [])
    last = [0.0]

    def all_archived() -> bool:
        nonlocal found
        if not operator.alive():
            raise BenchError(f"the operator exited:\n{operator.tail()}")
        found = archived(box.store, box.store_prefix, box.namespace, "scale")  # type: ignore[arg-type]
        if time.monotonic() - last[0] > 30:
            last[0] = time.monotonic()
            log(
                f"scale: {found.records}/{pods} records archived, "
                f"operator RSS {operator.rss_mib():.0f} MiB (peak {operator.peak_rss_mib():.0f})"
            )
        return found.records >= pods

    end = wait_for("every attempt to be archived", all_archived, timeout=timeout, interval=10)
    return {
        "scale_seconds_to_archive_all": round(end - start, 1),
        "records_archived": found.records,
        "transcripts_archived": len(found.transcript_bytes),
        "transcript_bytes_min": min(found.transcript_bytes, default=0),
        "archive_attempts": pods,
        "records_match_attempts": found.records == len(found.transcript_bytes) == pods,
    }


# ----------------------------------------------------------------------- the machine


def machine_info(kube: Kube) -> dict[str, Any]:
    """Cores, memory, load, versions and the controller-manager's client QPS."""
    meminfo = Path("/proc/meminfo").read_text().split()
    mem_gib = int(meminfo[meminfo.index("MemTotal:") + 1]) / 1024**2
    version = kube.get("/version") or {}
    kwok_nodes = list_items(kube, "/api/v1/nodes", labelSelector="type=kwok")
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "cores": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(mem_gib, 1),
        "load_avg_1m": os.getloadavg()[0],
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "kubernetes": version.get("gitVersion"),
        "kwok_nodes": len(kwok_nodes),
        **controller_manager_qps(),
    }


def controller_manager_qps() -> dict[str, Any]:
    """`--kube-api-qps` / `--kube-api-burst` of the running kube-controller-manager."""
    qps: dict[str, Any] = {"kcm_kube_api_qps": 20.0, "kcm_kube_api_burst": 30}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            argv = cmdline.read_bytes().split(b"\0")
            if not argv or not argv[0].endswith(b"kube-controller-manager"):
                continue
            args = [a.decode() for a in argv]
            for flag, key, kind in (
                ("--kube-api-qps", "kcm_kube_api_qps", float),
                ("--kube-api-burst", "kcm_kube_api_burst", int),
            ):
                for i, arg in enumerate(args):
                    if arg.startswith(flag + "="):
                        qps[key] = kind(arg.split("=", 1)[1])
                    elif arg == flag and i + 1 < len(args):
                        qps[key] = kind(args[i + 1])
            qps["kcm_flags_read"] = True
    return qps


# ----------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=1000, help="trials per side (multiple of 10)")
    p.add_argument("--parallelism", type=int, default=100, help="pods in flight, both sides")
    p.add_argument("--runs", type=int, default=3, help="runs; the median is reported")
    p.add_argument("--duration-s", type=float, default=5.0, help="scripted run time of a pod")
    p.add_argument("--scale", action="store_true", help="10,000 tracked pods: RSS, status size")
    p.add_argument("--scale-tasks", type=int, default=1000, help="tasks of the scale eval (x10)")
    p.add_argument("--smoke", action="store_true", help="tiny run (20 trials, parallelism 10)")
    p.add_argument(
        "--archive",
        action="store_true",
        help="also run the operator with a record store (.cluster/s3.env's S3 server)",
    )
    p.add_argument(
        "--transcript-kib", type=int, default=100, help="with --archive: each pod's log size"
    )
    p.add_argument("--s3-env", type=Path, default=DEFAULT_S3_ENV, help="the S3 server to use")
    p.add_argument(
        "--scale-duration-s",
        type=float,
        help="--scale: pods end after this long (default: never; with --archive 300)",
    )
    p.add_argument(
        "--sides", choices=("both", "operator", "job"), default="both", help="which sides run"
    )
    p.add_argument(
        "--pod-retention",
        choices=("all", "failed", "none"),
        default="all",
        help="the operator eval's spec.podRetention",
    )
    p.add_argument(
        "--job-pod",
        choices=("template", "operator"),
        default="template",
        help="the Job's pods: the eval's template as given, or the pod the operator makes of it",
    )
    p.add_argument(
        "--job-watcher",
        action="store_true",
        help="the operator's own pod watch (protobuf, HTTP/1.1) runs on the Job's pods "
        "during its window: what one such watcher costs the API server",
    )
    p.add_argument("--kubeconfig", type=Path, default=DEFAULT_KUBECONFIG)
    p.add_argument("--audit-log", type=Path, default=DEFAULT_AUDIT_LOG)
    p.add_argument(
        "--run-dir", type=Path, default=DEFAULT_RUN_DIR, help="where up.sh records the pids"
    )
    p.add_argument("--keep-logs", type=Path, help="copy operator logs into this directory")
    p.add_argument(
        "--profile",
        type=Path,
        help="write the API server's CPU profile of each side's window into this directory",
    )
    p.add_argument(
        "--profile-seconds", type=int, default=45, help="length of each --profile (both sides)"
    )
    p.add_argument(
        "--operator-set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="passed to `passhat operator --set` (tuning experiments; repeatable)",
    )
    args = p.parse_args(argv)
    if args.smoke:
        args.trials, args.parallelism, args.runs, args.duration_s = 20, 10, 1, 1.0
    if args.trials < TASK_TRIALS or args.trials % TASK_TRIALS:
        p.error(f"--trials must be a positive multiple of {TASK_TRIALS}")
    if args.parallelism < 1 or args.runs < 1 or args.duration_s < 0:
        p.error("--parallelism and --runs must be >= 1, --duration-s >= 0")
    if args.transcript_kib < 1:
        p.error("--transcript-kib must be >= 1")
    if args.scale_duration_s is None and args.archive:
        args.scale_duration_s = 300.0
    args.store = None
    return args


def one_run(
    kube: Kube, audit: Path, workdir: Path, args: argparse.Namespace, i: int
) -> dict[str, Any]:
    """Both sides once (the Job first on odd runs), each in a fresh namespace."""
    sides: dict[str, SideResult] = {}
    prefixes: list[str] = []
    order = ["operator", "archive", "job"] if args.archive else ["operator", "job"]
    # NB: --sides operator runs the operator alone (a 100,000-trial Job is not the point)
    order = [
        side for side in order if args.sides == "both" or (side == "job") == (args.sides == "job")
    ]
    if i % 2:
        order.reverse()
    for side in order:
        archiving = side == "archive"
        box = Sandbox.create(
            kube,
            {"operator": "op", "archive": "arc", "job": "job"}[side],
            workdir,
            args.operator_set,
            store=args.store if archiving else None,
            transcript_kib=args.transcript_kib if args.archive and side != "job" else 0,
        )
        try:
            log(f"run {i + 1}: {side} side in {box.namespace}")
            if archiving and box.store is not None:
                prefixes.append(f"{box.store.prefix}/{box.store_prefix}/")
            # NB: read per side: the shared API server may have been restarted meanwhile
            apiserver = ClusterProcess(args.run_dir, "kube-apiserver")
            if side == "job":
                sides[side] = run_job(
                    kube,
                    audit,
                    box,
                    trials=args.trials,
                    parallelism=args.parallelism,
                    duration_s=args.duration_s,
                    apiserver=apiserver,
                    profile=functools.partial(start_profile, args, kube, side, i),
                    template=(
                        operator_pod_template(args.duration_s)
                        if args.job_pod == "operator"
                        else None
                    ),
                    watcher=args.kubeconfig if args.job_watcher else None,
                )
            else:
                sides[side] = run_operator(
                    kube,
                    audit,
                    box,
                    trials=args.trials,
                    parallelism=args.parallelism,
                    duration_s=args.duration_s,
                    expect_bytes=args.transcript_kib * 1024 if archiving else 0,
                    apiserver=apiserver,
                    etcd=ClusterProcess(args.run_dir, "etcd"),
                    pod_retention=args.pod_retention,
                    profile=functools.partial(start_profile, args, kube, side, i),
                )
            log(f"run {i + 1}: {side} done in {sides[side].seconds:.1f}s")
        finally:
            if args.keep_logs and box.operator is not None:
                args.keep_logs.mkdir(parents=True, exist_ok=True)
                box.operator.stop()
                target = args.keep_logs / box.operator.log_path.name
                target.write_bytes(box.operator.log_path.read_bytes())
            try:
                box.teardown()
            except BenchError as exc:
                # NB: keep the measurement; the next run removes what is left
                log(f"teardown of {box.namespace} failed: {exc}")
    out: dict[str, Any] = {
        "order": order,
        "cpu_by_side": {side: result.extra.get("cpu") for side, result in sides.items()},
        "apiserver_detail": {side: result.apiserver for side, result in sides.items()},
        "apiserver_requests": {
            side: result.extra.get("apiserver_requests") for side, result in sides.items()
        },
    }
    if (job := sides.get("job")) is not None and "watcher_events" in job.extra:
        out["job_watcher_events"] = job.extra["watcher_events"]
    for side in ("operator", "job"):
        if (result := sides.get(side)) is not None:
            out |= side_fields(side, result)
    if (op := sides.get("operator")) is not None:
        out |= {
            "operator_rss_mib": op.rss_mib,
            "operator_cpu_seconds": op.cpu_seconds,
            "operator_status_bytes": op.extra["status_bytes"],
            "operator_passes": op.extra["passes"],
            "operator_cluster_peak_rss_mib": op.extra["cluster_peak_rss_mib"],
            "operator_storage_objects_end": op.extra["storage_objects_end"],
            "operator_pods_left": op.extra["pods_left"],
        }
    if (arc := sides.get("archive")) is not None and op is not None:
        out |= {
            "operator_archive_seconds": arc.seconds,
            "archive_ratio": arc.seconds / op.seconds,
            "operator_archive_api_writes_per_trial": arc.writes_per_trial,
            "operator_archive_rss_mib": arc.rss_mib,
            "operator_archive_cpu_seconds": arc.cpu_seconds,
            "archive_attempts": arc.extra["attempts"],
            "records_archived": arc.extra["records"],
            "transcripts_archived": arc.extra["transcripts"],
            "transcript_bytes_min": arc.extra["transcript_bytes_min"],
            "operator_archive_writes": dict(arc.writes),
            "store_prefixes": prefixes,
        }
    return out


def side_fields(side: str, result: SideResult) -> dict[str, Any]:
    """One side's wall time, writes and API-server CPU as the JSON line names them.

    The API server's CPU seconds are over the side's window, net of the API server's idle
    rate just before it (other clients of the shared cluster); raw in `apiserver_detail`.
    """
    net = result.apiserver.get("net_cpu_s", 0.0)
    return {
        f"{side}_seconds": result.seconds,
        f"{side}_api_writes_per_trial": result.writes_per_trial,
        f"{side}_writes": dict(result.writes),
        f"{side}_apiserver_cpu_s": net,
        f"{side}_apiserver_cpu_ms_per_trial": 1000 * net / result.trials,
    }


def median_of(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def cell(value: Any) -> str:
    """A table cell: a number with two decimals, blank for anything else."""
    return f"{value:>18.2f}" if isinstance(value, float | int) else f"{'':>18}"


def print_table(runs: list[dict[str, Any]], result: dict[str, Any]) -> None:
    cols = [
        ("operator_seconds", "op s"),
        ("job_seconds", "job s"),
        ("operator_api_writes_per_trial", "op writes/trial"),
        ("job_api_writes_per_trial", "job writes/trial"),
        ("operator_rss_mib", "op RSS MiB"),
        ("operator_cpu_seconds", "op CPU s"),
        ("operator_apiserver_cpu_s", "op apiserver s"),
        ("job_apiserver_cpu_s", "job apiserver s"),
    ]
    if "operator_archive_seconds" in result:
        cols += [
            ("operator_archive_seconds", "archive s"),
            ("archive_ratio", "archive/op"),
            ("operator_archive_rss_mib", "arc RSS MiB"),
            ("operator_archive_cpu_seconds", "arc CPU s"),
            ("records_archived", "records"),
        ]
    print("run    " + "".join(f"{title:>18}" for _, title in cols))
    for i, r in enumerate(runs):
        print(f"{i + 1:<7}" + "".join(cell(r.get(key)) for key, _ in cols))
    medians = [result.get(key) for key, _ in cols]
    print("median " + "".join(cell(m) for m in medians))
    last = runs[-1]
    for side in ("operator", "job"):
        if f"{side}_writes" in last:
            print(f"{side} writes (last run): {json.dumps(last[f'{side}_writes'], sort_keys=True)}")
    if "operator_passes" in last:
        print(f"operator passes (last run): {json.dumps(last['operator_passes'])}")
    for side, counts in (last.get("apiserver_requests") or {}).items():
        print(f"API server requests, {side} window (last run, all clients): {json.dumps(counts)}")
    if "throughput_ratio" in result:
        print(
            f"throughput ratio (operator/job, >= 1 means the operator is at least as fast): "
            f"{result['throughput_ratio']:.3f}"
        )
    if "archive_overhead" in result:
        print(
            f"archive overhead (median of per-run archive-on/off wall time): "
            f"{result['archive_overhead']:.3f}; records == attempts in every run: "
            f"{result['records_match_attempts']}"
        )


def measure(kube: Kube, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """The benchmark proper: the side-by-side runs (median), or the scale run."""
    if args.scale:
        pods = args.scale_tasks * TASK_TRIALS
        result = {"trials": pods, "parallelism": pods, "archive": args.archive}
        if args.archive:
            result["transcript_kib"] = args.transcript_kib
        return result | run_scale(kube, workdir, args, timeout=3600)
    runs = []
    for i in range(args.runs):
        for attempt in range(3):
            try:
                runs.append(one_run(kube, args.audit_log, workdir, args, i))
                break
            except Restarted as exc:
                log(f"run {i + 1}: {exc}; measured again")
                if attempt == 2:
                    raise
    result = {"trials": args.trials, "parallelism": args.parallelism}
    for key in (
        "operator_seconds",
        "job_seconds",
        "operator_api_writes_per_trial",
        "job_api_writes_per_trial",
        "operator_rss_mib",
        "operator_cpu_seconds",
        "operator_apiserver_cpu_s",
        "job_apiserver_cpu_s",
        "operator_apiserver_cpu_ms_per_trial",
        "job_apiserver_cpu_ms_per_trial",
    ):
        if key in runs[0]:
            result[key] = round(median_of(runs, key), 3)
    result["apiserver_detail_runs"] = [r["apiserver_detail"] for r in runs]
    result["apiserver_requests_runs"] = [r["apiserver_requests"] for r in runs]
    result["cpu_by_side_runs"] = [r["cpu_by_side"] for r in runs]
    if args.job_watcher:
        result["job_watcher_events_runs"] = [r.get("job_watcher_events") for r in runs]
    for side in ("operator", "job"):
        if f"{side}_seconds" in runs[0]:
            result[f"{side}_seconds_runs"] = [round(r[f"{side}_seconds"], 2) for r in runs]
            result[f"{side}_writes_last_run"] = runs[-1][f"{side}_writes"]
    if "operator_seconds" in result and "job_seconds" in result:
        result["throughput_ratio"] = round(result["job_seconds"] / result["operator_seconds"], 3)
    result["runs"] = args.runs
    result["duration_s"] = args.duration_s
    if "job_seconds" in result:
        result["job_pod"] = args.job_pod
    result["ideal_seconds"] = -(-args.trials // args.parallelism) * args.duration_s
    if "operator_seconds" in result:
        result["operator_over_ideal"] = round(
            result["operator_seconds"] / result["ideal_seconds"], 3
        )
        result["pod_retention"] = args.pod_retention
        for key in (
            "operator_status_bytes",
            "operator_passes",
            "operator_cluster_peak_rss_mib",
            "operator_storage_objects_end",
            "operator_pods_left",
        ):
            result[key] = runs[-1][key]
        result["operator_passes_runs"] = [r["operator_passes"] for r in runs]
    if args.archive:
        for key in (
            "operator_archive_seconds",
            "operator_archive_api_writes_per_trial",
            "operator_archive_rss_mib",
            "operator_archive_cpu_seconds",
        ):
            result[key] = round(median_of(runs, key), 3)
        result["archive"] = True
        result["transcript_kib"] = args.transcript_kib
        result["archive_overhead"] = round(median_of(runs, "archive_ratio"), 3)
        result["archive_overhead_of_medians"] = round(
            result["operator_archive_seconds"] / result["operator_seconds"], 3
        )
        result["archive_ratios"] = [round(r["archive_ratio"], 3) for r in runs]
        result["archive_orders"] = [r["order"] for r in runs]
        result["operator_archive_seconds_runs"] = [
            round(r["operator_archive_seconds"], 2) for r in runs
        ]
        result["store_prefixes"] = [p for r in runs for p in r["store_prefixes"]]
        result["records_archived"] = [r["records_archived"] for r in runs]
        result["archive_attempts"] = [r["archive_attempts"] for r in runs]
        result["transcripts_archived"] = [r["transcripts_archived"] for r in runs]
        result["transcript_bytes_min"] = min(r["transcript_bytes_min"] for r in runs)
        result["records_match_attempts"] = all(
            r["records_archived"] == r["archive_attempts"] == r["transcripts_archived"]
            for r in runs
        )
        result["operator_archive_writes_last_run"] = runs[-1].get("operator_archive_writes")
    print_table(runs, result)
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if not args.audit_log.exists():
            raise BenchError(f"no audit log at {args.audit_log} (hack/cluster/up.sh writes it)")
        kube = Kube(args.kubeconfig)
        if args.archive:
            args.store = ArchiveStore(args.s3_env)
            args.store.check()
        for ns in leftover_namespaces(kube):
            log(f"removing {ns}, left by an earlier run")
            Sandbox(kube, ns, Path(tempfile.gettempdir()), store=args.store).teardown()
        machine = machine_info(kube)
        ensure_crd(kube)
        with tempfile.TemporaryDirectory(prefix="passhat-bench-") as tmp:
            result = measure(kube, args, Path(tmp))
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    machine["load_avg_1m_end"] = os.getloadavg()[0]
    machine["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    result["machine"] = machine
    print(json.dumps(result, sort_keys=True))
    if args.archive and not result.get("records_match_attempts", True):
        print("bench: the store does not hold one record per attempt", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
