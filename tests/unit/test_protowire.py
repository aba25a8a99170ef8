"""Pod writes ask for protobuf and do not read a success; an error reads as its JSON would."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from passhat.operator import protowire
from passhat.operator.kube import ApiError, Kube
from passhat.operator.pods import FINALIZER
from tests.unit.protobuf_pods import envelope, field_bytes, field_varint

CAUSE_KEYS = ("reason", "message", "field")


def status_bytes(*, code: int, message: str, reason: str, causes: list[dict[str, str]]) -> bytes:
    details = field_bytes(1, "trial-0") + field_bytes(3, "pods")
    for cause in causes:
        details += field_bytes(
            4,
            field_bytes(1, cause["reason"])
            + field_bytes(2, cause["message"])
            + field_bytes(3, cause["field"]),
        )
    details += field_varint(5, 0)
    raw = (
        field_bytes(1, b"")  # NB: ListMeta, empty
        + field_bytes(2, "Failure")
        + field_bytes(3, message)
        + field_bytes(4, reason)
        + field_bytes(5, details)
        + field_varint(6, code)
    )
    return envelope("Status", raw)


# A cause as the API server gives it for a privileged container a policy refused.
CAUSE = {
    "reason": "FieldValueForbidden",
    "message": "Forbidden: disallowed by cluster policy",
    "field": "spec.containers[0].securityContext.privileged",
}


def test_a_status_decodes_as_its_json() -> None:
    data = status_bytes(
        code=422, message='Pod "trial-0" is invalid', reason="Invalid", causes=[CAUSE]
    )
    assert protowire.decode_status(data) == {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": 'Pod "trial-0" is invalid',
        "reason": "Invalid",
        "details": {"name": "trial-0", "kind": "pods", "causes": [CAUSE], "retryAfterSeconds": 0},
        "code": 422,
    }


def test_a_negative_int32_reads_negative() -> None:
    raw = field_varint(6, -1)
    assert protowire.decode_status(envelope("Status", raw))["code"] == -1


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{}",
        protowire.PREFIX + b"\x0a\x05",  # NB: a length past the end
        protowire.PREFIX + b"\x0b",  # NB: wire type 3 (a group)
        protowire.PREFIX + b"\x08\xff",  # NB: a varint cut short
        envelope("Pod", b""),
    ],
)
def test_what_is_not_a_status_raises_proto_error(data: bytes) -> None:
    with pytest.raises(protowire.ProtoError):
        protowire.decode_status(data)


class _Response:
    def __init__(self, status: int, content: bytes) -> None:
        self.status = status
        self._content = content
        self.response = self

    def read(self) -> bytes:
        return self._content

    def release_conn(self) -> None:
        pass


class _Client:
    """The kubernetes ApiClient's two calls `Kube._once` makes, answering `answers`."""

    def __init__(self, answers: list[tuple[int, bytes]]) -> None:
        self.answers = answers
        self.accepts: list[str] = []

    def param_serialize(
        self,
        *,
        method: str,
        resource_path: str,
        header_params: dict[str, str],
        body: Any,
        auth_settings: Any,
    ) -> tuple[Any, ...]:
        self.accepts.append(header_params["Accept"])
        return method, resource_path, header_params, body, None

    def call_api(self, method: str, url: str, **_: Any) -> _Response:
        return _Response(*self.answers.pop(0))

    def close(self) -> None:
        pass


def _kube(answers: list[tuple[int, bytes]]) -> tuple[Kube, _Client]:
    kube = Kube(client.Configuration())
    fake = _Client(answers)
    kube._client = fake  # type: ignore[assignment]
    return kube, fake


POD = {"metadata": {"name": "trial-0", "uid": "u-1", "finalizers": [FINALIZER]}}


def test_pod_writes_ask_for_protobuf_and_do_not_read_a_success() -> None:
    """Create, finalizer patch and delete: protobuf first; a 2xx body is not parsed."""
    body = envelope("Pod", b"\xff\xff not a pod the operator could read")
    kube, fake = _kube([(201, body), (200, body), (200, body)])
    try:
        assert kube._create_pod("ns", {"metadata": {"name": "trial-0"}}) is None
        kube._release_pod("ns", POD)  # NB: the finalizer patch, then the delete
    finally:
        kube.close()
    assert fake.accepts == ["application/vnd.kubernetes.protobuf, application/json"] * 3
    assert not fake.answers


def test_a_refused_create_names_the_api_servers_message() -> None:
    """A 422 in protobuf reads as the JSON Status would: the user sees its message."""
    refused = status_bytes(
        code=422,
        message='Pod "trial-0" is invalid: privileged: Forbidden',
        reason="Invalid",
        causes=[CAUSE],
    )
    kube, _ = _kube([(422, refused)])
    try:
        with pytest.raises(ApiError, match='Pod "trial-0" is invalid: privileged: Forbidden'):
            kube._create_pod("ns", {"metadata": {"name": "trial-0"}})
    finally:
        kube.close()


def test_a_409_in_protobuf_is_a_taken_name() -> None:
    taken = status_bytes(
        code=409, message='pods "trial-0" already exists', reason="AlreadyExists", causes=[]
    )
    kube, _ = _kube([(409, taken)])
    try:
        assert kube._create_pod("ns", {"metadata": {"name": "trial-0"}}) == "trial-0"
    finally:
        kube.close()


def test_an_unreadable_protobuf_error_still_raises_with_its_status() -> None:
    kube, _ = _kube([(403, protowire.PREFIX + b"\x0b")])
    try:
        with pytest.raises(ApiError, match="403"):
            kube._create_pod("ns", {"metadata": {"name": "trial-0"}})
    finally:
        kube.close()
