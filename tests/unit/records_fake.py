"""A fake RecordsClient (the shape of passhat.operator.records_client) and a sample eval.

`install(monkeypatch, client)` makes every `passhat trials NAME`, `passhat transcripts
NAME` and `passhat report NAME --bundle` of the test read `client` instead of a cluster.
"""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import pytest

from passhat import cli
from passhat.records.record import AttemptRecord

Key = tuple[str, int, int]

TEMPLATE = {"spec": {"containers": [{"name": "t", "image": "busybox", "command": ["true"]}]}}


class FakeRecordsClient:
    """Serves one eval's manifest, records and transcripts as the records API would."""

    def __init__(
        self,
        manifest: dict[str, Any],
        records: list[AttemptRecord],
        transcripts: dict[Key, bytes],
    ) -> None:
        self.manifest = manifest
        self._records = records
        self.transcripts = transcripts
        self.calls: list[tuple[str, ...]] = []

    def records(
        self, namespace: str, name: str, *, uid: str | None = None
    ) -> tuple[dict[str, Any], list[AttemptRecord]]:
        self.calls.append(("records", namespace, name, str(uid)))
        if (namespace, name) != (self.manifest["namespace"], self.manifest["name"]):
            from passhat.api.errors import InputError

            raise InputError(f'consistencyeval "{name}" has no records in "{namespace}"')
        return self.manifest, [dict(r) for r in self._records]  # type: ignore[misc]

    def transcript(
        self,
        namespace: str,
        name: str,
        *,
        task_id: str,
        trial: int,
        attempt: int,
        uid: str | None = None,
    ) -> bytes | None:
        self.calls.append(("transcript", task_id, str(trial), str(attempt), str(uid)))
        return self.transcripts.get((task_id, trial, attempt))


def install(monkeypatch: pytest.MonkeyPatch, client: FakeRecordsClient) -> None:
    """Make `passhat.operator.records_client.RecordsClient(...)` return `client`."""
    module = types.ModuleType("passhat.operator.records_client")
    module.RecordsClient = lambda kubeconfig=None: client  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "passhat.operator.records_client", module)


def record(
    task_id: str,
    trial: int,
    attempt: int,
    outcome: str,
    reason: str,
    *,
    final: bool = True,
    result: dict[str, Any] | None = None,
) -> AttemptRecord:
    """A cluster record: the journal fields and what a pod adds."""
    return {
        "task_id": task_id,
        "trial": trial,
        "attempt": attempt,
        "outcome": outcome,
        "reason": reason,
        "exit_code": {"pass": 0, "fail": 1}.get(outcome),
        "duration_s": 1.5,
        "final": final,
        "message": "OOMKilled" if reason == "oom_killed" else "",
        "pod": f"ev-{task_id}-{trial}-{attempt}",
        "node": "node-1",
        "started_at": "2026-12-03T10:00:00Z",
        "finished_at": "2026-12-03T10:00:01Z",
        "log_bytes": 20,
        "log_truncated": False,
        "result": result,
    }


def sample_client() -> FakeRecordsClient:
    """Eval ns/ev: task `flaky/one` passes 1 of 2 (an OOM kill retried), `steady` passes
    both, `broken` fails both (one result JSON); `steady` trial 1 has no transcript."""
    records = [
        record("flaky/one", 0, 0, "infra_error", "oom_killed", final=False),
        record("flaky/one", 0, 1, "pass", "result", result={"outcome": "pass", "score": 1.0}),
        record("flaky/one", 1, 0, "fail", "exit_code"),
        record("steady", 0, 0, "pass", "exit_code"),
        record("steady", 1, 0, "pass", "exit_code"),
        record("broken", 0, 0, "fail", "result", result={"outcome": "fail", "reason": "wrong"}),
        record("broken", 1, 0, "infra_error", "evicted", final=False),
        record("broken", 1, 1, "fail", "exit_code"),
    ]
    transcripts = {
        (r["task_id"], r["trial"], r["attempt"]): (
            f"log of {r['task_id']} {r['trial']}-{r['attempt']}\n".encode()
        )
        for r in records
        if (r["task_id"], r["trial"]) != ("steady", 1)
    }
    manifest = {
        "namespace": "ns",
        "name": "ev",
        "uid": "0000-1111",
        "creationTimestamp": "2026-12-03T09:59:00Z",
        "taskIds": ["flaky/one", "steady", "broken"],
        "spec": {
            "tasks": [{"id": "flaky/one"}, {"id": "steady"}, {"id": "broken"}],
            "trials": 2,
            "trial": {"template": TEMPLATE},
        },
    }
    return FakeRecordsClient(manifest, records, transcripts)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`passhat argv...` in-process: (exit code, stdout, stderr)."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, err: str, *needles: str) -> None:
    """Exit 2 and a single `passhat: error:` line naming every needle (no traceback)."""
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("passhat: error: "), err
    for needle in needles:
        assert needle in lines[0], err


def jsonl_records(text: str) -> list[dict[str, Any]]:
    """The JSON objects of JSON Lines text."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]
