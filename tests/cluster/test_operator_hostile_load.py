"""One operator, three namespaces, hostile load: no eval takes the operator from the others.

Issue #17 section 2, on the real API server with the operator as a process: a 5,000-trial
eval against a ResourceQuota of 3 pods; an eval of one task with 900 KiB of params at
`parallelism: 1000`, which is refused (params are at most 64 KiB) with a ConfigError
naming them; and one with the largest params allowed (63 KiB) at `parallelism: 1000`
against a quota of 10 pods (so the shared test cluster's etcd is not filled), while a
small eval in a third namespace must complete in under 5 minutes, the operator never
restarts, its peak RSS stays under 256 MiB, and the quota-limited namespace sees at most
300 pod POSTs in any 30 s, counted from the API server's audit log
(`.cluster/logs/audit.log`: every write, with its user agent;
hack/cluster/audit-policy.yaml). Trials run on kwok nodes and end by themselves.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.cluster.conftest import Cluster, fresh_namespace
from tests.cluster.operator_helpers import (
    OperatorProcess,
    condition,
    create_eval,
    delete_evals,
    eval_manifest,
    get_eval,
    install_crd,
    progress_done,
    wait_for_condition,
)

# The quota-limited eval: 5 tasks x 1,000 trials, its pods end 5 s after they start.
BIG_TASKS, BIG_TRIALS, BIG_PARALLELISM, QUOTA_PODS = 5, 1000, 1000, 3
# The large-params evals: 900 KiB (refused: params are at most 64 KiB) and 63 KiB (runs).
REFUSED_PARAMS_KIB, PARAMS_KIB, PARAMS_PARALLELISM, PARAMS_QUOTA_PODS = 900, 63, 1000, 10
SMALL_DEADLINE_S = 300.0
MAX_POSTS_PER_30S = 300
RSS_LIMIT_MIB = 256.0
# How long the quota-limited eval is watched at least (three 30 s windows and more).
WATCH_S = 120.0
USER_AGENT = "passhat-operator"


class AuditLog:
    """Pod creates by the operator in one namespace, read from the API server's audit log
    from where it ended when this object was made (following one rotation)."""

    def __init__(self, path: Path) -> None:
        if not path.exists():
            pytest.fail(f"no audit log at {path} (hack/cluster/up.sh writes it)")
        self.path = path
        stat = path.stat()
        self._inode, self._offset = stat.st_ino, stat.st_size

    def pod_creates(self, namespace: str) -> list[float]:
        """When (epoch seconds, sorted) each pod POST in `namespace` by the operator was
        received, refused ones included; each request once."""
        files = [self.path]
        if self.path.stat().st_ino != self._inode:
            rotated = [p for p in self.path.parent.iterdir() if p.stat().st_ino == self._inode]
            files = [*rotated, self.path]
        seen: set[str] = set()
        times: list[float] = []
        for index, path in enumerate(files):
            with path.open("rb") as f:
                if index == 0:
                    f.seek(self._offset)
                for line in f:
                    with contextlib.suppress(ValueError):
                        event = json.loads(line)
                        if _is_pod_create(event, namespace) and event["auditID"] not in seen:
                            seen.add(event["auditID"])
                            times.append(_epoch(event["requestReceivedTimestamp"]))
        return sorted(times)


def _is_pod_create(event: dict[str, Any], namespace: str) -> bool:
    ref = event.get("objectRef") or {}
    return (
        event.get("stage") == "ResponseComplete"
        and event.get("verb") == "create"
        and ref.get("resource") == "pods"
        and not ref.get("subresource")
        and ref.get("namespace") == namespace
        and str(event.get("userAgent", "")).startswith(USER_AGENT)
    )


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def most_in_any_window(times: list[float], window_s: float) -> int:
    """The largest number of `times` (sorted) within any `window_s` seconds."""
    most, first = 0, 0
    for last, when in enumerate(times):
        while when - times[first] >= window_s:
            first += 1
        most = max(most, last - first + 1)
    return most


def peak_rss_mib(pid: int) -> float:
    """A process's peak resident set (VmHWM) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for pid {pid}")


def quota(kubectl: Callable[..., str], namespace: str, pods: int, wait_for: Any) -> None:
    """A ResourceQuota of `pods` pods in `namespace`, once the quota controller counted it."""
    kubectl("create", "quota", f"pods-{pods}", f"--hard=pods={pods}", "-n", namespace)

    def counted() -> bool:
        out = kubectl("get", "quota", f"pods-{pods}", "-n", namespace, "-o", "json")
        return "pods" in (json.loads(out).get("status") or {}).get("used", {})

    wait_for(counted, 120, f"the quota of {namespace} to be counted")


@contextlib.contextmanager
def operator_for(
    cluster: Cluster, kubectl: Callable[..., str], namespaces: list[str], log_path: Path
) -> Iterator[OperatorProcess]:
    """One operator serving `namespaces`; on exit their evals are deleted while it still
    runs (so their pods are released), then it is stopped."""
    install_crd(kubectl)
    process = OperatorProcess(
        kubeconfig=cluster.kubeconfig, namespaces=namespaces, log_path=log_path
    )
    process.start()
    try:
        yield process
    finally:
        if process.proc is not None and process.proc.poll() is None:
            for namespace in namespaces:
                delete_evals(kubectl, namespace)
        process.stop()


