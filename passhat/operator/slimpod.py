"""The part of a pod the operator reads, from the API server's JSON or from its protobuf.

A pass classifies its eval's pods from the pod cache, which the pod watch fills
(`podcache.py`). A decoded kwok pod is ~12 KB of Python objects, most of it spec and
metadata nothing reads, so pods are kept *slim*: `SLIM_POD` names every field the readers
of `EvalApi.list_pods` and `list_held_pods` use, and nothing else is kept. A new reader
of another field must add it here; `tests/unit/test_operator_kube.py` checks that every
captured pod classifies, keys and records the same slimmed as whole.

The same table reads both wire formats, so that the two give the same dict:

- `slim_pod(pod)` cuts a pod decoded from JSON down to the table;
- `decode_pod(data)` reads the table's fields straight out of a pod's protobuf message
  (k8s.io/api/core/v1 `generated.proto`; field numbers of Kubernetes v1.34, which are
  never renumbered) and skips everything else unread: managedFields, most of the spec.

Why protobuf: the pod watch is the API server's only JSON watcher of pods (the scheduler,
kwok and the controllers watch in protobuf), so every pod event cost it one JSON encoding
for the operator alone (docs/benchmarks.md, "Session 16"). Where the two formats differ,
the table says what JSON shows and both readers agree on it: an empty string, an empty
list or map and a zero time are left out (protobuf writes a Go string field even when it
is empty; JSON leaves most of them out), a number is kept even when 0 unless JSON leaves
it out (`signal`), and a time is RFC 3339 in seconds, as JSON writes it; bytes that are
not UTF-8 read as U+FFFD, as the API server's JSON shows them (a pod a hostile client
wrote in protobuf cannot stop the reader). A message is kept whenever present, even
empty, so `"terminated" in state` means the same in both.
`tests/unit/test_slimpod.py` holds the two readers to each other on pods the API server
encoded both ways (`tests/fixtures/wire/pods.json`, `hack/cluster/capture-wire.py`).
"""

from __future__ import annotations

import codecs
import dataclasses
import functools
import time
from collections.abc import Mapping
from typing import Any

from passhat.operator.ownership import ANNOTATION_CREATED_BY

__all__ = ["GO_REPLACE", "SLIM_POD", "Field", "ProtoError", "decode_pod", "slim_pod", "varint_rest"]

# What a field holds, in JSON terms.
STR = "str"  # a string; "" left out
INT = "int"  # a number, kept when 0 (a pointer field in Go, or JSON without omitempty)
INT_NONZERO = "int!0"  # a number JSON leaves out when 0 (Go `omitempty` on a plain int)
BOOL = "bool"
TIME = "time"  # metav1.Time: RFC 3339 seconds; a zero time left out
MAP = "map"  # map<string, string>; `keys` limits which entries are kept
STRS = "strs"  # repeated string
MSG = "msg"  # a message (its own table)
MSGS = "msgs"  # repeated message

# Protobuf wire types (protowire.py reads the same wire)
WIRE_VARINT, WIRE_FIXED64, WIRE_BYTES, WIRE_FIXED32 = 0, 1, 2, 5


class ProtoError(ValueError):
    """Not a protobuf message as the API server writes them."""


# Bytes that are not UTF-8 become U+FFFD one byte at a time, as Go's encoding/json writes
# them in the API server's JSON (Python's "replace" makes one of a whole broken sequence).
GO_REPLACE = "passhat-go-replace"


def _go_replace(err: UnicodeError) -> tuple[str, int]:
    if not isinstance(err, UnicodeDecodeError):
        raise err
    return "\ufffd", err.start + 1


codecs.register_error(GO_REPLACE, _go_replace)


@dataclasses.dataclass(frozen=True)
class Field:
    """One kept field: its JSON name, its protobuf field number and what it holds."""

    name: str
    number: int
    kind: str
    table: tuple[Field, ...] = ()
    keys: frozenset[str] | None = None  # MAP: only these keys (None: all)
    # MSG, MSGS: `table` by field number (what the protobuf reader looks fields up in)
    by_number: dict[int, Field] = dataclasses.field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        self.by_number.update((item.number, item) for item in self.table)


def _table(*fields: Field) -> tuple[Field, ...]:
    return fields


_OWNER_REFERENCE = _table(
    Field("apiVersion", 5, STR),
    Field("kind", 1, STR),
    Field("name", 3, STR),
    Field("uid", 4, STR),
    Field("controller", 6, BOOL),
    Field("blockOwnerDeletion", 7, BOOL),
)

