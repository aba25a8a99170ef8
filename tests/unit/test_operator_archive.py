"""Every attempt archived exactly once, before its pod is let go, also under kills and a
store that goes down (the in-memory API server of test_operator_loop, a real FileStore)."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from passhat.operator.archive import (
    Archiver,
    LogUnavailable,
    RecordedAttempt,
    build_record,
)
from passhat.operator.loop import EvalLoop, PassState
from passhat.operator.pods import FINALIZER, EvalRef, PodKey
from passhat.operator.status import condition_status
from passhat.records import FileStore, StoreError, StoreLayout
from passhat.trials.ledger import SlotLedger
from passhat.trials.outcomes import OOM_KILLED, Outcome, Verdict
from tests.unit.operator_fake import Killed
from tests.unit.test_operator_loop import CONFIG, Harness

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pods"


class Store(FileStore):
    """A FileStore that counts writes per key, can be down, and can kill the operator
    just before or just after a write (as a SIGKILL between two calls would)."""

    def __init__(self, root: str, rng: random.Random) -> None:
        super().__init__(root)
        self.puts: Counter[str] = Counter()
        self.down = False
        self.kill_chance = 0.0
        self.rng = rng

    def put(self, key: str, data: bytes) -> None:
        if self.down:
            raise StoreError("store down for the test")
        if self.rng.random() < self.kill_chance / 2:
            raise Killed("before a store write")
        super().put(key, data)
        self.puts[key] += 1
        if self.rng.random() < self.kill_chance / 2:
            raise Killed("after a store write")

    def exists(self, key: str) -> bool:
        if self.down:
            raise StoreError("store down for the test")
        return super().exists(key)


class ArchiveHarness(Harness):
    """Harness whose every operator process archives into one shared store."""

    def __init__(self, seed: int, store: Store) -> None:
        self.store = store
        super().__init__(seed)

    def new_loop(self) -> EvalLoop:
        return EvalLoop(
            self.api,
            self.ref,
            config=CONFIG,
            clock=self.clock,
            archiver=Archiver(self.store, self.api, clock=self.clock),
        )


def records(store: FileStore, ref: EvalRef) -> dict[tuple[int, int, int], dict[str, Any]]:
    layout = StoreLayout(ref.namespace, ref.name, ref.uid)
    found = {}
    for key in store.list(layout.records_prefix):
        parsed = StoreLayout.parse_record_key(key)
        assert parsed is not None, key
        found[parsed] = json.loads(store.get(key) or b"")
    return found


def ledger_attempts(ledger: SlotLedger) -> set[tuple[int, int, int]]:
    return {
        (task, trial, attempt)
        for task in range(ledger.n_tasks)
        for trial in range(ledger.trials)
        for attempt in range(ledger.attempts(task, trial))
    }


@pytest.mark.parametrize("seed", range(8))
def test_every_attempt_is_archived_once_under_kills(seed: int, tmp_path: Path) -> None:
    """Operator killed at random API calls and store writes: one record per attempt,
    written once, with the attempt's log, and infra errors by reason in status."""
    store = Store(str(tmp_path), random.Random(seed + 7))
    store.kill_chance = 0.05
    harness = ArchiveHarness(seed, store)
    harness.run(kill_chance=0.3)
    assert harness.kills > 0
    ledger = SlotLedger.unpack(harness.status["ledger"])
    found = records(store, harness.ref)
    assert set(found) == ledger_attempts(ledger)
    layout = StoreLayout("ns", "demo", harness.ref.uid)
    for (task, trial, attempt), record in found.items():
        assert store.puts[layout.record_key(task, trial, attempt)] == 1
        assert (record["task_id"], record["trial"], record["attempt"]) == (
            f"task-{task}",
            trial,
            attempt,
        )
        transcript = store.get(layout.transcript_key(task, trial, attempt)) or b""
        assert record["pod"] in transcript.decode()
        assert record["log_bytes"] == len(transcript)
    finals = Counter(
        record["outcome"] for record in found.values() if record["final"] and record["outcome"]
    )
    tallies = ledger.tallies([f"task-{i}" for i in range(ledger.n_tasks)])
    assert finals["pass"] == sum(t.passed for t in tallies)
    assert finals["fail"] == sum(t.failed for t in tallies)
    by_reason = Counter(r["reason"] for r in found.values() if r["outcome"] == "infra_error")
    assert harness.status["summary"]["infraErrorsByReason"] == dict(by_reason)
    assert condition_status(harness.status, "Complete") == "True"
    assert not harness.api.pods_with_finalizer()
    manifest = json.loads(store.get(layout.eval_key) or b"")
    assert manifest["taskIds"] == [f"task-{i}" for i in range(ledger.n_tasks)]
    assert manifest["uid"] == harness.ref.uid


