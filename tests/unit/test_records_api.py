"""The records API's trust and access logic, without a cluster: front-proxy certificates,
request headers, SubjectAccessReviews, routes, Status errors, and the read path."""

from __future__ import annotations

import json
from collections.abc import Mapping
from email.message import Message
from pathlib import Path
from typing import Any

import pytest

from passhat.operator import records_api
from passhat.operator.records_api import (
    AccessReviewer,
    RecordsApi,
    RequestHeaderConfig,
    UserInfo,
    proxy_cert_allowed,
    user_from_headers,
)
from passhat.records import FileStore, StoreError, StoreLayout

CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
CONFIG = RequestHeaderConfig(client_ca=CA, allowed_names=("front-proxy-client",))
PROXY = {"subject": ((("commonName", "front-proxy-client"),),)}
BASE = "/apis/records.passhat.dev/v1alpha1"


def headers(*pairs: tuple[str, str]) -> Message:
    """Request headers, repeated names kept (as http.server gives them)."""
    message = Message()
    for name, value in pairs:
        message[name] = value
    return message


class FakeAccess:
    """The cluster: which (user, namespace) may get pods/log, live evals, reviews seen."""

    def __init__(self, allowed: set[tuple[str, str]], evals: dict[str, str] | None = None) -> None:
        self.allowed = allowed
        self.evals = evals or {}  # "ns/name" -> live uid
        self.reviews: list[Mapping[str, Any]] = []
        self.fail = False

    def get_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    def get_eval(self, namespace: str, name: str) -> dict[str, Any] | None:
        uid = self.evals.get(f"{namespace}/{name}")
        return {"metadata": {"name": name, "uid": uid}} if uid else None

    def create_access_review(self, body: Mapping[str, Any]) -> dict[str, Any]:
        if self.fail:
            raise RuntimeError("HTTP 500: etcd is gone")
        self.reviews.append(body)
        spec = body["spec"]
        ns = spec["resourceAttributes"]["namespace"]
        return {"status": {"allowed": (spec["user"], ns) in self.allowed}}


def archive(
    store: FileStore,
    namespace: str,
    name: str,
    uid: str,
    *,
    created: str,
    tasks: list[str],
    attempts: list[tuple[int, int, int]],
) -> StoreLayout:
    """Write an eval's manifest, records and transcripts the way the archiver lays them out."""
    layout = StoreLayout(namespace, name, uid)
    manifest = {
        "namespace": namespace,
        "name": name,
        "uid": uid,
        "creationTimestamp": created,
        "taskIds": tasks,
        "spec": {"trials": 2},
    }
    store.put(layout.eval_key, json.dumps(manifest).encode())
    for task, trial, attempt in attempts:
        record = {"task_id": tasks[task], "trial": trial, "attempt": attempt, "outcome": "pass"}
        store.put(
            layout.transcript_key(task, trial, attempt), f"log {task}/{trial}/{attempt}".encode()
        )
        store.put(layout.record_key(task, trial, attempt), json.dumps(record).encode())
    return layout


@pytest.fixture
def store(tmp_path: Path) -> FileStore:
    return FileStore(str(tmp_path / "records"))


def make_api(store: Any, access: FakeAccess) -> RecordsApi:
    return RecordsApi(store=store, access=access, config=CONFIG)


def get(api: RecordsApi, path: str, *, user: str | None = "alice", cert: Any = PROXY) -> Any:
    pairs = [("X-Remote-User", user), ("X-Remote-Group", "system:authenticated")] if user else []
    return api.handle("GET", path, headers(*pairs), cert)


# -- trust ------------------------------------------------------------------------------------


def test_config_map_gives_the_request_header_settings() -> None:
    """The API server's JSON lists in extension-apiserver-authentication become the config."""
    config = RequestHeaderConfig.from_config_map(
        {
            "requestheader-client-ca-file": CA,
            "requestheader-allowed-names": '["front-proxy-client"]',
            "requestheader-username-headers": '["X-Remote-User"]',
            "requestheader-group-headers": '["X-Remote-Group"]',
            "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
        }
    )
    assert config.allowed_names == ("front-proxy-client",)
    assert config.username_headers == ("X-Remote-User",)
    assert config.extra_prefixes == ("X-Remote-Extra-",)