# The loop (`pod_key`: labels; the deleted-pod grace: deletionTimestamp), the classifier
# (creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds), the release (name,
# uid for the preconditions, finalizers for the guarded patch) and the ownership check
# (ownerReferences, and of the annotations only the creation mark); the pass's check that a
# running pod has not changed since the last pass (uid and resourceVersion).
_OBJECT_META = _table(
    Field("name", 1, STR),
    Field("namespace", 3, STR),
    Field("uid", 5, STR),
    Field("resourceVersion", 6, STR),
    Field("labels", 11, MAP),
    Field("annotations", 12, MAP, keys=frozenset({ANNOTATION_CREATED_BY})),
    Field("finalizers", 14, STRS),
    Field("creationTimestamp", 8, TIME),
    Field("deletionTimestamp", 9, TIME),
    Field("deletionGracePeriodSeconds", 10, INT),
    Field("ownerReferences", 13, MSGS, _OWNER_REFERENCE),
)

# Each container's name (the classifier's trial container is the first), the deletion
# window, the archived record's node, whether the pod waits for a queue's admission.
_POD_SPEC = _table(
    Field("containers", 2, MSGS, _table(Field("name", 1, STR))),
    Field("terminationGracePeriodSeconds", 4, INT),
    Field("nodeName", 10, STR),
    Field("schedulingGates", 38, MSGS, _table(Field("name", 1, STR))),
)

_TERMINATED = _table(
    Field("exitCode", 1, INT),
    Field("signal", 2, INT_NONZERO),
    Field("reason", 3, STR),
    Field("message", 4, STR),
    Field("startedAt", 5, TIME),
    Field("finishedAt", 6, TIME),
)

_CONTAINER_STATE = _table(
    Field("waiting", 1, MSG, _table(Field("reason", 1, STR), Field("message", 2, STR))),
    Field("running", 2, MSG, _table(Field("startedAt", 1, TIME))),
    Field("terminated", 3, MSG, _TERMINATED),
)

_CONTAINER_STATUS = _table(
    Field("name", 1, STR),
    Field("state", 2, MSG, _CONTAINER_STATE),
    Field("lastState", 3, MSG, _CONTAINER_STATE),
)

# The classification (phase, reason, message, disruption and scheduling conditions, every
# container's state), the trial's duration and start.
_POD_STATUS = _table(
    Field("phase", 1, STR),
    Field("reason", 4, STR),
    Field("message", 3, STR),
    Field(
        "conditions",
        2,
        MSGS,
        _table(
            Field("type", 1, STR),
            Field("status", 2, STR),
            Field("reason", 5, STR),
            Field("message", 6, STR),
        ),
    ),
    Field("startTime", 7, TIME),
    Field("initContainerStatuses", 10, MSGS, _CONTAINER_STATUS),
    Field("containerStatuses", 8, MSGS, _CONTAINER_STATUS),
    Field("ephemeralContainerStatuses", 13, MSGS, _CONTAINER_STATUS),
)

SLIM_POD = _table(
    Field("metadata", 1, MSG, _OBJECT_META),
    Field("spec", 2, MSG, _POD_SPEC),
    Field("status", 3, MSG, _POD_STATUS),
)


# ------------------------------------------------------------------------------- JSON