def test_a_store_that_is_down_holds_pods_and_blocks_completion(tmp_path: Path) -> None:
    """While the store refuses: ArchivePending, pods held (at most 2 x parallelism: the
    running ones end after the store failed), no pod created once the failure is known,
    never Complete; once it answers: every record archived, condition cleared."""
    store = Store(str(tmp_path), random.Random(0))
    harness = ArchiveHarness(3, store)
    for _ in range(6):
        harness.clock.now += 1.0
        harness.kubelet.step()
        harness.loop.run_pass()
    store.down = True
    created = []
    for _ in range(40):
        harness.clock.now += 1.0
        harness.kubelet.step()
        result = harness.loop.run_pass()
        assert result.state is PassState.CONTINUE
        created.append(result.created)
        assert len(harness.api.pods_with_finalizer()) <= 2 * 4  # parallelism 4
    assert sum(created[2:]) == 0
    status = harness.status
    assert condition_status(status, "ArchivePending") == "True"
    assert condition_status(status, "Complete") != "True"
    assert "store down for the test" in next(
        c["message"] for c in status["conditions"] if c["type"] == "ArchivePending"
    )
    store.down = False
    harness.run()
    status = harness.status
    assert condition_status(status, "ArchivePending") == "False"
    assert condition_status(status, "Complete") == "True"
    ledger = SlotLedger.unpack(status["ledger"])
    assert set(records(store, harness.ref)) == ledger_attempts(ledger)


def test_the_record_carries_what_the_pod_said() -> None:
    """A captured OOM-killed pod: exit code, node, times, reason, message, no result."""
    pod = json.loads((FIXTURES / "oom_shell_exit0.json").read_text())
    verdict = Verdict(Outcome.INFRA_ERROR, OOM_KILLED, "container agent was OOM-killed")
    record = build_record(
        pod,
        RecordedAttempt("t", PodKey(0, 1, 2), verdict, final=False),
        main_container=pod["spec"]["containers"][0]["name"],
        log_bytes=12,
    )
    assert record["reason"] == OOM_KILLED and record["outcome"] == "infra_error"
    assert record["node"] == pod["spec"]["nodeName"]
    assert record["pod"] == pod["metadata"]["name"]
    assert (record["trial"], record["attempt"], record["final"]) == (1, 2, False)
    assert record["exit_code"] == 0
    assert record["started_at"] and record["finished_at"]
    assert record["duration_s"] is not None and record["duration_s"] >= 0


def test_the_result_json_comes_from_the_termination_message() -> None:
    """The trial's result JSON (its termination message) is in the record, parsed."""
    pod = {
        "metadata": {"name": "p"},
        "spec": {"nodeName": "n"},
        "status": {
            "containerStatuses": [
                {
                    "name": "agent",
                    "state": {
                        "terminated": {
                            "exitCode": 1,
                            "message": '{"outcome": "fail", "score": 0.25, "reason": "wrong"}',
                        }
                    },
                }
            ]
        },
    }
    attempt = RecordedAttempt("t", PodKey(0, 0, 0), Verdict(Outcome.FAIL, "result"), True)
    record = build_record(pod, attempt, main_container="agent")
    assert record["result"] == {"outcome": "fail", "score": 0.25, "reason": "wrong"}


