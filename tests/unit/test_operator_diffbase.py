"""kopf's diff base stays tiny, however big the eval.

Annotations are capped at 256 KiB in total, and kopf's default diff base copies the spec,
labels and annotations into one: an eval with a bigger spec could not be patched by kopf,
nor deleted. passhat has no create/update handlers, so the essence it stores is empty.
"""

from __future__ import annotations

import datetime
import json
import logging
from typing import Any, cast

import kopf

from passhat.api.spec import GROUP
from passhat.operator.handlers import _settings

KIB = 1024
DIFF_BASE = f"{GROUP}/last-handled-configuration"


def big_eval(annotations: dict[str, str] | None = None) -> kopf.Body:
    """An eval with a 300 KiB spec and 150 KiB of user annotations (and labels)."""
    raw: dict[str, Any] = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "ConsistencyEval",
        "metadata": {
            "name": "big",
            "namespace": "default",
            "uid": "1234",
            "labels": {"team": "evals"},
            "annotations": {"example.com/notes": "n" * (150 * KIB), **(annotations or {})},
        },
        "spec": {
            "tasks": [{"id": f"t{i}", "params": {"prompt": "x" * (100 * KIB)}} for i in range(3)],
            "trials": 1,
        },
        "status": {"progress": {"done": 3}},
    }
    return kopf.Body(cast(kopf.RawBody, raw))


def storage() -> kopf.DiffBaseStorage:
    settings = kopf.OperatorSettings()
    now = datetime.datetime.now(datetime.UTC)
    _settings(
        settings=settings,
        retry=0,
        started=now,
        runtime=datetime.timedelta(0),
        logger=logging.getLogger(__name__),
        memo=kopf.Memo(),
    )
    return settings.persistence.diffbase_storage


def test_the_essence_of_a_big_eval_is_empty() -> None:
    body = big_eval()
    assert len(json.dumps(dict(body))) > 450 * KIB  # the premise
    assert storage().build(body=body) == {}


def test_what_kopf_stores_is_tiny_and_reads_back_unchanged() -> None:
    """The annotation kopf writes is a few bytes, and the next event sees no change."""
    store = storage()
    body = big_eval()
    essence = store.build(body=body)
    patch = kopf.Patch()
    store.store(body=body, patch=patch, essence=essence)
    written = dict(patch["metadata"]["annotations"])
    assert written[DIFF_BASE] == "{}\n"
    assert sum(len(key) + len(value) for key, value in written.items()) < KIB, written

    stored = big_eval(annotations=written)
    assert store.fetch(body=stored) == {}  # NB: not None, which kopf takes for a new object
    assert store.build(body=stored) == store.fetch(body=stored)


def test_an_old_full_copy_is_replaced() -> None:
    """An eval the previous operator handled carries its whole essence; the new essence
    differs from it (one no-handler update), and storing it writes the empty one."""
    old = kopf.AnnotationsDiffBaseStorage(prefix=GROUP, key="last-handled-configuration")
    full = json.dumps(old.build(body=big_eval()), separators=(",", ":")) + "\n"
    assert len(full) > 400 * KIB
    body = big_eval(annotations={DIFF_BASE: full})
    store = storage()
    assert store.fetch(body=body) != store.build(body=body) == {}
    patch = kopf.Patch()
    store.store(body=body, patch=patch, essence=store.build(body=body))
    assert patch["metadata"]["annotations"][DIFF_BASE] == "{}\n"


def test_the_empty_essence_is_what_kopf_would_build_without_copying_the_eval() -> None:
    """passhat's storage skips kopf's deep copy of the whole eval (once per eval event,
    #22) and answers what kopf's own build answers with the same ignored fields; fields a
    handler asks for still go through kopf's build."""
    kopfs = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration", ignored_fields=["spec", "metadata"]
    )
    store = storage()
    for body in (big_eval(), big_eval(annotations={"kopf.zalando.org/x": "y"})):
        assert store.build(body=body) == kopfs.build(body=body) == {}
    extra = [("status", "progress")]
    assert store.build(body=big_eval(), extra_fields=extra) == {"status": {"progress": {"done": 3}}}
