"""A `trials` read answers at most `PAGE_RECORDS` records (5,000: about 14 MiB of the
operator's memory) and a `continue` token, as Kubernetes lists do; `RecordsClient` reads
every page of the same eval and puts them in task, trial, attempt order. Before, one read
built every record of an eval at once: at the slot limit (200,000) about 550 MiB, over the
operator's 512 MiB limit, from one `passhat trials` of a tenant's own eval."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from passhat.operator import records_api
from passhat.operator.records_client import RecordsClient
from passhat.records import FileStore
from tests.unit.test_records_api import BASE, FakeAccess, archive, get, make_api

TASKS = [f"t{n}" for n in range(12)]  # NB: t10 and t11 sort between t1 and t2 as keys
ATTEMPTS = [(task, trial, 0) for task in range(12) for trial in range(2)]
PATH = f"{BASE}/namespaces/team-a/evals/ev/trials"


@pytest.fixture
def api(tmp_path: Path) -> records_api.RecordsApi:
    store = FileStore(str(tmp_path / "records"))
    archive(
        store, "team-a", "ev", "uid-1", created="2026-01-01T00:00:00Z", tasks=TASKS,
        attempts=ATTEMPTS,
    )  # fmt: skip
    return make_api(store, FakeAccess({("alice", "team-a")}, {"team-a/ev": "uid-1"}))


def positions(records: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
    return [(TASKS.index(r["task_id"]), r["trial"], r["attempt"]) for r in records]


def test_pages_hold_at_most_limit_records_and_together_every_one(
    api: records_api.RecordsApi,
) -> None:
    """limit 5 over 24 records: pages of 5, 5, 5, 5, 4, the last without a token; each
    page in task order; together every record once."""
    seen: list[tuple[int, int, int]] = []
    sizes = []
    token = ""
    while True:
        query = {"limit": "5", **({"continue": token} if token else {})}
        body = get(api, f"{PATH}?{urllib.parse.urlencode(query)}").json
        page = positions(body["records"])
        assert page == sorted(page)
        seen += page
        sizes.append(len(page))
        token = body["metadata"].get("continue", "")
        if not token:
            break
    assert sizes == [5, 5, 5, 5, 4]
    assert sorted(seen) == sorted(ATTEMPTS) and len(seen) == len(set(seen))


def test_without_a_limit_a_page_is_page_records(
    api: records_api.RecordsApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No `?limit=`: at most PAGE_RECORDS (here 10) and a token; a limit over it is 400."""
    monkeypatch.setattr(records_api, "PAGE_RECORDS", 10)
    body = get(api, PATH).json
    assert len(body["records"]) == 10 and body["metadata"]["continue"]
    for bad in ("0", "11", "x"):
        answer = get(api, f"{PATH}?limit={bad}")
        assert answer.code == 400 and "limit" in answer.json["message"]


def test_the_client_reads_every_page_of_one_eval_in_order(
    api: records_api.RecordsApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages of 5 through RecordsClient: all 24 records, in task, trial, attempt order,
    every page after the first asked with the first page's uid."""
    monkeypatch.setattr(records_api, "PAGE_RECORDS", 5)
    asked: list[dict[str, str]] = []

    def once(self: Any, namespace: str, name: str, sub: str, query: dict[str, str]) -> Any:
        asked.append(dict(query))
        path = f"{BASE}/namespaces/{namespace}/evals/{name}/{sub}"
        if query:
            path += "?" + urllib.parse.urlencode(query)
        answer = get(api, path)
        return answer.code, answer.body

    monkeypatch.setattr(RecordsClient, "_get_once", once)
    client = RecordsClient.__new__(RecordsClient)
    manifest, records = client.records("team-a", "ev")
    assert manifest["uid"] == "uid-1"
    assert positions([dict(record) for record in records]) == sorted(ATTEMPTS)
    assert len(asked) == 5 and asked[0] == {}
    assert all(query["uid"] == "uid-1" and query["continue"] for query in asked[1:])