def test_config_map_without_request_header_ca_is_refused() -> None:
    """An API server without --requestheader-client-ca-file cannot proxy: said plainly."""
    with pytest.raises(ValueError, match="requestheader-client-ca-file"):
        RequestHeaderConfig.from_config_map({"client-ca-file": CA})


def test_proxy_cert_needs_an_allowed_common_name() -> None:
    """A verified cert counts only with an allowed CN; no cert never counts; no allowed
    names means any cert of the request-header CA."""
    assert proxy_cert_allowed(PROXY, CONFIG)
    assert not proxy_cert_allowed({"subject": ((("commonName", "admin"),),)}, CONFIG)
    assert not proxy_cert_allowed(None, CONFIG)
    assert not proxy_cert_allowed({}, CONFIG)
    anyone = RequestHeaderConfig(client_ca=CA)
    assert proxy_cert_allowed({"subject": ((("commonName", "admin"),),)}, anyone)


def test_user_groups_and_extra_come_from_the_headers() -> None:
    """Header names match case-insensitively; groups repeat; extra keys are lower-cased and
    percent-decoded, each header occurrence one value."""
    user = user_from_headers(
        headers(
            ("x-remote-user", "alice"),
            ("X-Remote-Group", "team-a"),
            ("X-Remote-Group", "system:authenticated"),
            ("X-Remote-Extra-Scopes", "view"),
            ("X-Remote-Extra-Scopes", "edit"),
            ("X-Remote-Extra-Example.com%2fteam", "blue"),
        ),
        CONFIG,
    )
    assert user == UserInfo(
        name="alice",
        groups=("team-a", "system:authenticated"),
        extra=(("example.com/team", ("blue",)), ("scopes", ("view", "edit"))),
    )
    assert user_from_headers(headers(("X-Remote-Group", "team-a")), CONFIG) is None


# -- access -----------------------------------------------------------------------------------


def test_review_asks_for_pods_log_get_in_the_namespace() -> None:
    """The SubjectAccessReview carries the user, groups, extra and exactly get pods/log."""
    access = FakeAccess({("alice", "team-a")})
    user = UserInfo("alice", ("g",), (("scopes", ("view",)),), uid="42")
    assert AccessReviewer(access).review(user, "team-a").allowed
    (review,) = access.reviews
    assert review["kind"] == "SubjectAccessReview"
    assert review["spec"] == {
        "user": "alice",
        "groups": ["g"],
        "extra": {"scopes": ["view"]},
        "uid": "42",
        "resourceAttributes": {
            "namespace": "team-a",
            "verb": "get",
            "resource": "pods",
            "subresource": "log",
        },
    }


def test_reviews_are_cached_for_a_while() -> None:
    """One review per user and namespace within the TTL; asked again after it."""
    now = [0.0]
    access = FakeAccess({("alice", "team-a")})
    reviewer = AccessReviewer(access, ttl_s=10, clock=lambda: now[0])
    user = UserInfo("alice")
    for _ in range(3):
        assert reviewer.review(user, "team-a").allowed
    assert not reviewer.review(user, "team-b").allowed
    assert len(access.reviews) == 2
    now[0] = 11.0
    reviewer.review(user, "team-a")
    assert len(access.reviews) == 3


def test_denied_review_is_a_forbidden_status_naming_the_right(store: FileStore) -> None:
    """403 Status: which user lacks which right in which namespace."""
    archive(store, "team-b", "ev", "u1", created="2026-01-01T00:00:00Z", tasks=["t"], attempts=[])
    response = get(
        make_api(store, FakeAccess({("alice", "team-a")})),
        f"{BASE}/namespaces/team-b/evals/ev/trials",
    )
    assert response.code == 403
    body = response.json
    assert body["kind"] == "Status" and body["reason"] == "Forbidden" and body["code"] == 403
    assert 'user "alice" cannot get pods/log in namespace "team-b"' in body["message"]
    assert body["details"]["group"] == "records.passhat.dev"


def test_review_that_fails_refuses_never_allows(store: FileStore) -> None:
    """An API server that cannot answer the review gets 503, not the records."""
    access = FakeAccess({("alice", "team-a")})
    access.fail = True
    response = get(make_api(store, access), f"{BASE}/namespaces/team-a/evals/ev/trials")
    assert response.code == 503 and response.json["reason"] == "ServiceUnavailable"


