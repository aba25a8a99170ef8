"""The records API runs in the operator's process, which drives every namespace's evals: a
read builds its whole answer in memory, so at most 2 reads run at once, at most 1 per user,
and a read that finds no slot is refused at once with 429 and Retry-After (never queued),
which `RecordsClient` waits out. Before, a tenant allowed to read only their own namespace
could run the operator out of memory with a few parallel reads of one big eval."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from passhat.operator.records_api import RecordsApi, Response, status
from passhat.operator.records_client import RecordsClient
from passhat.records import FileStore, StoreError
from tests.unit.test_records_api import BASE, CONFIG, PROXY, FakeAccess, archive, headers

TRIALS = f"{BASE}/namespaces/team-a/evals/big/trials"


class SlowStore(FileStore):
    """A store whose listing waits until `go` is set (a read in flight), or fails."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.go = threading.Event()
        self.entered = threading.Semaphore(0)
        self.fail = False

    def list(self, prefix: str) -> Iterator[str]:
        self.entered.release()
        self.go.wait(10)
        if self.fail:
            raise StoreError("the store is down")
        yield from super().list(prefix)


@pytest.fixture
def api(tmp_path: Path) -> RecordsApi:
    store = SlowStore(str(tmp_path / "records"))
    archive(
        store,
        "team-a",
        "big",
        "uid-1",
        created="2026-01-01T00:00:00Z",
        tasks=["t"],
        attempts=[(0, 0, 0)],
    )
    users = {("alice", "team-a"), ("bob", "team-a"), ("carol", "team-a")}
    return RecordsApi(store=store, access=FakeAccess(users, {"team-a/big": "uid-1"}), config=CONFIG)


def read(api: RecordsApi, user: str) -> Response:
    return api.handle("GET", TRIALS, headers(("X-Remote-User", user)), PROXY)


def in_flight(api: RecordsApi, user: str, answers: list[Response]) -> threading.Thread:
    """A read by `user` started in a thread, returned once it waits in the store."""
    thread = threading.Thread(target=lambda: answers.append(read(api, user)))
    thread.start()
    store = api.store
    assert isinstance(store, SlowStore) and store.entered.acquire(timeout=10)
    return thread


def test_reads_are_bounded_per_user_and_in_all(api: RecordsApi) -> None:
    """alice's second read and carol's third one are refused with 429 while alice's and
    bob's run; once they end every user reads again."""
    store = api.store
    assert isinstance(store, SlowStore)
    answers: list[Response] = []
    threads = [in_flight(api, "alice", answers)]
    again = read(api, "alice")
    assert again.code == 429, "a user's second read in flight was not refused"
    assert ("Retry-After", "1") in again.headers
    assert again.json["reason"] == "TooManyRequests"
    assert again.json["details"]["retryAfterSeconds"] == 1
    threads.append(in_flight(api, "bob", answers))
    assert read(api, "carol").code == 429
    store.go.set()
    for thread in threads:
        thread.join(10)
    assert [answer.code for answer in answers] == [200, 200]
    assert read(api, "alice").code == 200 and read(api, "carol").code == 200


def test_a_failed_read_gives_its_slot_back(api: RecordsApi) -> None:
    """A store error (503) frees the slot like a success."""
    store = api.store
    assert isinstance(store, SlowStore)
    store.go.set()
    store.fail = True
    assert read(api, "alice").code == 503
    store.fail = False
    assert read(api, "alice").code == 200


def test_the_client_waits_out_a_busy_records_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """429 twice, then the answer: the client sleeps retryAfterSeconds and reads it."""
    busy = status(429, "too many record reads in flight", retry_after=1)
    answers = [(429, busy.body), (429, busy.body), (200, b'{"eval": {}, "records": []}')]
    slept: list[float] = []

    def once(self: Any, *args: Any) -> tuple[int, bytes]:
        return answers.pop(0)

    monkeypatch.setattr(RecordsClient, "_get_once", once)
    monkeypatch.setattr(time, "sleep", slept.append)
    client = RecordsClient.__new__(RecordsClient)
    assert client.records("team-a", "big") == ({}, [])
    assert slept == [1.0, 1.0]
