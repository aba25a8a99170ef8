"""The API server's protobuf responses, as far as the operator reads them: not at all on
success, a `Status` on failure.

Why: the operator's pod writes (create, the finalizer patch, delete) do not read the
object the API server sends back. As JSON that object costs the API server an encoding of
the whole pod (its managedFields too) per write, ~3,000 per 1,000 trials; as protobuf
(what client-go asks for, and what the Job controller gets) it costs a fraction of that
(docs/benchmarks.md, "Session 18"). So these writes ask for
`application/vnd.kubernetes.protobuf` and drop a successful body unread. An error comes
back as a protobuf `metav1.Status`, decoded here into the dict its JSON would have been
(`message`, `reason`, `code`, `details.causes`), so the messages users see are the same.

The wire format (k8s.io/apimachinery/pkg/runtime/serializer/protobuf): the 4 bytes
`k8s\\x00`, then a `runtime.Unknown` message (typeMeta = 1, raw = 2, contentEncoding = 3,
contentType = 4) whose `raw` is the object's message; field numbers from
k8s.io/apimachinery's `generated.proto` (runtime and meta/v1). Only custom resources
cannot be read this way; the operator asks it only for pods.

The pod watch and its LIST read pods in protobuf too (`slimpod.py` says why and which
fields): `decode_pod_list` reads a `v1.PodList` (metadata = 1: `ListMeta`, its
resourceVersion = 2 and continue = 3; items = 2), and `watch_events` a watch stream: what
client-go's `LengthDelimitedFramer` reads, frames of a 4-byte big-endian length and a
`metav1.WatchEvent` (type = 1, object = 2: a `RawExtension` whose raw = 1 holds the
object with its envelope), the events themselves without one (the API server encodes
them with its raw serializer).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from passhat.operator.slimpod import (
    GO_REPLACE,
    WIRE_BYTES,
    WIRE_FIXED32,
    WIRE_FIXED64,
    WIRE_VARINT,
    ProtoError,
    decode_pod,
    varint_rest,
)

__all__ = [
    "MEDIA_TYPE",
    "PREFIX",
    "ProtoError",
    "decode_pod_list",
    "decode_status",
    "unwrap",
    "watch_events",
]

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
PREFIX = b"k8s\x00"


def unwrap(content: bytes) -> tuple[str, bytes]:
    """(kind, the object's message) of an object the API server wrote with its envelope."""
    if not content.startswith(PREFIX):
        raise ProtoError("no k8s protobuf prefix")
    raw = b""
    kind = ""
    for number, value in _fields(content[len(PREFIX) :]):
        if number == 1 and isinstance(value, bytes):  # NB: Unknown.typeMeta
            kind = _strings(value).get(2, "")
        elif number == 2 and isinstance(value, bytes):  # NB: Unknown.raw
            raw = value
    return kind, raw


def decode_status(content: bytes) -> dict[str, Any]:
    """The `metav1.Status` in an API server's protobuf response, as its JSON would be."""
    kind, raw = unwrap(content)
    if kind != "Status":
        raise ProtoError(f"a {kind or 'nameless'} object, not a Status")
    return _status(raw)


def _status(raw: bytes) -> dict[str, Any]:
    status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1"}
    for number, value in _fields(raw):
        if number in (2, 3, 4) and isinstance(value, bytes):
            status[{2: "status", 3: "message", 4: "reason"}[number]] = value.decode(
                errors=GO_REPLACE
            )
        elif number == 5 and isinstance(value, bytes):
            status["details"] = _details(value)
        elif number == 6 and isinstance(value, int):
            status["code"] = _int32(value)
    return status


def decode_pod_list(content: bytes) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """(the list's metadata: resourceVersion, continue; its pods, slim) of a `PodList`
    response in protobuf."""
    kind, raw = unwrap(content)
    if kind != "PodList":
        raise ProtoError(f"a {kind or 'nameless'} object, not a PodList")
    meta: dict[str, str] = {}
    pods: list[dict[str, Any]] = []
    for number, value in _fields(raw):
        if number == 1 and isinstance(value, bytes):
            strings = _strings(value)
            meta = {
                name: strings[n]
                for n, name in ((2, "resourceVersion"), (3, "continue"))
                if strings.get(n)
            }
        elif number == 2 and isinstance(value, bytes):
            pods.append(decode_pod(value))
    return meta, pods


def watch_events(read: Callable[[int], bytes]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(type, object) of each event of a protobuf watch stream read with `read(n)` (what
    is there, up to n bytes; b"" at its end), until the stream ends: a pod slim
    (`slimpod.decode_pod`), an ERROR's Status as its JSON would be, any other object as
    {"kind": its kind}. Reads in large chunks (a read costs far more than a byte), so
    `read` must return what has arrived rather than wait for all n bytes."""
    buffer = bytearray()
    while True:
        if not _fill(read, buffer, 4):
            return
        end = 4 + int.from_bytes(buffer[:4], "big")
        if not _fill(read, buffer, end):
            raise ProtoError("the watch stream ended within a frame")
        frame = bytes(buffer[4:end])
        del buffer[:end]
        kind, obj = "", b""
        for number, value in _fields(frame):
            if number == 1 and isinstance(value, bytes):
                kind = value.decode(errors=GO_REPLACE)
            elif number == 2 and isinstance(value, bytes):
                obj = next((v for n, v in _fields(value) if n == 1 and isinstance(v, bytes)), b"")
        what, raw = unwrap(obj)
        if what == "Pod":
            yield kind, decode_pod(raw)
        elif what == "Status":
            yield kind, _status(raw)
        else:
            yield kind, {"kind": what}


_READ_SIZE = 1 << 16


def _fill(read: Callable[[int], bytes], buffer: bytearray, size: int) -> bool:
    """Read into `buffer` until it holds `size` bytes: False if the stream ended with
    nothing buffered; ProtoError if it ended with part of a frame."""
    while len(buffer) < size:
        chunk = read(max(_READ_SIZE, size - len(buffer)))
        if not chunk:
            if buffer:
                raise ProtoError("the watch stream ended within a frame")
            return False
        buffer += chunk
    return True


def _details(data: bytes) -> dict[str, Any]:
    details: dict[str, Any] = {}
    names = {1: "name", 2: "group", 3: "kind", 6: "uid"}
    for number, value in _fields(data):
        if number in names and isinstance(value, bytes):
            details[names[number]] = value.decode(errors=GO_REPLACE)
        elif number == 4 and isinstance(value, bytes):
            cause = {
                {1: "reason", 2: "message", 3: "field"}[n]: text
                for n, text in _strings(value).items()
                if n in (1, 2, 3)
            }
            details.setdefault("causes", []).append(cause)
        elif number == 5 and isinstance(value, int):
            details["retryAfterSeconds"] = _int32(value)
    return details


def _strings(data: bytes) -> dict[int, str]:
    return {n: v.decode(errors=GO_REPLACE) for n, v in _fields(data) if isinstance(v, bytes)}


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, varint or bytes) of one message; fixed-width fields as ints."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == WIRE_VARINT:
            value, pos = _varint(data, pos)
            yield number, value
        elif wire == WIRE_BYTES:
            size, pos = _varint(data, pos)
            if pos + size > end:
                raise ProtoError("a field runs past the message's end")
            yield number, data[pos : pos + size]
            pos += size
        elif wire in (WIRE_FIXED64, WIRE_FIXED32):
            width = 8 if wire == WIRE_FIXED64 else 4
            if pos + width > end:
                raise ProtoError("a field runs past the message's end")
            yield number, int.from_bytes(data[pos : pos + width], "little")
            pos += width
        else:
            raise ProtoError(f"wire type {wire} of field {number}")


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    if pos >= len(data):
        raise ProtoError("a varint runs past the message's end")
    first = data[pos]
    return (first, pos + 1) if first < 0x80 else varint_rest(data, pos + 1, first)