def test_without_the_proxy_cert_nothing_but_probes_answers(store: FileStore) -> None:
    """No verified proxy cert: 401 for data and discovery alike, even with user headers;
    probes answer anyone."""
    api = make_api(store, FakeAccess({("alice", "team-a")}))
    for path in (f"{BASE}/namespaces/team-a/evals/ev/trials", BASE, "/apis"):
        response = get(api, path, cert=None)
        assert response.code == 401, path
        assert response.json["reason"] == "Unauthorized"
    other = {"subject": ((("commonName", "admin"),),)}
    assert get(api, f"{BASE}/namespaces/team-a/evals/ev/trials", cert=other).code == 401
    assert get(api, "/healthz", cert=None, user=None).code == 200


def test_proxied_request_without_a_user_is_unauthorized(store: FileStore) -> None:
    """The proxy must name a user for data (discovery needs none: the aggregator's own)."""
    api = make_api(store, FakeAccess(set()))
    assert get(api, f"{BASE}/namespaces/team-a/evals/ev/trials", user=None).code == 401
    assert get(api, BASE, user=None).code == 200


def test_discovery_lists_the_group_and_its_subresources(store: FileStore) -> None:
    """/apis, the group and the version answer as the aggregator expects."""
    api = make_api(store, FakeAccess(set()))
    groups = get(api, "/apis").json
    assert groups["kind"] == "APIGroupList"
    assert groups["groups"][0]["preferredVersion"]["groupVersion"] == "records.passhat.dev/v1alpha1"
    assert get(api, "/apis/records.passhat.dev").json["kind"] == "APIGroup"
    resources = get(api, BASE).json
    assert resources["kind"] == "APIResourceList"
    assert {r["name"] for r in resources["resources"]} == {"evals/trials", "evals/transcript"}
    assert all(r["namespaced"] and r["verbs"] == ["get"] for r in resources["resources"])


def test_writes_and_unknown_paths_are_refused(store: FileStore) -> None:
    """The API is read-only; unknown paths are a NotFound Status."""
    api = make_api(store, FakeAccess({("alice", "team-a")}))
    path = f"{BASE}/namespaces/team-a/evals/ev/trials"
    assert api.handle("DELETE", path, headers(("X-Remote-User", "alice")), PROXY).code == 405
    assert get(api, f"{BASE}/namespaces/team-a/evals/ev/logs").code == 404
    assert get(api, f"{BASE}/namespaces/team-a/pods").code == 404


# -- reads ------------------------------------------------------------------------------------