class Logs:
    """A log reader with fixed logs, or one that cannot reach the kubelet."""

    def __init__(self, logs: dict[str, bytes], *, unreachable: bool = False) -> None:
        self.logs = logs
        self.unreachable = unreachable

    def read_pod_log(self, namespace: str, name: str, container: str, limit_bytes: int) -> bytes:
        if self.unreachable:
            raise LogUnavailable("kubelet unreachable")
        return self.logs.get(container, b"")[:limit_bytes]


POD = {
    "metadata": {"name": "p"},
    "status": {
        "initContainerStatuses": [{"name": "setup", "state": {"terminated": {"exitCode": 0}}}],
        "containerStatuses": [{"name": "agent", "state": {"terminated": {"exitCode": 0}}}],
    },
}
ATTEMPT = RecordedAttempt("t", PodKey(0, 0, 0), Verdict(Outcome.PASS, "exit_code"), True)


def archive(archiver: Archiver, *, fresh: bool = True) -> bool:
    return archiver.archive(
        EvalRef("ns", "e", "u"),
        pod=POD,
        attempt=ATTEMPT,
        manifest={"name": "e"},
        main_container="agent",
        fresh=fresh,
    )


def test_a_long_log_is_cut_at_the_limit_and_marked(tmp_path: Path) -> None:
    """Every container's log under a header; past the per-attempt cap, cut and marked."""
    store = FileStore(str(tmp_path))
    logs = Logs({"setup": b"setting up\n", "agent": b"x" * 100})
    assert archive(Archiver(store, logs, log_limit=50))
    layout = StoreLayout("ns", "e", "u")
    text = (store.get(layout.transcript_key(0, 0, 0)) or b"").decode()
    assert text.startswith("==> p container setup <==\nsetting up\n==> p container agent <==\n")
    assert "x" * (50 - len("setting up\n")) in text
    assert text.endswith("[passhat: transcript cut at 50 bytes]\n")
    record = json.loads(store.get(layout.record_key(0, 0, 0)) or b"")
    assert record["log_truncated"] is True


def test_an_archived_attempt_is_not_written_again(tmp_path: Path) -> None:
    """An attempt found in the store (recorded by an earlier pass) is not written twice."""
    store = Store(str(tmp_path), random.Random(0))
    archiver = Archiver(store, Logs({}))
    assert archive(archiver)
    assert not archive(Archiver(store, Logs({})), fresh=False)
    assert max(store.puts.values()) == 1


def test_an_unreachable_kubelet_delays_the_archive_then_notes_it(tmp_path: Path) -> None:
    """A log that cannot be read keeps the pod held for the grace period; then the
    attempt is archived without it, saying why."""
    now = [0.0]
    store = FileStore(str(tmp_path))
    archiver = Archiver(store, Logs({}, unreachable=True), log_grace_s=60, clock=lambda: now[0])
    with pytest.raises(LogUnavailable):
        archive(archiver)
    now[0] = 61.0
    assert archive(archiver)
    text = (store.get(StoreLayout("ns", "e", "u").transcript_key(0, 0, 0)) or b"").decode()
    assert "[passhat: the log could not be read: kubelet unreachable]" in text


def test_a_failing_store_is_reported_until_it_works(tmp_path: Path) -> None:
    """`failing(uid)` carries the store's error until an archive of that eval succeeds."""
    store = Store(str(tmp_path), random.Random(0))
    archiver = Archiver(store, Logs({}))
    store.down = True
    with pytest.raises(StoreError):
        archive(archiver)
    assert archiver.failing("u") == "store down for the test"
    store.down = False
    assert archive(archiver)
    assert archiver.failing("u") is None


def test_pods_held_for_their_archive_keep_the_finalizer(tmp_path: Path) -> None:
    """A pod whose archive failed still holds the trial-accounting finalizer."""
    store = Store(str(tmp_path), random.Random(0))
    harness = ArchiveHarness(5, store)
    store.down = True
    for _ in range(10):
        harness.clock.now += 1.0
        harness.kubelet.step(share=1.0)
        harness.loop.run_pass()
    held = harness.api.pods_with_finalizer()
    assert held
    assert all(FINALIZER in harness.api.pods[name]["metadata"]["finalizers"] for name in held)
