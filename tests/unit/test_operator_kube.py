"""`Kube.list_pods` keeps only what the loop reads: same verdicts, paging, 410 restarts."""

from __future__ import annotations

import json
import threading
import urllib.parse
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from passhat.api.spec import Grading
from passhat.operator import gradercheck
from passhat.operator.archive import RecordedAttempt, build_record
from passhat.operator.config import OperatorConfig
from passhat.operator.kube import ApiError, Kube, _CredentialHook, slim_pod
from passhat.operator.loop import _duration, _ended
from passhat.operator.ownership import PodSigner
from passhat.operator.pods import (
    ANNOTATION_TRANSCRIPT,
    FINALIZER,
    LABEL_EVAL_UID,
    LABEL_GRADING,
    PodKey,
    pod_key,
)
from passhat.operator.queueing import waiting_for_admission
from passhat.trials.classify_pod import classify_pod
from passhat.trials.outcomes import Outcome, Verdict
from tests.unit.protobuf_pods import as_protobuf

PODS = Path(__file__).resolve().parents[1] / "fixtures" / "pods"
FIXTURES = sorted(p.name for p in PODS.glob("*.json"))


def fixture(name: str) -> dict[str, Any]:
    pod: dict[str, Any] = json.loads((PODS / name).read_text())
    return pod


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("age_s", [1.0, 30.0, 3600.0])
@pytest.mark.parametrize("timeout_is", ["infra_error", "fail"])
def test_slim_pod_classifies_like_the_whole_pod(name: str, age_s: float, timeout_is: Any) -> None:
    """Every captured pod gets the same verdict (and message), key, duration and
    waiting-for-admission slimmed."""
    pod = fixture(name)
    created = datetime.fromisoformat(pod["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    slim = slim_pod(pod)

    def verdict(p: dict[str, Any]) -> Any:
        return classify_pod(
            p, grading=Grading(), timeout_is=timeout_is, now=created.timestamp() + age_s
        )

    assert verdict(slim) == verdict(pod)
    assert pod_key(slim) == pod_key(pod)
    assert _duration(slim) == _duration(pod)
    assert waiting_for_admission(slim) == waiting_for_admission(pod) == (name == "kueue_gated.json")
    assert _ended(slim) == _ended(pod)
    assert gradercheck._ended(slim) == gradercheck._ended(pod)
    assert gradercheck._exit_code(slim) == gradercheck._exit_code(pod)
    assert PodSigner(b"k").owner_uid(slim) == PodSigner(b"k").owner_uid(pod)
    attempt = RecordedAttempt("t", PodKey(0, 1, 0), Verdict(Outcome.FAIL, "r"), final=True)
    main = pod["spec"]["containers"][0]["name"]
    assert build_record(slim, attempt, main_container=main) == build_record(
        pod, attempt, main_container=main
    )


def test_slim_pod_keeps_only_what_is_read() -> None:
    """Metadata the loop reads (the resourceVersion: has a running pod changed?), container
    names, the grace period, the node, the status."""
    pod = fixture("kwok_exit0.json")
    slim = slim_pod(pod)
    assert set(slim) == {"metadata", "spec", "status"}
    assert set(slim["metadata"]) == {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "labels",
        "finalizers",
        "creationTimestamp",
    }
    assert slim["metadata"]["labels"] == pod["metadata"]["labels"]
    assert slim["spec"] == {
        "containers": [{"name": c["name"]} for c in pod["spec"]["containers"]],
        "terminationGracePeriodSeconds": pod["spec"]["terminationGracePeriodSeconds"],
        "nodeName": pod["spec"]["nodeName"],
    }
    status = pod["status"]
    assert slim["status"] == {
        "phase": "Succeeded",
        "conditions": [
            {key: c[key] for key in ("type", "status", "reason") if key in c}
            for c in status["conditions"]
        ],
        "startTime": status["startTime"],
        "containerStatuses": [
            {"name": "trial", "state": status["containerStatuses"][0]["state"], "lastState": {}}
        ],
    }
    assert len(json.dumps(slim)) < len(json.dumps(pod)) / 2
    deleted = slim_pod(fixture("sigterm_deleted.json"))["metadata"]
    assert {"deletionTimestamp", "deletionGracePeriodSeconds"} <= set(deleted)


def test_slim_pod_keeps_the_scheduling_gates() -> None:
    """A pod gated by Kueue still reads as waiting for admission once slimmed (the loop
    counts it as waiting, not running, and bounds the eval's queued pods by it)."""
    pod = fixture("kwok_exit0.json")
    pod["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    assert waiting_for_admission(slim_pod(pod))
    del pod["spec"]["schedulingGates"]
    assert not waiting_for_admission(slim_pod(pod))


@pytest.mark.parametrize(
    "pod",
    [{}, {"metadata": 3, "spec": "x"}, {"spec": {"containers": [3, {"image": "i"}]}}],
)
def test_slim_pod_of_odd_pods_does_not_raise(pod: dict[str, Any]) -> None:
    """Malformed parts become empty ones, as the classifier would read them."""
    slim = slim_pod(pod)
    assert classify_pod(slim, grading=Grading(), now=0.0) == classify_pod(
        pod, grading=Grading(), now=0.0
    )


class PagedKube(Kube):
    """`Kube` whose HTTP layer serves pages of pods from a list (and a 410 once), in
    protobuf or JSON as asked."""

    def __init__(
        self, pages: list[list[dict[str, Any]]], *, expire_once: bool, protobuf: bool = True
    ) -> None:
        super().__init__(client.Configuration(), OperatorConfig(pod_protobuf=protobuf))
        self.pages = pages
        self.expire_once = expire_once
        self.queries: list[dict[str, str]] = []

    def _request(self, verb: str, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        query = dict(kwargs.get("query") or {})
        self.queries.append(query)
        index = int(query.get("continue") or 0)
        if index == 1 and self.expire_once:
            self.expire_once = False
            return 410, {"message": "the continue token expired"}
        more = {"continue": str(index + 1)} if index + 1 < len(self.pages) else {}
        page = {"items": [dict(p) for p in self.pages[index]], "metadata": more}
        return 200, as_protobuf(page) if kwargs.get("raw") else page


@pytest.mark.parametrize("protobuf", [True, False])
def test_list_pods_pages_slims_and_restarts_on_410(protobuf: bool) -> None:
    """Pages are followed, each pod slimmed; an expired snapshot starts the list over."""
    pod = fixture("kwok_exit0.json")
    pages = [[pod, pod], [pod], [pod]]
    kube = PagedKube(pages, expire_once=True, protobuf=protobuf)
    try:
        pods = kube.list_pods("ns", "uid-1")
    finally:
        kube.close()
    assert pods == [slim_pod(pod)] * 4
    assert [q.get("continue") for q in kube.queries] == [None, "1", None, "1", "2"]
    assert all(q["labelSelector"].startswith("passhat.dev/eval-uid=uid-1") for q in kube.queries)
    # NB: a first page of 10, then twice as many each (the size of a page is not known
    # here: no HTTP)
    assert [q["limit"] for q in kube.queries] == ["10", "20", "10", "20", "40"]


class BigPodsKube(Kube):
    """`Kube` whose HTTP layer answers LISTs with pages of `pod`, `pages` pages long."""

    def __init__(self, pod: dict[str, Any], pages: int) -> None:
        # NB: JSON: its pages' size is what it measures (the paging is the same either way)
        super().__init__(client.Configuration(), OperatorConfig(pod_protobuf=False))
        self.pod = pod
        self.pages = pages
        self.limits: list[int] = []

    def _once(
        self,
        method: str,
        url_path: str,
        body: Any,
        content_type: str,
        *,
        raw: bool = False,
        accept: str | None = None,
    ) -> tuple[int, Any]:
        query = dict(urllib.parse.parse_qsl(url_path.partition("?")[2]))
        self.limits.append(int(query["limit"]))
        index = int(query.get("continue") or 0)
        more = {"continue": str(index + 1)} if index + 1 < self.pages else {}
        page = {"items": [self.pod] * self.limits[-1], "metadata": more}
        self._local.body_bytes = len(json.dumps(page))
        return 200, page


def test_list_pages_shrink_to_a_few_mib_when_pods_are_large() -> None:
    """Pods carrying 900 KiB of params each: the first page asks for 10, the next ones
    for as many as fit in LIST_PAGE_BYTES (8 MiB: 9 pods), not 500 (a 450 MB response);
    small pods get pages of 10, 20, 40, ... up to 500."""
    pod = fixture("kwok_exit0.json")
    pod["spec"]["containers"][0]["env"] = [{"name": "PASSHAT_TASK", "value": "x" * 900 * 1024}]
    kube = BigPodsKube(pod, pages=4)
    small = BigPodsKube(fixture("kwok_exit0.json"), pages=9)
    try:
        pods = kube.list_pods("ns", "uid-1")
        small.list_pods("ns", "uid-1")
    finally:
        kube.close()
        small.close()
    assert small.limits == [10, 20, 40, 80, 160, 320, 500, 500, 500]
    assert kube.limits == [10, 9, 9, 9]
    assert len(pods) == 37 and pods[0] == slim_pod(pod)


class ScriptedKube(Kube):
    """`Kube` whose HTTP layer records each request and answers from a script."""

    def __init__(self, answers: list[tuple[int, Any]]) -> None:
        super().__init__(client.Configuration())
        self.answers = answers
        self.requests: list[tuple[str, str, Any]] = []

    def drain(self) -> None:
        """Wait until every background release is done."""
        assert self._release_pool.join(30)

    def _request(self, verb: str, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        self.requests.append((method, path, kwargs.get("body")))
        status, data = self.answers.pop(0) if self.answers else (200, {})
        if kwargs.get("raw") and 200 <= status < 300 and isinstance(data, dict):
            return status, as_protobuf(data)  # NB: a pod read, asked for in protobuf
        return status, data


def ours(name: str, finalizers: list[str], *, uid: str = "u-1") -> dict[str, Any]:
    """A pod the operator made (controller reference to eval e-1, the creation mark)."""
    owner = {"kind": "ConsistencyEval", "name": "e", "uid": "e-1", "controller": True}
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid}
    meta |= {"finalizers": finalizers, "labels": {}, "ownerReferences": [owner]}
    return PodSigner(OperatorConfig().pod_key).sign({"metadata": meta})


def trial_pod(finalizers: list[str]) -> dict[str, Any]:
    return ours("p", finalizers)


POD_PATH = "/api/v1/namespaces/ns/pods/p"
SMP = "application/strategic-merge-patch+json"


def finalizer_out(**more: Any) -> dict[str, Any]:
    """The strategic merge patch that takes our finalizer out of pod "p" (uid u-1)."""
    meta = {"uid": "u-1", "$deleteFromPrimitiveList/finalizers": [FINALIZER], **more}
    return {"metadata": meta}


RECORDED = {"labels": {"passhat.dev/recorded": "true"}}


def test_keep_is_one_patch_finalizer_out_label_in() -> None:
    """Keeping a recorded pod: ONE strategic merge patch (our finalizer out, wherever it
    is, the recorded label in, the uid as its guard), no delete."""
    kube = ScriptedKube([])
    kube.settle("ns", keep=[trial_pod(["other", FINALIZER])], release=[], create=[])
    kube.drain()
    assert kube.requests == [("PATCH", POD_PATH, finalizer_out(**RECORDED))]
    kube.close()


def test_keep_of_a_replaced_pod_stops_and_a_pod_without_ours_gets_the_label() -> None:
    """A 422 (another pod of that name: its uid differs) ends the keep without a re-read;
    a pod seen without our finalizer still gets the label (the removal is a no-op)."""
    kube = ScriptedKube([(422, {})])
    kube.settle("ns", keep=[trial_pod(["other", FINALIZER])], release=[], create=[])
    kube.drain()
    assert [(m, body) for m, _, body in kube.requests] == [("PATCH", finalizer_out(**RECORDED))]
    kube.requests.clear()
    kube.settle("ns", keep=[trial_pod(["other"])], release=[], create=[])
    kube.drain()
    assert kube.requests == [("PATCH", POD_PATH, finalizer_out(**RECORDED))]
    kube.close()


def test_the_finalizer_patch_is_a_strategic_merge_patch() -> None:
    """The content type the API server needs to read `$deleteFromPrimitiveList`."""
    seen: list[str] = []

    class Typed(ScriptedKube):
        def _request(self, verb: str, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
            seen.append(str(kwargs.get("content_type")))
            return super()._request(verb, method, path, **kwargs)

    kube = Typed([])
    kube.release_pods("ns", [trial_pod([FINALIZER])])
    kube.close()
    assert seen[0] == SMP


def test_release_patches_then_deletes_with_the_uid_precondition() -> None:
    """Releasing a pod that is not kept: the guarded finalizer patch, then DELETE; a pod
    seen without our finalizer is only deleted."""
    kube = ScriptedKube([])
    kube.release_pods("ns", [trial_pod(["other", FINALIZER])])
    delete = (
        "DELETE",
        POD_PATH,
        {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "u-1"}},
    )
    assert kube.requests == [("PATCH", POD_PATH, finalizer_out()), delete]
    kube.requests.clear()
    kube.answers = [(404, {})]  # NB: gone already: nothing more to do
    kube.release_pods("ns", [trial_pod([FINALIZER])])
    assert [m for m, _, _ in kube.requests] == ["PATCH"]
    kube.requests.clear()
    kube.answers = [(422, {})]  # NB: replaced by another pod of that name: not deleted
    kube.release_pods("ns", [trial_pod([FINALIZER])])
    assert [m for m, _, _ in kube.requests] == ["PATCH"]
    kube.requests.clear()
    kube.release_pods("ns", [trial_pod(["other"])])
    assert kube.requests == [delete]
    kube.close()


def test_list_pods_leaves_recorded_pods_out() -> None:
    """The LIST selector: this eval's uid and no recorded label."""
    kube = PagedKube([[]], expire_once=False)
    kube.list_pods("ns", "uid-1")
    kube.close()
    assert kube.queries[0]["labelSelector"] == "passhat.dev/eval-uid=uid-1,!passhat.dev/recorded"


class BlockedKube(ScriptedKube):
    """Pod PATCHes wait for `unblock`; LIST answers pods "a" and "b"."""

    def __init__(self) -> None:
        super().__init__([])
        self.unblock = threading.Event()
        self.patching = threading.Event()

    def _request(self, verb: str, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        if method == "PATCH":
            self.patching.set()
            assert self.unblock.wait(30)
        if verb == "list":
            items = [{"metadata": {"name": name}} for name in ("a", "b")]
            page = {"items": items, "metadata": {}}
            return 200, as_protobuf(page) if kwargs.get("raw") else page
        return super()._request(verb, method, path, **kwargs)


def test_settle_returns_after_the_creates_and_hides_pods_being_released() -> None:
    """Keeps run in the background; until one is done its pod is not listed (the loop
    would only release it again), and a second settle does not send it twice."""
    kube = BlockedKube()
    pod_a = ours("a", [FINALIZER])
    new = {"metadata": {"name": "c"}}
    kube.settle("ns", keep=[pod_a], release=[], create=[new])
    assert ("POST", "/api/v1/namespaces/ns/pods", new) in kube.requests  # NB: done already
    assert kube.patching.wait(30)
    assert [p["metadata"]["name"] for p in kube.list_pods("ns", "u")] == ["b"]
    assert [p["metadata"]["name"] for p in kube.list_pods("other", "u")] == ["a", "b"]
    kube.settle("ns", keep=[pod_a], release=[], create=[])
    kube.unblock.set()
    kube.drain()
    assert [m for m, _, _ in kube.requests].count("PATCH") == 1
    assert [p["metadata"]["name"] for p in kube.list_pods("ns", "u")] == ["a", "b"]
    kube.close()


class SlowListKube(BlockedKube):
    """BlockedKube whose LIST, once `list_started` is set, waits for `list_gate`."""

    def __init__(self) -> None:
        super().__init__()
        self.list_started = threading.Event()
        self.list_gate = threading.Event()

    def _request(self, verb: str, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        if verb == "list" and not self.list_gate.is_set():
            self.list_started.set()
            assert self.list_gate.wait(30)
        return super()._request(verb, method, path, **kwargs)


def test_a_keep_ending_during_a_list_leaves_its_pod_out_of_that_list() -> None:
    """A LIST sent before a keep ended may answer from before it: its pod is left out
    (else the pass would archive and release it a second time); a LIST sent after the
    keep ended is trusted again."""
    kube = SlowListKube()
    pod_a = ours("a", [FINALIZER])
    kube.settle("ns", keep=[pod_a], release=[], create=[])
    assert kube.patching.wait(30)
    listed: list[list[str]] = []
    lister = threading.Thread(
        target=lambda: listed.append([p["metadata"]["name"] for p in kube.list_pods("ns", "u")])
    )
    lister.start()
    assert kube.list_started.wait(30)
    kube.unblock.set()  # NB: the keep ends while the LIST is in flight
    kube.drain()
    kube.list_gate.set()
    lister.join(30)
    assert listed == [["b"]]
    assert [p["metadata"]["name"] for p in kube.list_pods("ns", "u")] == ["a", "b"]
    kube.close()


def test_settle_returns_the_names_a_create_found_taken() -> None:
    """A create answered 409 is not an error, but its name is handed back to the loop."""
    kube = ScriptedKube([(201, {}), (409, {"reason": "AlreadyExists"})])
    created = [{"metadata": {"name": "fresh"}}, {"metadata": {"name": "taken"}}]
    assert kube.settle("ns", keep=[], release=[], create=created[:1]) == []
    assert kube.settle("ns", keep=[], release=[], create=created[1:]) == ["taken"]


def test_config_map_metadata_is_a_partial_object_metadata_get() -> None:
    """get_config_map_meta asks the API server for metadata only (not the data it pins)
    and answers None for a missing ConfigMap."""
    seen: list[tuple[str, str | None]] = []

    class MetaKube(Kube):
        def _once(
            self, method: str, url_path: str, body: Any, content_type: str, **kwargs: Any
        ) -> tuple[int, Any]:
            seen.append((url_path, kwargs.get("accept")))
            if url_path.endswith("/gone"):
                return 404, {"message": "not found"}
            return 200, {"kind": "PartialObjectMetadata", "metadata": {"uid": "u", "name": "s"}}

    kube = MetaKube(client.Configuration())
    assert kube.get_config_map_meta("ns", "s") == {"uid": "u", "name": "s"}
    assert kube.get_config_map_meta("ns", "gone") is None
    assert seen == [
        (
            "/api/v1/namespaces/ns/configmaps/s",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        ),
        (
            "/api/v1/namespaces/ns/configmaps/gone",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        ),
    ]


def test_pods_the_operator_did_not_make_are_never_patched_or_deleted() -> None:
    """A look-alike (our labels, controller reference and finalizer, no mark), a pod
    carrying another pod's mark, one marked with another key and one without a uid get
    no request at all, kept, released or released on deletion."""
    look_alike = ours("p", [FINALIZER])
    del look_alike["metadata"]["annotations"]
    copied = ours("p", [FINALIZER])
    copied["metadata"]["name"] = "q"
    other_key = PodSigner(b"k" * 32).sign(
        {"metadata": {**ours("p", [FINALIZER])["metadata"], "annotations": {}}}
    )
    no_uid = ours("p", [FINALIZER], uid="")
    foreign = [look_alike, copied, other_key, no_uid]
    kube = ScriptedKube([])
    kube.settle("ns", keep=foreign, release=foreign, create=[])
    kube.release_pods("ns", foreign)
    kube.drain()
    assert kube.requests == []
    kube.close()


def test_a_pod_replaced_under_the_same_name_is_left_alone() -> None:
    """The patch's uid guard refuses it (422: `metadata.uid` is immutable): no second
    patch and no delete; a delete refused by its uid precondition (409) is not an error."""
    kube = ScriptedKube([(422, {})])
    kube.release_pods("ns", [trial_pod([FINALIZER])])
    assert [m for m, _, _ in kube.requests] == ["PATCH"]
    kube.requests.clear()
    kube.answers = [(200, {}), (409, {"reason": "Conflict"})]
    kube.release_pods("ns", [trial_pod([FINALIZER])])
    assert [(m, body) for m, _, body in kube.requests][1] == (
        "DELETE",
        {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "u-1"}},
    )
    kube.close()


def test_slim_pod_keeps_the_creation_mark_only() -> None:
    """Of a listed pod's annotations only the operator's creation mark is kept (the
    ownership check reads it)."""
    pod = ours("p", [FINALIZER])
    pod["metadata"]["annotations"]["big"] = "x" * 1000
    assert slim_pod(pod)["metadata"]["annotations"] == {
        "passhat.dev/created-by": pod["metadata"]["annotations"]["passhat.dev/created-by"]
    }
    assert PodSigner(OperatorConfig().pod_key).owner_uid(slim_pod(pod)) == "e-1"


def test_a_kept_grader_pod_lets_its_transcript_go_in_the_same_patch() -> None:
    """A grader pod kept after its verdict: the same one patch also empties the transcript
    annotation (up to 192 KiB per grader pod, 2,000 grader pods an eval, kept until the
    eval is deleted: ~375 MiB of etcd, and the transcripts readable with `get pods`)."""
    pod = ours("p", ["other", FINALIZER])
    pod["metadata"]["labels"][LABEL_GRADING] = "0-1"
    kube = ScriptedKube([])
    kube.settle("ns", keep=[pod], release=[], create=[])
    kube.drain()
    empty = {"annotations": {ANNOTATION_TRANSCRIPT: ""}}
    assert kube.requests == [("PATCH", POD_PATH, finalizer_out(**RECORDED, **empty))]
    kube.close()


class _Answer:
    """What `ApiClient.call_api` returns: a status and a body to read once."""

    def __init__(self, status: int, content: bytes) -> None:
        self.status, self._content = status, content
        self.response = self

    def read(self) -> bytes:
        return self._content

    def release_conn(self) -> None:
        pass


def test_the_credential_hook_runs_at_most_every_10_s() -> None:
    """The client's credential hook (it copies host, CA and token into the configuration)
    runs on the first request and then at most every CREDENTIAL_REFRESH_S, not on each."""
    now = [100.0]
    calls: list[float] = []
    hook = _CredentialHook(lambda cfg: calls.append(now[0]), 10.0, clock=lambda: now[0])
    for at in (100.0, 101.0, 109.5, 110.0, 115.0):
        now[0] = at
        hook(None)
    assert calls == [100.0, 110.0]
    hook.expire()
    hook(None)
    assert calls == [100.0, 110.0, 115.0]


def _reloading_configuration(*, reinstalls: bool = True) -> tuple[Any, list[str]]:
    """A client configuration whose credential hook loads "token-0", "token-1", ... (the
    list it returns) and, like the kubeconfig and in-cluster loaders' hooks, installs
    itself again each time it runs (`reinstalls`)."""
    configuration = client.Configuration()
    configuration.host = "https://apiserver.invalid"
    configuration.api_key["BearerToken"] = "Bearer from-the-file"  # NB: as the loaders set it
    loaded: list[str] = []

    def hook(cfg: Any) -> None:
        loaded.append(f"token-{len(loaded)}")
        cfg.api_key["BearerToken"] = f"Bearer {loaded[-1]}"
        if reinstalls:
            cfg.refresh_api_key_hook = lambda again: hook(again)

    configuration.refresh_api_key_hook = hook  # type: ignore[assignment]
    return configuration, loaded


def test_a_401_reloads_the_credentials_and_retries_once() -> None:
    """The real client path: the hook runs once for many requests (also a hook that
    installs itself again each time it runs, as the kubernetes client's loaders' do); a 401
    runs it again at once and the request is sent again with what it loaded; a second 401
    is an error."""
    configuration, loaded = _reloading_configuration()
    kube = Kube(configuration)
    answers = [(200, b"{}")] * 3 + [(401, b'{"message":"Unauthorized"}'), (200, b"{}")]
    answers += [(401, b'{"message":"Unauthorized"}')] * 2
    sent: list[str] = []

    def call_api(method: str, url: str, header_params: dict[str, str], **_: Any) -> _Answer:
        sent.append(header_params.get("authorization", ""))
        return _Answer(*answers.pop(0))

    kube._client.call_api = call_api  # type: ignore[method-assign,assignment]
    try:
        for _ in range(3):
            assert kube.get_config_map("ns", "cm") == {}
        assert loaded == ["token-0"]
        assert kube.get_config_map("ns", "cm") == {}  # NB: 401, reloaded, 200
        assert loaded == ["token-0", "token-1"]
        assert sent == ["Bearer token-0"] * 4 + ["Bearer token-1"]
        with pytest.raises(ApiError) as refused:
            kube.get_config_map("ns", "cm")
        assert refused.value.status == 401
        assert isinstance(configuration.refresh_api_key_hook, _CredentialHook)
    finally:
        kube.close()


def test_a_401_is_retried_once_also_without_retries() -> None:
    """The re-authentication is not one of the call's retries: a client with
    request_retries=0 (the leader lease's) still sends a request refused with 401 once
    more, with the reloaded token; a throttle some thread bypassed is installed again."""
    configuration, loaded = _reloading_configuration()
    kube = Kube(configuration, OperatorConfig(request_retries=0))
    answers = [(401, b'{"message":"Unauthorized"}'), (200, b"{}")]
    kube._client.call_api = lambda *a, **k: _Answer(*answers.pop(0))  # type: ignore[method-assign,assignment]
    try:
        assert kube.get_config_map("ns", "cm") == {}
        assert loaded == ["token-0", "token-1"] and answers == []
        # NB: as if a thread had run the loader's own closure, which put itself back
        throttle: Any = configuration.refresh_api_key_hook
        throttle(configuration)  # NB: within 10 s: nothing runs
        configuration.refresh_api_key_hook = throttle.hook  # NB: the loader's own closure
        answers.append((200, b"{}"))
        assert kube.get_config_map("ns", "cm") == {}
        assert isinstance(configuration.refresh_api_key_hook, _CredentialHook)
        assert loaded == ["token-0", "token-1"]  # NB: throttled again
    finally:
        kube.close()


def test_a_watch_refused_with_401_reloads_the_credentials_for_the_next() -> None:
    """The pod watch is not retried in place (its caller reopens it): a 401 expires the
    credential throttle, so the reopened watch runs the hook and sends the new token."""
    configuration, _ = _reloading_configuration(reinstalls=False)
    kube = Kube(configuration, OperatorConfig(pod_cache=False))
    sent: list[str] = []

    def call_api(method: str, url: str, header_params: dict[str, str], **_: Any) -> _Answer:
        sent.append(header_params.get("authorization", ""))
        return _Answer(401, b'{"message":"Unauthorized"}')

    kube._client.call_api = call_api  # type: ignore[method-assign,assignment]
    try:
        for _ in range(2):
            with pytest.raises(ApiError) as refused:
                kube.watch_pods("ns", lambda kind, pod: None)
            assert refused.value.status == 401
        assert sent == ["Bearer token-0", "Bearer token-1"]
    finally:
        kube.close()


class _Stream(_Answer):
    """A watch's answer: JSON lines, streamed."""

    def stream(self, amt: Any = None, decode_content: bool = False) -> Any:
        yield self._content


def _watched(name: str, rv: str) -> bytes:
    pod = {
        "metadata": {
            "name": name,
            "uid": f"u-{name}",
            "resourceVersion": rv,
            "labels": {LABEL_EVAL_UID: "e1"},
        }
    }
    return json.dumps({"type": "ADDED", "object": pod}).encode() + b"\n"


def test_a_watch_the_server_ended_is_resumed_without_a_list() -> None:
    """As client-go's reflector: the first watch LISTs and watches from the LIST's
    resourceVersion; one the server ended (its timeout) is resumed from the last event's
    resourceVersion with no LIST; a failed one (a 410) LISTs again."""
    configuration, _ = _reloading_configuration(reinstalls=False)
    kube = Kube(configuration, OperatorConfig(pod_protobuf=False))
    lists: list[str] = []
    watched_from: list[str] = []

    def list_slim(path: str, selector: str, **_: Any) -> list[dict[str, Any]]:
        lists.append(path)
        kube._local.list_rv = "100"
        return []

    answers = [
        _Stream(200, _watched("a", "101") + _watched("b", "105")),
        _Stream(200, b""),  # NB: nothing happened in its 240 s
        _Stream(200, b'{"type": "ERROR", "object": {"code": 410, "message": "too old"}}\n'),
        _Stream(200, _watched("c", "300")),
    ]

    def call_api(method: str, url: str, **_: Any) -> _Answer:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
        watched_from.append(query["resourceVersion"][0])
        return answers.pop(0)

    kube._list_slim = list_slim  # type: ignore[method-assign]
    kube._client.call_api = call_api  # type: ignore[method-assign,assignment]
    try:
        kube.watch_pods("ns", lambda kind, pod: None)
        kube.watch_pods("ns", lambda kind, pod: None)
        with pytest.raises(ApiError):
            kube.watch_pods("ns", lambda kind, pod: None)
        assert kube.pods.version("ns") == ""  # NB: unsynced: the next watch LISTs
        kube.watch_pods("ns", lambda kind, pod: None)
        assert watched_from == ["100", "105", "105", "100"]
        assert len(lists) == 2
        assert sorted(pod["metadata"]["name"] for pod in kube.pods.pods("ns", "e1") or []) == ["c"]
    finally:
        kube.close()