def large_params_manifest(name: str, params_kib: int) -> dict[str, Any]:
    """One task with `params_kib` KiB of params, all its trials at once."""
    manifest = eval_manifest(
        name,
        tasks=1,
        trials=PARAMS_PARALLELISM,
        parallelism=PARAMS_PARALLELISM,
        ks=[1],
        retries=0,
        scripted=False,
        duration="5s",
    )
    manifest["spec"]["tasks"][0]["params"] = {"blob": "x" * (params_kib * 1024)}
    return manifest


def assert_large_params_handled(api: client.ApiClient, namespace: str) -> str:
    """The 900 KiB eval stopped with a ConfigError naming its params; the 63 KiB one runs
    at its quota's pace. What happened, in words."""
    refused = get_eval(api, namespace, "params-refused")
    assert refused is not None and condition(refused, "ConfigError") == "True", refused
    message = str((refused.get("status") or {}).get("message", ""))
    assert "params" in message, message
    ran = get_eval(api, namespace, "params")
    assert ran is not None and progress_done(ran) > 0, (ran or {}).get("status")
    return f"{REFUSED_PARAMS_KIB} KiB refused; {PARAMS_KIB} KiB: {progress_done(ran)} done"


@pytest.mark.timeout(1800)
def test_quota_stuck_and_large_evals_do_not_take_the_operator_from_a_small_one(
    cluster: Cluster,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    kubectl: Callable[..., str],
    namespace: str,
    tmp_path: Path,
    wait_for: Callable[..., Any],
) -> None:
    """A 5,000-trial eval on a 3-pod quota, a 900 KiB-params eval (refused) and a 63 KiB
    one at parallelism 1,000: the small eval beside them completes in under 5 minutes,
    the operator never restarts and stays under 256 MiB, and the quota-limited namespace
    gets at most 300 pod POSTs in any 30 s (before: every missing pod every 3 s resync)."""
    suffix = uuid.uuid4().hex[:6]
    with contextlib.ExitStack() as stack:
        small_ns = stack.enter_context(fresh_namespace(core_v1, f"t-hostile-small-{suffix}"))
        params_ns = stack.enter_context(fresh_namespace(core_v1, f"t-hostile-params-{suffix}"))
        full_ns = namespace
        quota(kubectl, full_ns, QUOTA_PODS, wait_for)
        quota(kubectl, params_ns, PARAMS_QUOTA_PODS, wait_for)
        audit = AuditLog(cluster.logs / "audit.log")
        operator = stack.enter_context(
            operator_for(cluster, kubectl, [full_ns, small_ns, params_ns], tmp_path / "op.log")
        )
        assert operator.proc is not None
        started = time.monotonic()
        big = eval_manifest(
            "big",
            tasks=BIG_TASKS,
            trials=BIG_TRIALS,
            parallelism=BIG_PARALLELISM,
            ks=[1],
            retries=0,
            scripted=False,
            duration="5s",
        )
        create_eval(api_client, full_ns, big)
        create_eval(
            api_client, params_ns, large_params_manifest("params-refused", REFUSED_PARAMS_KIB)
        )
        create_eval(api_client, params_ns, large_params_manifest("params", PARAMS_KIB))
        refused = wait_for_condition(
            api_client, full_ns, "big", "CreateRefused", timeout=120, operator=operator
        )
        reason = next(
            item for item in refused["status"]["conditions"] if item["type"] == "CreateRefused"
        )
        assert reason["reason"] == "QuotaExceeded" and "exceeded quota" in reason["message"]

        small_started = time.monotonic()
        create_eval(
            api_client,
            small_ns,
            eval_manifest("small", tasks=4, trials=3, parallelism=4, scripted=False),
        )
        wait_for_condition(
            api_client,
            small_ns,
            "small",
            "Complete",
            timeout=SMALL_DEADLINE_S,
            operator=operator,
        )
        small_took = time.monotonic() - small_started
        rest = WATCH_S - (time.monotonic() - started)
        if rest > 0:
            time.sleep(rest)
        operator.assert_running()
        assert operator.starts == 1
        rss = peak_rss_mib(operator.proc.pid)
        params_outcome = assert_large_params_handled(api_client, params_ns)
        big_done = progress_done(get_eval(api_client, full_ns, "big"))
        posts = audit.pod_creates(full_ns)
        most = most_in_any_window(posts, 30.0)
        events = kubectl(
            "get",
            "events",
            "-n",
            full_ns,
            "--field-selector",
            "involvedObject.name=big,reason=QuotaExceeded",
            "-o",
            "json",
        )
        quota_events = sum(int(e.get("count") or 1) for e in json.loads(events)["items"])
        print(
            f"small eval complete in {small_took:.1f} s; quota-limited namespace: "
            f"{len(posts)} pod POSTs in {time.monotonic() - started:.0f} s, at most {most} in "
            f"any 30 s, {big_done} trials done, {quota_events} QuotaExceeded events; "
            f"operator peak RSS {rss:.1f} MiB; large params: {params_outcome}"
        )
        assert small_took < SMALL_DEADLINE_S
        assert posts, "no pod POST of the operator in the audit log"
        assert most <= MAX_POSTS_PER_30S, most
        assert big_done > 0
        assert 1 <= quota_events <= 2, quota_events
        assert rss < RSS_LIMIT_MIB, f"operator peak RSS {rss:.1f} MiB\n{operator.log_tail()}"
