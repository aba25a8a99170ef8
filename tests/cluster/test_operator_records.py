"""Every attempt on the record, against the real node and the real S3 server (SeaweedFS).

The operator runs as a host process archiving into the cluster's S3 bucket below a prefix
of the test's own; the records are read back from S3 itself (the read path through the
records API is test_records_api's and test_helm_install's). Pinned here: exact records for
OOM kills, deadlines and exit-75 retries with their transcripts and result JSON, and
exactly-once archiving when the store is killed mid-eval and the operator is SIGKILLed
between recording attempts and archiving them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from passhat.records import StoreLayout
from passhat.trials.ledger import SlotLedger
from tests.cluster.operator_helpers import (
    OperatorProcess,
    create_eval,
    get_eval,
    held_pods,
    install_crd,
    wait_for_condition,
)
from tests.cluster.s3_helpers import S3Server
from tests.cluster.surface_helpers import module_namespace, shutdown
from tests.cluster.test_operator_realnode import RESTRICTED, real_eval

COMPLETE_TIMEOUT_S = 600
REPO = Path(__file__).resolve().parents[2]


def records_in(server: S3Server, prefix: str, layout: StoreLayout) -> dict[tuple[int, ...], Any]:
    """{(task, trial, attempt): (record, LastModified)} of one eval, read from S3."""
    s3 = server.client()
    found: dict[tuple[int, ...], Any] = {}
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=server.bucket, Prefix=f"{prefix}/{layout.records_prefix}"
    )
    for page in pages:
        for item in page.get("Contents", ()):
            key = StoreLayout.parse_record_key(item["Key"])
            assert key is not None, item["Key"]
            body = s3.get_object(Bucket=server.bucket, Key=item["Key"])["Body"].read()
            found[key] = (json.loads(body), item["LastModified"])
    return found


def transcript(server: S3Server, prefix: str, layout: StoreLayout, key: tuple[int, ...]) -> str:
    obj = server.client().get_object(
        Bucket=server.bucket, Key=f"{prefix}/{layout.transcript_key(*key)}"
    )
    return str(obj["Body"].read().decode())


def ledger_attempts(ledger: SlotLedger) -> set[tuple[int, ...]]:
    return {
        (task, trial, attempt)
        for task in range(ledger.n_tasks)
        for trial in range(ledger.trials)
        for attempt in range(ledger.attempts(task, trial))
    }


def condition(body: dict[str, Any], kind: str) -> str | None:
    for item in (body.get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            return str(item.get("status"))
    return None


def weed_pid() -> int:
    """The running S3 server's pid (its pid file in .cluster/run names a `weed` process)."""
    for path in sorted((REPO / ".cluster" / "run").glob("*.pid")):
        pid = int(path.read_text().strip() or 0)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"weed" in cmdline.split(b"\0")[0]:
            return pid
    pytest.fail("no running S3 server (weed) found in .cluster/run")


class Env:
    """A restricted namespace, an operator archiving into S3 below `prefix`."""

    def __init__(self, namespace: str, operator: OperatorProcess, prefix: str) -> None:
        self.namespace = namespace
        self.operator = operator
        self.prefix = prefix


@pytest.fixture(scope="module")
def env(
    cluster: Any,
    kubectl: Callable[..., str],
    core_v1: client.CoreV1Api,
    s3_server: S3Server,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Env]:
    """One operator for the module, archiving into the test bucket below its own prefix."""
    install_crd(kubectl)
    log_dir: Path = tmp_path_factory.mktemp("records")
    with module_namespace(core_v1, "records", labels=RESTRICTED) as namespace:
        prefix = f"tests/{namespace}"
        operator = OperatorProcess(
            kubeconfig=cluster.kubeconfig,
            namespaces=[namespace],
            log_path=log_dir / "operator.log",
            extra_args=[
                f"--records-store=s3://{s3_server.bucket}/{prefix}",
                f"--records-s3-endpoint={s3_server.endpoint}",
                f"--records-s3-region={s3_server.region}",
                "--set",
                "resync_interval_s=1",
            ],
        )
        operator.start()
        try:
            yield Env(namespace, operator, prefix)
        finally:
            shutdown(operator, kubectl, namespace)
            s3_server.delete_prefix(prefix)


