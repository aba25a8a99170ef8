"""`passhat regrade NAME --pods` (passhat/operator/regrade_pods.py): each grading a pod of
the eval's grader, made with the caller's rights, never one the operator would count;
its verdict read as the stability check reads it; every pod deleted."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from passhat.api.errors import UsageError
from passhat.api.spec import EvalSpec
from passhat.cli import main
from passhat.grading.noise import TranscriptGrades
from passhat.operator.kube import ApiError
from passhat.operator.regrade_pods import LABEL_REGRADE, PodGrader
from passhat.trials.outcomes import Outcome

SPEC = {
    "tasks": [{"id": "alpha"}],
    "trials": 2,
    "trial": {
        "timeoutSeconds": 60,
        "template": {
            "metadata": {"labels": {"kueue.x-k8s.io/queue-name": "team"}},
            "spec": {"nodeSelector": {"type": "real"}, "containers": [{"name": "a", "image": "x"}]},
        },
    },
    "grading": {
        "grader": {
            "image": "judge:1",
            "command": ["sh", "-c", "judge"],
            "env": [{"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
        }
    },
}


class FakeKube:
    """Pods that end as `ending(pod)` says: (phase, reason, exit code, log)."""

    def __init__(self, ending: Any, *, refuse: bool = False) -> None:
        self.ending = ending
        self.refuse = refuse
        self.pods: dict[str, dict[str, Any]] = {}
        self.made: list[dict[str, Any]] = []
        self.deleted: list[str] = []

    def _request(self, verb: str, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        if verb == "create":
            if self.refuse:
                raise ApiError("create", 403, 'pods is forbidden: User "dave" cannot create pods')
            pod = kwargs["body"]
            self.made.append(pod)
            self.pods[pod["metadata"]["name"]] = pod
            return 201, pod
        assert verb == "delete"
        name = path.rsplit("/", 1)[1]
        self.deleted.append(name)
        return (200, {}) if self.pods.pop(name, None) is not None else (404, {})

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        pod = self.pods.get(name)
        if pod is None:
            return None
        phase, reason, code, _ = self.ending(pod)
        status: dict[str, Any] = {"phase": phase, "startTime": "2026-12-05T00:00:00Z"}
        if reason:
            status["reason"] = reason
        if code is not None:
            state = {"terminated": {"exitCode": code}}
            status["containerStatuses"] = [{"name": "grader", "state": state}]
        return {"metadata": pod["metadata"], "spec": {}, "status": status}

    def read_pod_log(self, namespace: str, name: str, *args: Any, **kwargs: Any) -> bytes:
        return str(self.ending(self.pods[name])[3]).encode()


def grader(kube: FakeKube, **kwargs: Any) -> PodGrader:
    spec = EvalSpec.model_validate(SPEC)
    return PodGrader(
        kube,  # type: ignore[arg-type]
        namespace="team-a", name="rg", uid="uid-1", spec=spec, timeout_s=30,
        poll_s=0, **kwargs,
    )  # fmt: skip


def transcript(tmp_path: Path, text: str = "answer: correct\n") -> str:
    path = tmp_path / "t.log"
    path.write_text(text)
    return str(path)


def test_a_grading_is_a_pod_the_operator_never_counts_and_is_deleted(tmp_path: Path) -> None:
    """The pod: the grader's image, command and env, the transcript, the deadline, the
    template's queue and node selector; no eval labels, finalizer or owner; deleted once
    its verdict (the exit code, or the log's result JSON) is read."""

    def ending(pod: Mapping[str, Any]) -> tuple[str, str, int, str]:
        good = "correct" in pod["metadata"]["annotations"]["passhat.dev/transcript"]
        return ("Succeeded", "", 0, "ok") if good else ("Failed", "", 1, "wrong")

    kube = FakeKube(ending)
    graded = TranscriptGrades("alpha", 1, 0, original="pass")
    grade = grader(kube)(graded, 2, transcript(tmp_path))
    assert grade.outcome is Outcome.PASS
    [pod] = kube.made
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["name"].startswith("rg-regrade-") and meta["namespace"] == "team-a"
    assert meta["labels"] == {
        LABEL_REGRADE: meta["labels"][LABEL_REGRADE],
        "kueue.x-k8s.io/queue-name": "team",
    }
    assert "finalizers" not in meta and "ownerReferences" not in meta
    assert meta["annotations"]["passhat.dev/transcript"] == "answer: correct\n"
    assert spec["activeDeadlineSeconds"] == 30 and spec["nodeSelector"] == {"type": "real"}
    [container] = spec["containers"]
    assert container["image"] == "judge:1" and container["command"][-1] == "judge"
    env = {e["name"]: e for e in container["env"]}
    assert env["KEY"]["valueFrom"]["secretKeyRef"] == {"name": "s", "key": "k"}
    assert env["PASSHAT_GRADING"]["value"] == "2" and env["PASSHAT_TRIAL"]["value"] == "1"
    assert kube.deleted == [meta["name"]] and kube.pods == {}

    bad = grader(kube)(graded, 0, transcript(tmp_path, "answer: nope\n"))
    assert bad.outcome is Outcome.FAIL
    result = json.dumps({"outcome": "fail", "reason": "judged"})
    by_log = FakeKube(lambda pod: ("Succeeded", "", 0, f"thinking\n{result}\n"))
    assert grader(by_log)(graded, 0, transcript(tmp_path)).outcome is Outcome.FAIL


def test_a_hung_crashed_or_lost_grader_pod_is_a_grader_error(tmp_path: Path) -> None:
    """DeadlineExceeded, exit 75, no exit code, a pod deleted under it, one never started
    past timeout + 120 s: grader errors, never verdicts, each saying why."""
    graded = TranscriptGrades("alpha", 0, 0, original="pass")
    path = transcript(tmp_path)
    cases = {
        ("Failed", "DeadlineExceeded", None, ""): "timed out after 30 s",
        ("Failed", "", 75, "rate limited"): "",
        ("Failed", "", None, ""): "ended without an exit code",
    }
    for ending, says in cases.items():
        grade = grader(FakeKube(lambda pod, e=ending: e))(graded, 0, path)
        assert grade.outcome is Outcome.INFRA_ERROR, ending
        assert says in (grade.message or ""), (ending, grade.message)

    kube = FakeKube(lambda pod: ("Pending", "", None, ""))
    kube.get_pod = lambda namespace, name: None  # type: ignore[method-assign]
    assert "deleted before it ended" in str(grader(kube)(graded, 0, path).message)

    stuck = FakeKube(lambda pod: ("Pending", "", None, ""))
    late = grader(stuck, clock=lambda: 2e9)(graded, 0, path)
    assert "did not finish within 30 s + 120 s" in str(late.message)
    assert stuck.pods == {}


def test_no_right_to_create_pods_says_which_rights_and_nothing_is_left(tmp_path: Path) -> None:
    kube = FakeKube(lambda pod: ("Succeeded", "", 0, ""), refuse=True)
    with pytest.raises(
        UsageError,
        match=r"--pods: cannot create the grader pod in namespace "
        r"team-a \(regrading runs with your rights: create, get, delete pods",
    ):
        grader(kube)(TranscriptGrades("alpha", 0, 0, original="pass"), 0, transcript(tmp_path))
    assert kube.pods == {}


def test_an_eval_without_a_grader_image_cannot_regrade_in_pods() -> None:
    body = json.loads(json.dumps(SPEC))
    del body["grading"]["grader"]["image"]
    with pytest.raises(UsageError, match=r"declares no spec\.grading\.grader with an image"):
        PodGrader(
            FakeKube(None),  # type: ignore[arg-type]
            namespace="n", name="e", uid="u", spec=EvalSpec.model_validate(body), timeout_s=5,
        )  # fmt: skip


def test_pods_needs_a_cluster_eval_and_no_grader_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rundir = tmp_path / "run"
    rundir.mkdir()
    assert main(["regrade", str(rundir), "--pods"]) == 2
    assert "--pods regrades a cluster eval (NAME -n NS)" in capsys.readouterr().err