def slim_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a pod decoded from JSON that `SLIM_POD` keeps (metadata, spec and
    status always present, maybe empty)."""
    slim = _project(pod, SLIM_POD)
    for key in ("metadata", "spec", "status"):
        slim.setdefault(key, {})
    return slim


def _project(value: Mapping[str, Any], table: tuple[Field, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in table:
        item = _json_value(field, value.get(field.name))
        if item is not None:
            out[field.name] = item
    return out


def _json_value(field: Field, item: Any) -> Any:
    """`item` as the table keeps it; None when it is left out."""
    kind = field.kind
    if kind in (STR, TIME):
        return item if isinstance(item, str) and item else None
    if kind in (INT, INT_NONZERO):
        number = isinstance(item, int) and not isinstance(item, bool)
        return item if number and (item or kind == INT) else None
    if kind == BOOL:
        return item if isinstance(item, bool) else None
    if kind == MAP and isinstance(item, Mapping):
        kept = {str(k): str(v) for k, v in item.items() if field.keys is None or k in field.keys}
        return kept or None
    if kind == STRS and isinstance(item, list):
        return [str(v) for v in item] or None
    if kind == MSG and isinstance(item, Mapping):
        return _project(item, field.table)
    if kind == MSGS and isinstance(item, list):
        return [_project(v, field.table) for v in item if isinstance(v, Mapping)] or None
    return None


# --------------------------------------------------------------------------- protobuf


def decode_pod(data: bytes) -> dict[str, Any]:
    """The `SLIM_POD` fields of a `v1.Pod` message (the object's bytes, without the
    API server's `k8s\\x00` envelope: `protowire.unwrap`), as `slim_pod` keeps them."""
    try:
        slim = _message(data, 0, len(data), _POD_BY_NUMBER)
    except ProtoError:
        raise
    except (ValueError, IndexError, OverflowError) as err:  # NB: a malformed message
        raise ProtoError(f"an unreadable pod: {err}") from None
    for key in ("metadata", "spec", "status"):
        slim.setdefault(key, {})
    return slim


def _message(data: bytes, pos: int, end: int, fields: dict[int, Field]) -> dict[str, Any]:
    """The fields of `data[pos:end]` that `fields` names; every other one skipped."""
    out: dict[str, Any] = {}
    while pos < end:
        key = data[pos]
        pos += 1
        if key & 0x80:
            key, pos = varint_rest(data, pos, key)
        wire = key & 7
        field = fields.get(key >> 3)
        if wire == WIRE_BYTES:
            size = data[pos] if pos < end else 0x80
            pos += 1
            if size & 0x80:
                size, pos = varint_rest(data, pos, size)
            stop = pos + size
            if stop > end:
                raise ProtoError("a field runs past its message's end")
            if field is not None:
                _bytes_field(out, field, data, pos, stop)
            pos = stop
        elif wire == WIRE_VARINT:
            value = data[pos] if pos < end else 0x80
            pos += 1
            if value & 0x80:
                value, pos = varint_rest(data, pos, value)
            if field is not None:
                if field.kind == BOOL:
                    out[field.name] = bool(value)
                elif field.kind == INT or (field.kind == INT_NONZERO and value):
                    out[field.name] = value - (1 << 64) if value >= 1 << 63 else value
        elif wire == WIRE_FIXED64:
            pos += 8
        elif wire == WIRE_FIXED32:
            pos += 4
        else:
            raise ProtoError(f"wire type {wire} of field {key >> 3}")
    if pos != end:
        raise ProtoError("a field runs past its message's end")
    return out


def _bytes_field(out: dict[str, Any], field: Field, data: bytes, pos: int, stop: int) -> None:
    kind = field.kind
    if kind == STR:
        if stop > pos:
            out[field.name] = data[pos:stop].decode(errors=GO_REPLACE)
    elif kind == MSG:
        out[field.name] = _message(data, pos, stop, field.by_number)
    elif kind == MSGS:
        out.setdefault(field.name, []).append(_message(data, pos, stop, field.by_number))
    elif kind == TIME:
        seconds = _message(data, pos, stop, _TIMESTAMP).get("seconds")
        stamp = _rfc3339(seconds) if seconds is not None else None
        if stamp is not None:
            out[field.name] = stamp
    elif kind == MAP:
        entry = _message(data, pos, stop, _MAP_ENTRY)
        name = entry.get("key", "")
        if field.keys is None or name in field.keys:
            out.setdefault(field.name, {})[name] = entry.get("value", "")
    elif kind == STRS:
        out.setdefault(field.name, []).append(data[pos:stop].decode(errors=GO_REPLACE))


_POD_BY_NUMBER = {item.number: item for item in SLIM_POD}
# metav1.Time is a Timestamp{seconds = 1, nanos = 2}, written empty for the zero time;
# JSON shows whole seconds. A map entry is a message {key = 1, value = 2}.
_TIMESTAMP = {1: Field("seconds", 1, INT)}
_MAP_ENTRY = {1: Field("key", 1, STR), 2: Field("value", 2, STR)}


@functools.lru_cache(maxsize=4096)
def _rfc3339(seconds: int) -> str | None:
    """RFC 3339 of a time, None outside years 1-9999 (which JSON cannot show either)."""
    try:
        stamp = time.gmtime(seconds)
    except (OverflowError, OSError, ValueError):
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", stamp) if 1 <= stamp.tm_year <= 9999 else None


def varint_rest(data: bytes, pos: int, first: int) -> tuple[int, int]:
    """A varint whose first byte `first` (continuation bit set) was read before `pos`."""
    value, shift = first & 0x7F, 7
    while True:
        if pos >= len(data) or shift > 63:
            raise ProtoError("a varint runs past its message's end")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