def test_every_ending_is_archived_with_its_transcript(
    env: Env, api_client: client.ApiClient, s3_server: S3Server
) -> None:
    """OOM kill, deadline and exit 75 (each retried), a result JSON, pass and fail: one
    record per attempt with its reason, exit code, node and transcript; status counts the
    infra errors by reason."""
    tasks = ["pass", "fail", "infra75", "result", "oom", "hang"]
    create_eval(api_client, env.namespace, real_eval("endings", tasks, trials=2, timeout_s=12))
    body = wait_for_condition(
        api_client,
        env.namespace,
        "endings",
        "Complete",
        timeout=COMPLETE_TIMEOUT_S,
        operator=env.operator,
    )
    status = body["status"]
    assert status["summary"]["infraErrorsByReason"] == {
        "oom_killed": 2,
        "reported": 2,
        "timeout": 2,
    }
    layout = StoreLayout(env.namespace, "endings", body["metadata"]["uid"])
    found = records_in(s3_server, env.prefix, layout)
    assert set(found) == ledger_attempts(SlotLedger.unpack(status["ledger"]))
    rows = {key: record for key, (record, _) in found.items()}
    expected = {
        "pass": [("pass", "exit_code")],
        "fail": [("fail", "exit_code")],
        "infra75": [("infra_error", "reported"), ("pass", "exit_code")],
        "result": [("fail", "result")],
        "oom": [("infra_error", "oom_killed"), ("pass", "exit_code")],
        "hang": [("infra_error", "timeout"), ("pass", "exit_code")],
    }
    for (task, trial, attempt), row in rows.items():
        assert row["task_id"] == tasks[task]
        assert (row["outcome"], row["reason"]) == expected[tasks[task]][attempt], row
        assert row["final"] is (attempt == len(expected[tasks[task]]) - 1)
        assert row["node"] == "passhat-node" and row["pod"]
        text = transcript(s3_server, env.prefix, layout, (task, trial, attempt))
        assert text.startswith(f"==> {row['pod']} container agent <==\n"), text
        assert row["log_bytes"] == len(text.encode())
    assert {row["exit_code"] for key, row in rows.items() if tasks[key[0]] == "infra75"} == {
        75,
        0,
    }
    results = [row["result"] for key, row in rows.items() if tasks[key[0]] == "result"]
    assert results == [{"outcome": "fail", "reason": "wrong refund"}] * 2
    assert all(row["message"] for row in rows.values() if row["outcome"] == "infra_error")
    manifest = json.loads(
        s3_server.client()
        .get_object(Bucket=s3_server.bucket, Key=f"{env.prefix}/{layout.eval_key}")["Body"]
        .read()
    )
    assert manifest["taskIds"] == tasks


def test_store_killed_and_operator_killed_before_archiving_loses_nothing(
    env: Env,
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    s3_server: S3Server,
    wait_for: Callable[..., Any],
) -> None:
    """The S3 server is killed mid-eval: attempts recorded in status wait, held, with
    ArchivePending=True and no Complete; the operator is SIGKILLed while they wait; once
    S3 and the operator are back, every attempt is archived exactly once (records written
    before the outage are not written again) and ArchivePending turns False."""
    name = "outage"
    spec = real_eval(name, ["pass", "fail"], trials=10, parallelism=2)
    uid = create_eval(api_client, env.namespace, spec)["metadata"]["uid"]
    layout = StoreLayout(env.namespace, name, uid)
    before = wait_for(
        lambda: records_in(s3_server, env.prefix, layout) or None,
        COMPLETE_TIMEOUT_S,
        "a first archived attempt",
    )
    pid = weed_pid()
    os.kill(pid, signal.SIGKILL)
    try:
        pending = wait_for(
            lambda: (
                (b := get_eval(api_client, env.namespace, name))
                and condition(b, "ArchivePending") == "True"
                and b
            ),
            180,
            "ArchivePending=True while the store is down",
        )
        assert condition(pending, "Complete") != "True"
        assert held_pods(core_v1, env.namespace, uid), "recorded attempts wait, their pods held"
        env.operator.kill()  # NB: between recording these attempts and archiving them
    finally:
        subprocess.run(["bash", str(REPO / "hack" / "cluster" / "up.sh")], check=True)
    env.operator.start()
    body = wait_for_condition(
        api_client,
        env.namespace,
        name,
        "Complete",
        timeout=COMPLETE_TIMEOUT_S,
        operator=env.operator,
    )
    assert condition(body, "ArchivePending") == "False"
    found = records_in(s3_server, env.prefix, layout)
    assert set(found) == ledger_attempts(SlotLedger.unpack(body["status"]["ledger"]))
    assert len(found) == 20
    for key, (_, modified) in before.items():
        assert found[key][1] == modified, f"{key} was archived again"
    assert not held_pods(core_v1, env.namespace, uid)
