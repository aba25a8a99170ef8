"""Pods as the API server would send them in protobuf, for fakes of its HTTP layer.

`encode_pod` writes the fields of `slimpod.SLIM_POD` a pod dict holds as a `v1.Pod`
message (what `slimpod.decode_pod` reads back); `envelope`, `pod_list` and
`watch_frame` wrap it as a response, a LIST page and a watch event. Only the readers'
own fields are written, so a fake answering with these tests the operator's paths, not
the encoding: `tests/unit/test_slimpod.py` holds the decoder to pods a real API server
encoded.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Mapping
from typing import Any

from passhat.operator import protowire
from passhat.operator.slimpod import (
    BOOL,
    INT,
    INT_NONZERO,
    MAP,
    MSG,
    MSGS,
    SLIM_POD,
    STR,
    STRS,
    TIME,
    Field,
)


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # NB: protobuf writes a negative number as 10 bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field_bytes(number: int, data: bytes | str) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return varint(number << 3 | 2) + varint(len(raw)) + raw


def field_varint(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def encode(value: Mapping[str, Any], table: tuple[Field, ...]) -> bytes:
    """The message of `value`'s fields that `table` names."""
    out = b""
    for field in table:
        item = value.get(field.name)
        if item is None:
            continue
        if field.kind in (STR,):
            out += field_bytes(field.number, str(item))
        elif field.kind in (INT, INT_NONZERO, BOOL):
            out += field_varint(field.number, int(item))
        elif field.kind == TIME:
            seconds = calendar.timegm(time.strptime(str(item), "%Y-%m-%dT%H:%M:%SZ"))
            out += field_bytes(field.number, field_varint(1, seconds))
        elif field.kind == MAP:
            for key, text in item.items():
                out += field_bytes(field.number, field_bytes(1, key) + field_bytes(2, text))
        elif field.kind == STRS:
            out += b"".join(field_bytes(field.number, str(text)) for text in item)
        elif field.kind == MSG:
            out += field_bytes(field.number, encode(item, field.table))
        elif field.kind == MSGS:
            out += b"".join(field_bytes(field.number, encode(v, field.table)) for v in item)
    return out


def encode_pod(pod: Mapping[str, Any]) -> bytes:
    """A `v1.Pod` message of `pod`'s slim fields."""
    return encode(pod, SLIM_POD)


def envelope(kind: str, raw: bytes) -> bytes:
    """What the API server writes: the prefix, then runtime.Unknown{typeMeta, raw}."""
    type_meta = field_bytes(1, "v1") + field_bytes(2, kind)
    unknown = (
        field_bytes(1, type_meta) + field_bytes(2, raw) + field_bytes(3, "") + field_bytes(4, "")
    )
    return protowire.PREFIX + unknown


def pod_list(pods: list[Mapping[str, Any]], meta: Mapping[str, str]) -> bytes:
    """A LIST response in protobuf: a `PodList` with `meta` (resourceVersion, continue)."""
    list_meta = field_bytes(2, meta.get("resourceVersion", "")) + field_bytes(
        3, meta.get("continue", "")
    )
    items = b"".join(field_bytes(2, encode_pod(pod)) for pod in pods)
    return envelope("PodList", field_bytes(1, list_meta) + items)


def watch_frame(kind: str, obj: bytes) -> bytes:
    """One frame of a protobuf watch stream: the length, then a WatchEvent{type, object}."""
    event = field_bytes(1, kind) + field_bytes(2, field_bytes(1, obj))
    return len(event).to_bytes(4, "big") + event


def as_protobuf(data: Mapping[str, Any]) -> bytes:
    """A JSON pod or pod list answer as the API server would send it in protobuf."""
    if "items" in data:
        meta = data.get("metadata") or {}
        return pod_list(list(data["items"]), {k: str(v) for k, v in meta.items()})
    return envelope("Pod", encode_pod(data))
