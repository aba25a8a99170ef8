"""The slim pod read from protobuf equals the slim pod read from JSON.

`tests/fixtures/wire/pods.json` holds pods one API server (Kubernetes v1.34) sent both
ways, with a LIST and a watch of them in protobuf (`hack/cluster/capture-wire.py`: the
classifier's captured pods, created again with their status).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from passhat.operator import protowire
from passhat.operator.config import OperatorConfig
from passhat.operator.kube import ApiError, Kube
from passhat.operator.slimpod import ProtoError, decode_pod, slim_pod
from tests.unit.protobuf_pods import encode_pod, envelope, field_bytes, field_varint, watch_frame

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
WIRE: dict[str, Any] = json.loads((FIXTURES / "wire" / "pods.json").read_text())
CAPTURED = sorted(WIRE["pods"])
CLASSIFIER_PODS = sorted(p.name for p in (FIXTURES / "pods").glob("*.json"))


def test_every_classifier_fixture_was_captured_on_the_wire() -> None:
    """A new pod fixture needs `hack/cluster/capture-wire.py` run again."""
    assert CAPTURED == CLASSIFIER_PODS


@pytest.mark.parametrize("name", CAPTURED)
def test_a_pod_reads_the_same_from_protobuf_as_from_json(name: str) -> None:
    """Field by field, as the API server encoded the same object both ways."""
    captured = WIRE["pods"][name]
    kind, raw = protowire.unwrap(base64.b64decode(captured["protobuf"]))
    assert kind == "Pod"
    slim = decode_pod(raw)
    assert slim == slim_pod(captured["json"])
    assert slim["status"], "the captured pod carries its fixture's status"


@pytest.mark.parametrize("name", CLASSIFIER_PODS)
def test_the_test_encoder_round_trips(name: str) -> None:
    """What the fakes send (`protobuf_pods.py`) reads back as the JSON slim pod."""
    pod = slim_pod(json.loads((FIXTURES / "pods" / name).read_text()))
    assert decode_pod(encode_pod(pod)) == pod


def by_name(pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {pod["metadata"]["name"]: pod for pod in pods}


def json_slims() -> dict[str, dict[str, Any]]:
    return by_name([slim_pod(c["json"]) for c in WIRE["pods"].values()])


def test_a_list_reads_every_pod_and_its_resource_version() -> None:
    meta, pods = protowire.decode_pod_list(base64.b64decode(WIRE["list"]))
    assert meta["resourceVersion"].isdigit() and "continue" not in meta
    assert by_name(pods) == json_slims()


def reader(data: bytes, chunk: int) -> Callable[[int], bytes]:
    """`read(n)` over `data`, at most `chunk` bytes a call (frames split across reads)."""
    pos = 0

    def read(size: int) -> bytes:
        nonlocal pos
        out = data[pos : pos + min(size, chunk)]
        pos += len(out)
        return out

    return read


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_a_watch_stream_reads_every_event(chunk: int) -> None:
    """The real stream (ADDED for each pod, then the end), read in chunks of any size."""
    events = list(protowire.watch_events(reader(base64.b64decode(WIRE["watch"]), chunk)))
    assert {kind for kind, _ in events} == {"ADDED"}
    assert by_name([pod for _, pod in events]) == json_slims()


def status_message(code: int, message: str) -> bytes:
    raw = field_bytes(2, "Failure") + field_bytes(3, message) + field_bytes(4, "Expired")
    return envelope("Status", raw + field_varint(6, code))


def test_an_error_event_reads_as_its_json() -> None:
    frame = watch_frame("ERROR", status_message(410, "too old resource version"))
    [(kind, obj)] = protowire.watch_events(reader(frame, 1 << 20))
    assert kind == "ERROR"
    assert obj["code"] == 410 and obj["message"] == "too old resource version"


@pytest.mark.parametrize(
    "stream",
    [
        b"\x00\x00\x00\x10abc",  # NB: a frame longer than the stream
        b"\x00\x00",  # NB: the stream ends within a length
        watch_frame("ADDED", b"not an object"),
    ],
)
def test_a_broken_stream_raises(stream: bytes) -> None:
    with pytest.raises(ProtoError):
        list(protowire.watch_events(reader(stream, 1 << 20)))


def test_bytes_that_are_not_utf8_read_as_replacement_characters() -> None:
    """A pod written in protobuf by a hostile client may carry any bytes in a string; the
    reader does not fail on them (the pod's namespace would stop being watched)."""
    meta = field_bytes(1, b"p\xff") + field_bytes(
        12, field_bytes(1, b"k") + field_bytes(2, b"\xfe")
    )
    pod = decode_pod(field_bytes(1, meta))
    assert pod["metadata"]["name"] == "p\ufffd"
    # NB: one U+FFFD per byte, as Go's encoding/json writes them (Python's "replace": one)
    broken = decode_pod(field_bytes(1, field_bytes(1, b"\xe2\x82A")))
    assert broken["metadata"]["name"] == "\ufffd\ufffdA"


@pytest.mark.parametrize("seconds", [2**62, -(2**62), 253402300800])
def test_a_time_out_of_range_is_left_out(seconds: int) -> None:
    """A status time a hostile writer set beyond year 9999 (JSON cannot show it either)."""
    running = field_bytes(2, field_bytes(1, field_varint(1, seconds)))
    status = field_bytes(8, field_bytes(1, "trial") + field_bytes(2, running))
    pod = decode_pod(field_bytes(3, status))
    assert pod["status"]["containerStatuses"] == [{"name": "trial", "state": {"running": {}}}]


class FallbackKube(Kube):
    """`Kube` whose API server sends pods in protobuf the reader cannot read, and in
    JSON as asked."""

    def __init__(self, pod: dict[str, Any]) -> None:
        super().__init__(client.Configuration(), OperatorConfig())
        self.pod = pod
        self.asked: list[str] = []

    def _request(self, verb: str, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        self.asked.append("protobuf" if kwargs.get("raw") else "json")
        if kwargs.get("raw"):
            return 200, protowire.PREFIX + b"\xff\xff"
        return 200, {"items": [self.pod], "metadata": {}} if verb == "list" else self.pod


def test_a_page_or_pod_protobuf_cannot_read_is_read_again_as_json() -> None:
    """One unreadable pod stops neither its namespace's passes nor the sweeps."""
    pod = WIRE["pods"][CAPTURED[0]]["json"]
    kube = FallbackKube(pod)
    try:
        assert kube.list_held_pods("ns") == [slim_pod(pod)]
        assert kube.get_pod("ns", "p") == slim_pod(pod)
    finally:
        kube.close()
    assert kube.asked == ["protobuf", "json"] * 2


def test_a_truncated_pod_raises() -> None:
    raw = protowire.unwrap(base64.b64decode(WIRE["pods"][CAPTURED[0]]["protobuf"]))[1]
    with pytest.raises(ProtoError):
        decode_pod(raw[: len(raw) // 2])


class Response:
    """What `ApiClient.call_api` returns for a watch: status, a streaming urllib3 body."""

    def __init__(self, body: bytes) -> None:
        self.status = 200
        self.response = self
        self.read1 = reader(body, 4096)
        self.released = False

    def release_conn(self) -> None:
        self.released = True


def test_kube_watches_in_protobuf_into_the_cache() -> None:
    """`Kube.watch_pods` asks for the protobuf stream, fills the cache from its LIST and
    events, hands each slim pod on; an ERROR event ends the watch and unsyncs the cache."""
    kube = Kube(client.Configuration(), OperatorConfig())
    asked: list[str] = []

    def call_api(method: str, url: str, header_params: dict[str, str], **_: Any) -> Response:
        asked.append(header_params["Accept"])
        frames = base64.b64decode(WIRE["watch"])
        frames += watch_frame("ERROR", status_message(410, "too old"))
        return Response(frames)

    listed: list[bytes] = []

    def request(verb: str, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        assert kwargs["raw"] and kwargs["accept"] == protowire.MEDIA_TYPE
        listed.append(base64.b64decode(WIRE["list"]))
        return 200, listed[-1]

    kube._client.call_api = call_api  # type: ignore[method-assign,assignment]
    kube._request = request  # type: ignore[method-assign]
    seen: list[str] = []
    try:
        with pytest.raises(ApiError):
            kube.watch_pods("ns", lambda kind, pod: seen.append(pod["metadata"]["name"]))
    finally:
        kube.close()
    assert asked == ["application/vnd.kubernetes.protobuf;stream=watch"] and listed
    assert sorted(seen) == sorted(json_slims())
    assert kube.pods.pods("ns", "any") is None  # NB: unsynced by the ERROR
