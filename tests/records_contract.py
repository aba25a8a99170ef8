"""The RecordStore contract: one set of checks that every store implementation passes.

`FileStore` runs it in the unit tier (`tests/unit/test_record_store.py`) and `S3Store`
against the test cluster's real S3 server (`tests/cluster/test_record_store_s3.py`), so
the operator and the records API may treat a directory and a bucket alike. Each check
takes a `StoreFactory`: `make(name)` opens a store at a place of its own that no other
test shares (a directory below tmp_path, a fresh prefix in the bucket); stores of
different names must not see each other's keys.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import pytest

from passhat.records.layout import StoreLayout
from passhat.records.store import RecordStore

__all__ = ["CONTRACT", "StoreFactory"]

StoreFactory = Callable[[str], RecordStore]


def put_then_get(make: StoreFactory) -> None:
    """What was put is read back whole and exists; nothing else does."""
    store = make("main")
    store.put("ns/eval/uid/eval.json", b'{"tasks": ["a"]}')
    assert store.get("ns/eval/uid/eval.json") == b'{"tasks": ["a"]}'
    assert store.exists("ns/eval/uid/eval.json")
    assert list(store.list("")) == ["ns/eval/uid/eval.json"]


def missing_keys(make: StoreFactory) -> None:
    """A key never written reads as None and does not exist, even below a written one."""
    store = make("main")
    assert store.get("ns/eval/uid/eval.json") is None
    assert not store.exists("ns/eval/uid/eval.json")
    assert list(store.list("")) == []
    store.put("ns/eval/uid/eval.json", b"{}")
    for key in ("ns/eval/uid/other.json", "ns/eval/uid", "ns/eval/uid/eval.json/below"):
        assert store.get(key) is None, key
        assert not store.exists(key), key


def put_replaces(make: StoreFactory) -> None:
    """Writing a key again replaces its object: the archive is idempotent per attempt."""
    store = make("main")
    store.put("a/b.log", b"first, and longer than the second")
    store.put("a/b.log", b"second")
    assert store.get("a/b.log") == b"second"
    assert list(store.list("a/")) == ["a/b.log"]


def list_is_lexical(make: StoreFactory) -> None:
    """`list(prefix)` gives every key starting with the prefix, in lexical (byte) order,
    whatever order they were written in and however deep they sit."""
    store = make("main")
    layout = StoreLayout(namespace="ns", name="ev", uid="u1")
    keys = [
        layout.eval_key,
        layout.record_key(0, 0, 1),
        layout.record_key(0, 0, 2),
        layout.record_key(0, 1, 1),
        layout.record_key(1, 0, 1),
        layout.record_key(10, 0, 1),
        layout.record_key(2, 0, 1),
        layout.transcript_key(0, 0, 1),
        # NB: "-" and "." sort before "/": a directory-by-directory walk gets these wrong.
        "ns/ev-x/u/eval.json",
        "ns/ev.y",
        "ns/ev0",
        "z",
    ]
    for key in random.Random(7).sample(keys, len(keys)):
        store.put(key, key.encode())
    assert list(store.list("")) == sorted(keys)
    assert list(store.list("ns/ev/")) == sorted(k for k in keys if k.startswith("ns/ev/"))
    assert list(store.list(layout.records_prefix + "1")) == [
        layout.record_key(1, 0, 1),
        layout.record_key(10, 0, 1),
    ]
    assert list(store.list(layout.records_prefix + "1/")) == [layout.record_key(1, 0, 1)]
    assert list(store.list("ns/ev")) == sorted(k for k in keys if k.startswith("ns/ev"))
    assert list(store.list("nothing/")) == []


def prefixes_are_isolated(make: StoreFactory) -> None:
    """Stores at sibling places (`one`, `one-two`) share no keys, even the same key."""
    one, sibling = make("one"), make("one-two")
    one.put("k/v.json", b"one")
    sibling.put("k/v.json", b"sibling")
    sibling.put("k/w.json", b"sibling only")
    assert one.get("k/v.json") == b"one"
    assert sibling.get("k/v.json") == b"sibling"
    assert list(one.list("")) == ["k/v.json"]
    assert list(sibling.list("k/")) == ["k/v.json", "k/w.json"]
    assert not one.exists("k/w.json")


def binary_data(make: StoreFactory) -> None:
    """Any bytes round-trip unchanged: every byte value, invalid UTF-8, nothing at all."""
    store = make("main")
    data = bytes(range(256)) * 4 + b"\xff\xfe\x00\r\n\r\n\x00"
    store.put("bin/all-bytes", data)
    store.put("bin/empty", b"")
    assert store.get("bin/all-bytes") == data
    assert store.get("bin/empty") == b""
    assert store.exists("bin/empty")


def large_object(make: StoreFactory) -> None:
    """A 5 MiB object (a capped transcript) is stored whole."""
    store = make("main")
    data = os.urandom(5 * 1024 * 1024)
    store.put("big/transcript.log", data)
    assert store.get("big/transcript.log") == data


def deep_and_odd_keys(make: StoreFactory) -> None:
    """Keys with many segments, long segments and characters that need URL quoting."""
    store = make("main")
    keys = [
        "/".join(f"s{i}" for i in range(24)) + "/leaf.json",
        "long/" + "x" * 200 + "/" + "y" * 200,
        "odd/a b+c=d%20e&f?g#h;i,j~k'l(m)n!o*p@q$r.json",
        "odd/ünïcödé/ø.log",
    ]
    for key in keys:
        store.put(key, key.encode())
    for key in keys:
        assert store.get(key) == key.encode(), key
        assert store.exists(key), key
    assert list(store.list("")) == sorted(keys)
    assert list(store.list("odd/")) == sorted(keys[2:])


def invalid_keys_refused(make: StoreFactory) -> None:
    """Keys that could climb, split or name nothing raise ValueError and store nothing."""
    store = make("main")
    for key in ("", "/abs", "a//b", "a/./b", "a/../b", "..", "a/", "."):
        with pytest.raises(ValueError):
            store.put(key, b"x")
        with pytest.raises(ValueError):
            store.get(key)
        with pytest.raises(ValueError):
            store.exists(key)
    assert list(store.list("")) == []


CONTRACT: list[Callable[[StoreFactory], None]] = [
    put_then_get,
    missing_keys,
    put_replaces,
    list_is_lexical,
    prefixes_are_isolated,
    binary_data,
    large_object,
    deep_and_odd_keys,
    invalid_keys_refused,
]