def test_trials_lists_records_in_task_trial_attempt_order(store: FileStore) -> None:
    """Numeric order (task 10 after task 2), the manifest beside the records."""
    tasks = [f"t{i}" for i in range(11)]
    attempts = [(10, 0, 0), (2, 1, 0), (2, 0, 1), (2, 0, 0), (0, 0, 0)]
    archive(
        store, "team-a", "ev", "u1", created="2026-01-01T00:00:00Z", tasks=tasks, attempts=attempts
    )
    access = FakeAccess({("alice", "team-a")}, evals={"team-a/ev": "u1"})
    response = get(make_api(store, access), f"{BASE}/namespaces/team-a/evals/ev/trials")
    assert response.code == 200, response.body
    body = response.json
    assert body["kind"] == "EvalTrials" and body["apiVersion"] == "records.passhat.dev/v1alpha1"
    assert body["metadata"] == {
        "name": "ev",
        "namespace": "team-a",
        "uid": "u1",
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    assert body["live"] is True
    assert body["eval"]["taskIds"] == tasks
    order = [(r["task_id"], r["trial"], r["attempt"]) for r in body["records"]]
    assert order == [("t0", 0, 0), ("t2", 0, 0), ("t2", 0, 1), ("t2", 1, 0), ("t10", 0, 0)]


def test_deleted_eval_reads_its_newest_archived_uid(store: FileStore) -> None:
    """No live eval: the uid with the newest creationTimestamp; ?uid= picks another."""
    archive(
        store,
        "team-a",
        "ev",
        "old",
        created="2026-01-01T00:00:00Z",
        tasks=["a"],
        attempts=[(0, 0, 0)],
    )
    archive(
        store,
        "team-a",
        "ev",
        "new",
        created="2026-02-01T00:00:00Z",
        tasks=["b"],
        attempts=[(0, 1, 0)],
    )
    api = make_api(store, FakeAccess({("alice", "team-a")}))
    body = get(api, f"{BASE}/namespaces/team-a/evals/ev/trials").json
    assert body["metadata"]["uid"] == "new" and body["live"] is False
    assert [r["task_id"] for r in body["records"]] == ["b"]
    older = get(api, f"{BASE}/namespaces/team-a/evals/ev/trials?uid=old").json
    assert [r["task_id"] for r in older["records"]] == ["a"]


def test_live_eval_wins_over_newer_archives(store: FileStore) -> None:
    """A live eval's uid is the one read, even with another archived uid."""
    archive(store, "team-a", "ev", "live", created="2026-01-01T00:00:00Z", tasks=["a"], attempts=[])
    archive(store, "team-a", "ev", "gone", created="2026-02-01T00:00:00Z", tasks=["b"], attempts=[])
    access = FakeAccess({("alice", "team-a")}, evals={"team-a/ev": "live"})
    body = get(make_api(store, access), f"{BASE}/namespaces/team-a/evals/ev/trials").json
    assert body["metadata"]["uid"] == "live"


def test_no_records_is_not_found(store: FileStore) -> None:
    """An eval without any archive is a 404 Status naming it."""
    response = get(
        make_api(store, FakeAccess({("alice", "team-a")})),
        f"{BASE}/namespaces/team-a/evals/nope/trials",
    )
    assert response.code == 404
    assert 'no records of consistencyeval "nope" in namespace "team-a"' in response.json["message"]
    assert response.json["details"]["kind"] == "evals"


def test_transcript_by_task_id_trial_and_attempt(store: FileStore) -> None:
    """text/plain bytes for a known attempt; 404 (kind evals/transcript) for a missing one
    or an unknown task; 400 without the query."""
    archive(
        store,
        "team-a",
        "ev",
        "u1",
        created="2026-01-01T00:00:00Z",
        tasks=["x/y", "b"],
        attempts=[(1, 0, 2)],
    )
    api = make_api(store, FakeAccess({("alice", "team-a")}))
    path = f"{BASE}/namespaces/team-a/evals/ev/transcript"
    found = get(api, f"{path}?task=b&trial=0&attempt=2")
    assert found.code == 200 and found.content_type.startswith("text/plain")
    assert found.body == b"log 1/0/2"
    for query in ("task=b&trial=0&attempt=0", "task=zzz&trial=0&attempt=2"):
        missing = get(api, f"{path}?{query}")
        assert missing.code == 404 and missing.json["details"]["kind"] == "evals/transcript"
    assert get(api, f"{path}?task=x%2Fy&trial=0&attempt=0").code == 404
    assert get(api, f"{path}?task=b&trial=x&attempt=0").code == 400


def test_bad_uid_is_a_bad_request(store: FileStore) -> None:
    """A uid that would climb out of the eval's prefix is refused."""
    api = make_api(store, FakeAccess({("alice", "team-a")}))
    assert get(api, f"{BASE}/namespaces/team-a/evals/ev/trials?uid=..").code == 400


def test_store_failure_is_service_unavailable(store: FileStore) -> None:
    """A store that cannot answer gives 503 with its message, never a traceback."""

    class Down(FileStore):
        def get(self, key: str) -> bytes | None:
            raise StoreError("s3://bucket: connection refused")

    archive(store, "team-a", "ev", "u1", created="2026-01-01T00:00:00Z", tasks=["a"], attempts=[])
    access = FakeAccess({("alice", "team-a")}, evals={"team-a/ev": "u1"})
    response = get(make_api(Down(store.root), access), f"{BASE}/namespaces/team-a/evals/ev/trials")
    assert response.code == 503 and "connection refused" in response.json["message"]


def test_unauthorized_user_learns_nothing_about_existence(store: FileStore) -> None:
    """Refused before any lookup: the same 403 for an archived eval and a missing one."""
    archive(store, "team-b", "ev", "u1", created="2026-01-01T00:00:00Z", tasks=["a"], attempts=[])
    api = make_api(store, FakeAccess(set()))
    a = get(api, f"{BASE}/namespaces/team-b/evals/ev/trials")
    b = get(api, f"{BASE}/namespaces/team-b/evals/nope/trials")
    assert a.code == b.code == 403
    assert a.json["message"] == b.json["message"]


def test_public_names() -> None:
    """The module's exported surface."""
    assert "RecordsApiServer" in records_api.__all__ and "open_records_api" in records_api.__all__
