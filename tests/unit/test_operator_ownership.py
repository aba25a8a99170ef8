"""Only the operator's own pods count, and only they are touched (#17 section 3).

A tenant who may create pods in an eval's namespace can copy everything a trial pod
carries (labels, the eval's controller owner reference, our finalizer, even another pod's
creation mark) and take a trial's predictable name first; none of that makes the pod
count or lets the operator patch or delete it.
"""

from __future__ import annotations

import copy
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from passhat.operator import events
from passhat.operator.config import OperatorConfig
from passhat.operator.loop import PassState
from passhat.operator.ownership import (
    ANNOTATION_CREATED_BY,
    PodSigner,
    default_key_file,
    load_pod_key,
)
from passhat.operator.pods import FINALIZER, LABEL_RECORDED, PodKey, pod_name
from passhat.trials.ledger import SlotLedger, SlotState
from tests.unit.test_operator_loop import Harness, spec

SIGNER = PodSigner(OperatorConfig().pod_key)


def pod_of(uid: str = "e-1", *, name: str = "p", namespace: str = "ns") -> dict[str, Any]:
    owner = {"kind": "ConsistencyEval", "name": "e", "uid": uid, "controller": True}
    return {"metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]}}


def test_marks_are_cached_within_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass checks every listed pod's mark: computed once per (namespace, name, eval),
    the cache cleared when full, and a mark from the cache is the mark computed afresh."""
    import passhat.operator.ownership as ownership

    monkeypatch.setattr(ownership, "_MARKS_CACHED", 4)
    signer, fresh = PodSigner(b"k" * 32), PodSigner(b"k" * 32)
    first = signer.mark("ns", "p-0", "e-1")
    assert signer.mark("ns", "p-0", "e-1") is first  # NB: the cached string itself
    marks = [signer.mark("ns", f"p-{index}", "e-1") for index in range(10)]
    assert len(signer._marks) <= 4
    assert marks == [fresh.mark("ns", f"p-{index}", "e-1") for index in range(10)]
    assert signer.mark("ns", "p-0", "e-2") != first
    assert PodSigner(b"j" * 32).mark("ns", "p-0", "e-1") != first


def test_the_mark_binds_namespace_name_and_eval() -> None:
    """A mark verifies only on the pod it was made for, under the key that made it, with
    the eval as controller; labels play no part."""
    pod = SIGNER.sign(pod_of())
    assert SIGNER.owner_uid(pod) == "e-1" and SIGNER.owns(pod, "e-1")
    assert not SIGNER.owns(pod, "e-2")
    changes: list[dict[str, Any]] = [
        {"name": "q"},
        {"namespace": "other"},
        {"ownerReferences": pod_of("e-2")["metadata"]["ownerReferences"]},
        {"ownerReferences": [{**pod["metadata"]["ownerReferences"][0], "controller": False}]},
        {"annotations": {}},
        {"annotations": {ANNOTATION_CREATED_BY: "v1:" + "0" * 64}},
    ]
    for changed in changes:
        forged = copy.deepcopy(pod)
        forged["metadata"].update(changed)
        assert SIGNER.owner_uid(forged) is None, changed
    assert PodSigner(b"another key, 32 bytes or longer!").owner_uid(pod) is None
    relabelled = copy.deepcopy(pod)
    relabelled["metadata"]["labels"] = {"passhat.dev/eval-uid": "e-2"}
    assert SIGNER.owner_uid(relabelled) == "e-1"


def test_the_key_file_is_made_once_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a named file the key lives in $XDG_STATE_HOME/passhat/pod-key, made (0600)
    on first use and read again after; a short key is refused naming the file."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    key = load_pod_key(None)
    assert default_key_file() == tmp_path / "passhat" / "pod-key"
    assert stat.S_IMODE(os.stat(default_key_file()).st_mode) == 0o600
    assert load_pod_key(None) == key and len(key) >= 32
    assert load_pod_key(default_key_file()) == key
    short = tmp_path / "short"
    short.write_text("secret\n")
    with pytest.raises(ValueError, match="short: the pod key has 6 bytes"):
        load_pod_key(short)


def harness_of(trials: int, *, parallelism: int, seed: int = 70) -> tuple[Harness, list[Any]]:
    """One task x `trials` trials; the events the loop posts are collected."""
    body = spec(tasks=[{"id": "only"}], trials=trials, ks=[1], parallelism=parallelism)
    harness = Harness(seed, body=body)
    posted = harness.collect_events()
    return harness, posted


def imitate(harness: Harness, real: str, name: str, *, trial: int) -> dict[str, Any]:
    """A pod another user creates from trial pod `real`: its labels (for `trial`), the
    eval's controller reference, our finalizer and `real`'s creation mark, under `name`;
    it has passed."""
    pod = copy.deepcopy(harness.api.pods[real])
    pod["metadata"].update(name=name, uid=f"uid-{name}")
    pod["metadata"]["labels"]["passhat.dev/trial"] = str(trial)
    harness.api.pods[name] = pod
    harness.finish(name, 0)
    return copy.deepcopy(pod)


def test_a_squatted_trial_name_is_lost_not_counted_nor_touched() -> None:
    """A user's pod takes trial 1's attempt-0 name before the operator creates it, with
    the eval's owner reference, labels, finalizer and a copied mark, and passes. It is not
    counted; attempt 0 is lost with a TrialPodNameTaken event naming the pod; attempt 1
    runs under a new name and decides the trial; the squatter is never patched or deleted."""
    harness, posted = harness_of(2, parallelism=1)
    harness.loop.run_pass()
    (real,) = harness.api.pods
    squatted = pod_name(harness.ref, PodKey(0, 1, 0))
    squatter = imitate(harness, real, squatted, trial=1)
    harness.finish(real, 1)
    for _ in range(4):
        harness.clock.now += 1
        harness.loop.run_pass()
    ledger = SlotLedger.unpack(harness.status["ledger"])
    assert ledger.attempts(0, 1) == 1 and not ledger.is_final(0, 1)
    retry = pod_name(harness.ref, PodKey(0, 1, 1))
    assert retry in harness.api.pods
    reasons = [event.reason for event in posted]
    assert reasons.count(events.TRIAL_NAME_TAKEN) == 1
    assert reasons.count(events.FOREIGN_POD) == 1
    (taken,) = [event for event in posted if event.reason == events.TRIAL_NAME_TAKEN]
    assert f"pod {squatted} holds the name of task only trial 1 attempt 0" in taken.message
    harness.finish(retry, 0)
    for _ in range(3):
        harness.clock.now += 1
        if harness.loop.run_pass().state is PassState.DONE:
            break
    ledger = SlotLedger.unpack(harness.status["ledger"])
    assert [ledger.state(0, trial) for trial in (0, 1)] == [SlotState.FAIL, SlotState.PASS]
    assert harness.api.pods[squatted] == squatter
    assert harness.api.foreign_touches == []


@pytest.mark.parametrize("ending", ["complete", "config-error"])
def test_a_look_alike_is_left_alone_at_the_end_and_on_config_error(ending: str) -> None:
    """A pod with the eval's owner reference, labels, finalizer and a copied mark under
    another name is never counted, and neither the end of the eval nor a ConfigError
    (which let every pod of the eval go) patches or deletes it."""
    harness, posted = harness_of(1, parallelism=1)
    harness.loop.run_pass()
    (real,) = harness.api.pods
    look_alike = imitate(harness, real, "look-alike", trial=0)
    if ending == "complete":
        harness.finish(real, 1)
    else:
        harness.api.evals["demo"]["spec"]["trials"] = 2  # NB: the ledger no longer fits
        harness.api.evals["demo"]["metadata"]["generation"] = 2
    for _ in range(3):
        harness.clock.now += 1
        if harness.loop.run_pass().state is PassState.DONE:
            break
    conditions = {c["type"]: c["status"] for c in harness.status["conditions"]}
    if ending == "complete":
        ledger = SlotLedger.unpack(harness.status["ledger"])
        assert ledger.state(0, 0) is SlotState.FAIL
        assert harness.api.kept_pods() == [real]
    else:
        assert conditions["ConfigError"] == "True"
        assert real not in harness.api.pods
    assert harness.api.pods["look-alike"] == look_alike
    assert FINALIZER in look_alike["metadata"]["finalizers"]
    assert LABEL_RECORDED not in look_alike["metadata"]["labels"]
    assert harness.api.foreign_touches == []
    assert [e.reason for e in posted].count(events.FOREIGN_POD) == 1


def test_a_flood_of_look_alikes_is_reported_ten_times_at_most() -> None:
    """Fifty look-alikes: none counted or touched, and ten ForeignTrialPod events, not fifty."""
    harness, posted = harness_of(1, parallelism=1)
    harness.loop.run_pass()
    (real,) = harness.api.pods
    for index in range(50):
        imitate(harness, real, f"look-alike-{index}", trial=0)
    for _ in range(3):
        harness.clock.now += 1
        harness.loop.run_pass()
    assert [e.reason for e in posted].count(events.FOREIGN_POD) == 10
    assert SlotLedger.unpack(harness.status["ledger"]).attempts(0, 0) == 0
    assert harness.api.foreign_touches == []
