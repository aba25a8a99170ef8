"""The operator's grader stability check (spec.grading.stabilityCheck) in the reconcile loop:
grader pods regrade the sample, status.graderCheck and GraderStable say how noisy the
grader is, the gate fails on an unstable one, and every grading counts once under kills."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from passhat.api.spec import EvalSpec
from passhat.grading import sample_graded
from passhat.operator.archive import Archiver
from passhat.operator.gradercheck import (
    ANNOTATION_TRANSCRIPT,
    LABEL_GRADING,
    MAX_TRANSCRIPT_BYTES,
    CheckLedger,
    build_grader_pod,
    grading_key,
    start_ledger,
)
from passhat.operator.loop import EvalLoop, PassState
from passhat.operator.pods import EvalRef, PodKey
from passhat.operator.policy import TrialPolicy
from passhat.operator.status import condition_status
from passhat.records import FileStore
from passhat.records.record import AttemptRecord
from passhat.trials.ledger import SlotLedger, SlotState
from tests.unit.test_operator_loop import CONFIG, N_TASKS, Harness, comparable, spec

GRADER = {"image": "judge:1", "command": ["python3", "judge.py"]}


def check_spec(**check: Any) -> dict[str, Any]:
    """The loop tests' spec with a grader and a stability check (all graded attempts)."""
    stability = {"sample": 200, "times": 3, "maxNoiseRate": 0.1, "timeoutSeconds": 30}
    stability.update(check)
    return spec(grading={"grader": GRADER, "stabilityCheck": stability})


def env(pod: Mapping[str, Any]) -> dict[str, str]:
    container = pod["spec"]["containers"][0]
    return {item["name"]: item["value"] for item in container["env"]}


def honest(pod: Mapping[str, Any]) -> tuple[int, str]:
    """A consistent judge: the verdict the transcript shows (the fake agent prints it)."""
    transcript = pod["metadata"]["annotations"][ANNOTATION_TRANSCRIPT]
    return (0, "ok\n") if transcript.rstrip().endswith(": pass") else (1, "no\n")


def noisy_on_task_0(pod: Mapping[str, Any]) -> tuple[int, str]:
    """Honest, but on task-0's transcripts a coin by the grading's number: pass on even
    gradings, fail on odd ones (so with 3 gradings each such transcript is noisy)."""
    variables = env(pod)
    if variables["PASSHAT_TASK_ID"] == "task-0":
        verdict = "pass" if int(variables["PASSHAT_GRADING"]) % 2 == 0 else "fail"
        return 0, f'reasoning...\n{{"outcome": "{verdict}", "reason": "coin"}}\n'
    return honest(pod)


def hangs(pod: Mapping[str, Any]) -> None:
    """A grader that never answers."""
    return None


def graded(status: Mapping[str, Any]) -> list[tuple[int, int, int]]:
    """Every graded attempt (task, trial, attempt) of the eval's ledger."""
    ledger = SlotLedger.unpack(status["ledger"])
    return [
        (task, trial, ledger.attempts(task, trial) - 1)
        for task in range(ledger.n_tasks)
        for trial in range(ledger.trials)
        if ledger.state(task, trial) in (SlotState.PASS, SlotState.FAIL)
    ]


def test_an_honest_grader_is_stable_and_the_gate_passes() -> None:
    """Every graded transcript is regraded 3 times by grader pods; none is noisy, so
    GraderStable=True, the gate passes and the noise-rate gauge is 0."""
    harness = Harness(0, body=check_spec(), grader=honest)
    harness.run()
    status = harness.status
    check = status["graderCheck"]
    assert check["phase"] == "Done" and check["stable"] is True
    assert check["transcripts"] == len(graded(status)) and check["judged"] == check["transcripts"]
    assert check["noiseRate"] == 0.0 and check["noisy"] == [] and check["graderErrors"] == 0
    assert check["disagreeWithOriginal"] == 0.0
    assert check["gradings"] == check["doneGradings"] == 3 * check["transcripts"]
    assert condition_status(status, "GraderStable") == "True"
    assert condition_status(status, "GatePassed") == "True"
    assert status["gate"]["passed"] is True and status["gate"]["graderStable"] is True
    assert status["phase"] == "Succeeded"
    grader_pods = [p for p in harness.api.pods.values() if LABEL_GRADING in p["metadata"]["labels"]]
    assert len(grader_pods) == check["gradings"]
    assert all(p["metadata"]["labels"]["passhat.dev/recorded"] == "true" for p in grader_pods)


def test_a_grader_noisy_on_one_task_fails_the_gate_and_names_its_transcripts() -> None:
    """Noisy on exactly task-0's transcripts: the noise rate is their share of the sample,
    the noisy list names exactly them, GraderStable=False and the gate fails although
    the metric passes (the gate a noisy grader would have passed)."""
    harness = Harness(0, body=check_spec(), grader=noisy_on_task_0)
    harness.run()
    status = harness.status
    check = status["graderCheck"]
    sample = graded(status)
    task0 = [key for key in sample if key[0] == 0]
    assert check["transcripts"] == len(sample) and len(task0) >= 1
    assert check["noiseRate"] == pytest.approx(len(task0) / len(sample))
    assert check["noisyTotal"] == len(task0)
    assert sorted((n["taskId"], n["trial"], n["attempt"]) for n in check["noisy"]) == sorted(
        (f"task-{t}", trial, attempt) for t, trial, attempt in task0
    )
    assert all(n["verdicts"] == {"pass": 2, "fail": 1, "grader_error": 0} for n in check["noisy"])
    low, high = check["noiseRateInterval"]
    assert low < check["noiseRate"] < high
    assert check["stable"] is False
    assert condition_status(status, "GraderStable") == "False"
    gate = status["gate"]
    assert gate["value"] >= gate["min"], "the metric itself passes"
    assert gate["passed"] is False and gate["graderStable"] is False
    assert condition_status(status, "GatePassed") == "False"
    reasons = {c["type"]: c["reason"] for c in status["conditions"]}
    assert reasons["GatePassed"] == "GraderUnstable"
    assert reasons["GraderStable"] == "NoiseAboveLimit"
    assert status["phase"] == "Succeeded" and condition_status(status, "Complete") == "True"


def test_the_same_noise_within_max_noise_rate_is_stable() -> None:
    """maxNoiseRate decides: the same noisy grader with a limit above its rate is stable."""
    harness = Harness(0, body=check_spec(maxNoiseRate=0.5), grader=noisy_on_task_0)
    harness.run()
    status = harness.status
    assert 0 < status["graderCheck"]["noiseRate"] <= 0.5
    assert condition_status(status, "GraderStable") == "True"
    assert status["gate"]["passed"] is True


def test_the_eval_is_not_complete_while_the_check_runs() -> None:
    """Once every trial slot is final the eval stays non-terminal (Complete=False,
    CheckingGrader; GraderStable=Unknown; the daemon keeps running) until the grader
    pods ended; the gate is not passed meanwhile."""
    harness = Harness(0, body=check_spec(), grader=hangs)
    for _ in range(400):
        harness.clock.now += 1.0
        harness.kubelet.step()
        result = harness.loop.run_pass()
        if "graderCheck" in harness.status:
            break
    status = harness.status
    assert result.state is not PassState.DONE
    assert condition_status(status, "Complete") == "False"
    reasons = {c["type"]: c["reason"] for c in status["conditions"]}
    assert reasons["Complete"] == "CheckingGrader"
    assert condition_status(status, "GraderStable") == "Unknown"
    assert "GatePassed" not in reasons and status["gate"]["passed"] is False
    assert status["phase"] == "Running" and status["graderCheck"]["phase"] == "Running"


def test_a_hanging_grader_is_a_grader_error_within_its_timeout() -> None:
    """A grader that never answers is killed at its timeout (activeDeadlineSeconds):
    every grading is a grader error, no verdict, GraderStable=False (NoVerdicts) and the
    gate fails; the check ends within the timeout of each grading."""
    harness = Harness(0, body=check_spec(timeoutSeconds=20), grader=hangs)
    harness.run()
    status = harness.status
    check = status["graderCheck"]
    assert check["graderErrors"] == check["gradings"] > 0
    assert check["judged"] == 0 and check["stable"] is False
    assert any("timed out after 20 s" in m for m in check["graderErrorMessages"])
    reasons = {c["type"]: c["reason"] for c in status["conditions"]}
    assert reasons["GraderStable"] == "NoVerdicts"
    assert status["gate"]["passed"] is False and status["phase"] == "Succeeded"


def test_a_crashing_grader_is_a_grader_error_never_a_verdict() -> None:
    """Exit 2 (a crash) and exit 75 are grader errors, counted apart from the verdicts."""

    def crashes_on_task_1(pod: Mapping[str, Any]) -> tuple[int, str]:
        if env(pod)["PASSHAT_TASK_ID"] == "task-1":
            return (2, "Traceback: boom\n") if env(pod)["PASSHAT_GRADING"] == "0" else (75, "")
        return honest(pod)

    harness = Harness(0, body=check_spec(), grader=crashes_on_task_1)
    harness.run()
    check = harness.status["graderCheck"]
    task1 = [key for key in graded(harness.status) if key[0] == 1]
    assert check["graderErrors"] == 3 * len(task1)
    assert check["judged"] == check["transcripts"] - len(task1)
    assert check["noiseRate"] == 0.0 and check["stable"] is True
    assert any("exited 2: Traceback: boom" in m for m in check["graderErrorMessages"])


def untimed(status: Mapping[str, Any]) -> dict[str, Any]:
    """`comparable(status)`, the check's timestamps dropped too."""
    result = comparable(dict(status))
    result["graderCheck"] = {
        key: value
        for key, value in status["graderCheck"].items()
        if key not in ("startTime", "completionTime")
    }
    return result


def test_every_grading_counts_once_under_operator_kills() -> None:
    """Killed at random API calls (before or after they apply), the operator ends with the
    same status as an uninterrupted run: no grading lost or counted twice, no grader pod
    made twice, none left holding the finalizer."""
    clean = Harness(0, body=check_spec(), grader=noisy_on_task_0)
    clean.run()
    for seed in range(1, 6):
        harness = Harness(0, body=check_spec(), grader=noisy_on_task_0)
        harness.rng.seed(seed)
        harness.run(kill_chance=0.3)
        assert harness.kills > 0
        assert untimed(harness.status) == untimed(clean.status)
        grader_names = [n for n in harness.api.created_names if "-g" in n.split("-t")[-1]]
        assert (
            len(grader_names) == len(set(grader_names)) == clean.status["graderCheck"]["gradings"]
        )
        assert harness.api.pods_with_finalizer() == []


def test_the_sample_is_seeded_and_only_of_graded_attempts() -> None:
    """sample N draws N graded attempts with the seed (the sample `passhat regrade --sample
    N --seed S` draws); infra attempts are counted, never sampled."""
    harness = Harness(0, body=check_spec(sample=5, seed=7), grader=honest)
    harness.run()
    status = harness.status
    ledger = SlotLedger.unpack(status["ledger"])
    body = EvalSpec.model_validate(check_spec(sample=5, seed=7))
    assert body.grading.stability_check is not None
    task_ids = [f"task-{i}" for i in range(N_TASKS)]
    book, sample = start_ledger(ledger, task_ids, body.grading.stability_check)
    check = status["graderCheck"]
    assert check["transcripts"] == 5 and len(book.entries) == 5
    assert check["gradedAttempts"] == len(graded(status)) == sample.graded
    infra = sum(ledger.attempts(t, r) for t in range(N_TASKS) for r in range(ledger.trials))
    assert check["infraAttemptsSkipped"] == infra - sample.graded > 0
    keys = [e.key for e in CheckLedger.unpack(check["ledger"], 3).entries]
    assert keys == [e.key for e in book.entries]
    assert all((k.task, k.trial, k.attempt) in graded(status) for k in keys)
    # the sample `passhat regrade NAME --sample 5 --seed 7` draws from the archived records
    records: list[AttemptRecord] = []
    for task, trial, last in graded(status):
        records += [
            AttemptRecord(task_id=f"task-{task}", trial=trial, attempt=a, outcome="infra_error")
            for a in range(last)
        ]
        state = "pass" if ledger.state(task, trial) is SlotState.PASS else "fail"
        records.append(
            AttemptRecord(task_id=f"task-{task}", trial=trial, attempt=last, outcome=state)
        )
    chosen = sample_graded(records, sample=5, seed=7).chosen
    assert [(r["task_id"], r["trial"], r["attempt"]) for r in chosen] == [
        (f"task-{k.task}", k.trial, k.attempt) for k in keys
    ]


def test_a_transcript_too_large_for_a_pod_annotation_is_not_regraded() -> None:
    """A transcript over MAX_TRANSCRIPT_BYTES is counted missing (never cut and graded)."""
    harness = Harness(0, body=check_spec(sample=8), grader=honest)
    original = harness.api.read_pod_log

    def huge(
        namespace: str, name: str, container: str, limit: int, tail_lines: int | None = None
    ) -> bytes:
        log = original(namespace, name, container, limit, tail_lines)
        return log + b"x" * MAX_TRANSCRIPT_BYTES if "-t0-" in name else log

    harness.api.read_pod_log = huge  # type: ignore[method-assign,assignment]
    harness.run()
    check = harness.status["graderCheck"]
    task0 = sum(1 for e in CheckLedger.unpack(check["ledger"], 3).entries if e.marks == ["L"])
    assert task0 >= 1 and check["missingTranscripts"] == task0
    assert check["transcripts"] == 8 - task0


def test_the_grader_pod_is_restricted_signed_and_carries_the_transcript() -> None:
    """The grader pod: the spec's image and command under a /bin/sh stdin wrapper, the
    transcript in an annotation mounted by a downward-API volume at $PASSHAT_TRANSCRIPT,
    the timeout as activeDeadlineSeconds, no service-account token, restricted pod
    security (the operator's own TrialPolicy finds nothing), the trial template's
    scheduling, owned by the eval and holding the trial finalizer."""
    body = check_spec()
    body["trial"]["template"]["spec"]["nodeSelector"] = {"type": "real"}
    parsed = EvalSpec.model_validate(body)
    ref = EvalRef("ns", "demo", "uid-1")
    pod = build_grader_pod(
        eval_ref=ref,
        spec=parsed,
        task=parsed.tasks[2] if parsed.tasks else None,  # type: ignore[arg-type]
        attempt=PodKey(2, 1, 0),
        key=grading_key({"metadata": {"labels": {LABEL_GRADING: "4-2"}}}),  # type: ignore[arg-type]
        transcript="answer: correct\n",
    )
    container = pod["spec"]["containers"][0]
    assert container["image"] == "judge:1"
    assert container["command"][:2] == ["/bin/sh", "-c"]
    assert container["command"][-2:] == ["python3", "judge.py"]
    assert env(pod)["PASSHAT_TRANSCRIPT"] == "/var/run/passhat/transcript"
    assert env(pod)["PASSHAT_GRADING"] == "2" and env(pod)["PASSHAT_TASK_ID"] == "task-2"
    assert pod["metadata"]["annotations"][ANNOTATION_TRANSCRIPT] == "answer: correct\n"
    volume = pod["spec"]["volumes"][0]["downwardAPI"]["items"][0]
    assert volume["fieldRef"]["fieldPath"] == f"metadata.annotations['{ANNOTATION_TRANSCRIPT}']"
    assert pod["spec"]["activeDeadlineSeconds"] == 30
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert pod["spec"]["nodeSelector"] == {"type": "real"}
    assert pod["metadata"]["finalizers"] == ["passhat.dev/trial-accounting"]
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert TrialPolicy().problems({"spec": pod["spec"]}, namespace="ns") == []


def test_the_grader_pod_gets_the_specs_env_from_secrets_and_config_maps() -> None:
    """grading.grader.env and envFrom reach the grader container (an LLM judge's API key
    from a Secret of the eval's namespace), before passhat's own PASSHAT_ variables, which
    the spec may not name; the TrialPolicy still finds nothing."""
    body = check_spec()
    body["grading"]["grader"] = {
        **GRADER,
        "env": [
            {"name": "JUDGE_KEY", "valueFrom": {"secretKeyRef": {"name": "judge", "key": "k"}}},
            {"name": "JUDGE_MODEL", "value": "m-1"},
        ],
        "envFrom": [{"configMapRef": {"name": "judge-settings"}, "prefix": "J_"}],
    }
    parsed = EvalSpec.model_validate(body)
    pod = build_grader_pod(
        eval_ref=EvalRef("ns", "demo", "uid-1"),
        spec=parsed,
        task=parsed.tasks[0] if parsed.tasks else None,  # type: ignore[arg-type]
        attempt=PodKey(0, 1, 0),
        key=grading_key({"metadata": {"labels": {LABEL_GRADING: "0-0"}}}),  # type: ignore[arg-type]
        transcript="answer: correct\n",
    )
    container = pod["spec"]["containers"][0]
    assert container["env"][:2] == [
        {"name": "JUDGE_KEY", "valueFrom": {"secretKeyRef": {"name": "judge", "key": "k"}}},
        {"name": "JUDGE_MODEL", "value": "m-1"},
    ]
    assert [e["name"] for e in container["env"][2:]][-1] == "PASSHAT_TRANSCRIPT"
    assert container["envFrom"] == [{"prefix": "J_", "configMapRef": {"name": "judge-settings"}}]
    assert TrialPolicy().problems({"spec": pod["spec"]}, namespace="ns") == []

    for bad, says in (
        ({"name": "PASSHAT_TRANSCRIPT", "value": "/etc/passwd"}, "PASSHAT_ variables"),
        ({"name": "K", "value": "v", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
         "give value or valueFrom, not both"),
        ({"name": "K", "valueFrom": {}}, "exactly one of secretKeyRef and configMapKeyRef"),
    ):  # fmt: skip
        body["grading"]["grader"]["env"] = [bad]
        with pytest.raises(ValueError, match=says):
            EvalSpec.model_validate(body)


def test_no_grader_pod_while_an_older_crd_prunes_the_checks_ledger() -> None:
    """A CRD older than the operator prunes status.graderCheck: without its ledger in
    status the check makes no grader pod (exactly once rests on it), posts one
    GraderCheckPruned event, and the eval stays non-terminal; once the field is kept,
    the check runs and ends."""
    harness = Harness(0, body=check_spec(), grader=honest)
    posted = harness.collect_events()
    original = harness.api.patch_eval_status

    def pruning(namespace: str, name: str, rv: str, status: Mapping[str, Any]) -> dict[str, Any]:
        return original(
            namespace, name, rv, {k: v for k, v in status.items() if k != "graderCheck"}
        )

    harness.api.patch_eval_status = pruning  # type: ignore[method-assign,assignment]
    for _ in range(300):
        harness.clock.now += 1.0
        harness.kubelet.step()
        assert harness.loop.run_pass().state is not PassState.DONE
    assert not [p for p in harness.api.pods.values() if LABEL_GRADING in p["metadata"]["labels"]]
    assert condition_status(harness.status, "Complete") == "False"
    assert [e.reason for e in posted].count("GraderCheckPruned") == 1
    harness.api.patch_eval_status = original  # type: ignore[method-assign]
    harness.run()
    assert harness.status["graderCheck"]["stable"] is True


def test_with_a_record_store_the_archived_transcripts_are_regraded(tmp_path: Path) -> None:
    """With a record store the check reads the transcripts the archiver wrote (the ones
    `passhat regrade NAME` reads), not the pods: with every pod log gone after the
    trials, the noisy grader still gets each transcript and finds task-0's noise."""
    harness = Harness(0, body=check_spec(), grader=noisy_on_task_0)
    store = FileStore(str(tmp_path / "store"))
    harness.loop = EvalLoop(
        harness.api,
        harness.ref,
        config=CONFIG,
        clock=harness.clock,
        archiver=Archiver(store, harness.api, clock=harness.clock),
    )

    def forget_logs() -> None:
        if "graderCheck" in harness.status:  # NB: every attempt is archived by then
            for name in [name for name in harness.api.logs if "-t" in name]:
                harness.api.logs.pop(name)

    harness.run(between=forget_logs)
    status = harness.status
    check = status["graderCheck"]
    task0 = [key for key in graded(status) if key[0] == 0]
    assert check["missingTranscripts"] == 0 and check["transcripts"] == len(graded(status))
    assert check["noisyTotal"] == len(task0) and check["stable"] is False
    # the honest verdicts on the other tasks read the archived transcripts: they agree
    ledger = SlotLedger.unpack(status["ledger"])
    failed0 = sum(1 for _, trial, _ in task0 if ledger.state(0, trial) is SlotState.FAIL)
    assert check["disagreeWithOriginal"] == pytest.approx(failed0 / check["judged"])


def test_a_lost_check_ledger_reads_the_kept_grader_pods_again() -> None:
    """status.graderCheck lost mid-check (a CRD without it was applied meanwhile and the
    API server pruned it): the check starts over with the same sample, and the gradings
    whose grader pods were already kept are read again from those pods (their create is
    a 409), so the result equals an uninterrupted run's and no grading is a grader error."""
    clean = Harness(0, body=check_spec(), grader=noisy_on_task_0)
    clean.run()
    harness = Harness(0, body=check_spec(), grader=noisy_on_task_0)
    for _ in range(3000):
        harness.clock.now += 1.0
        harness.kubelet.step()
        harness.loop.run_pass()
        check = harness.status.get("graderCheck") or {}
        if check.get("doneGradings", 0) >= check.get("gradings", 0) // 2 > 0:
            break
    assert harness.api.kept_pods(), "some grader pods are kept already"
    del harness.api.evals["demo"]["status"]["graderCheck"]
    harness.run()
    assert untimed(harness.status) == untimed(clean.status)
    assert harness.status["graderCheck"]["graderErrors"] == 0


def test_the_deadline_also_ends_a_running_check() -> None:
    """spec.activeDeadlineSeconds counts until the eval completes: past it while grader
    pods hang, the eval ends Failed (DeadlineExceeded), its grader pods are deleted, the
    gate is not passed, and what the check had is kept."""
    body = check_spec(timeoutSeconds=3600)
    body["activeDeadlineSeconds"] = 600
    harness = Harness(0, body=body, grader=hangs)
    harness.run()
    status = harness.status
    assert condition_status(status, "Failed") == "True"
    assert condition_status(status, "Complete") == "False"
    assert status["phase"] == "Failed" and status["gate"]["passed"] is False
    assert status["graderCheck"]["phase"] == "Running"
    assert harness.api.pods_with_finalizer() == []
    assert not [
        pod
        for pod in harness.api.pods.values()
        if LABEL_GRADING in pod["metadata"]["labels"]
        and not pod["metadata"].get("deletionTimestamp")
    ]


def test_status_grader_check_stays_small_at_its_bounds() -> None:
    """The largest check (200 transcripts x 10 gradings, every one noisy, 253-character
    task ids, 5 long error messages) is a status block of well under 32 KiB."""
    import json

    from passhat.api.spec import StabilityCheck, Task
    from passhat.operator.gradercheck import Entry, _block

    tasks = [Task(id=f"{index:04d}" + "x" * 249) for index in range(200)]
    ledger = SlotLedger(200, 1000)
    book = CheckLedger(10, [Entry(PodKey(t, 999, 100), list("pfpfpfpfpe")) for t in range(200)])
    block = _block(
        book,
        block={"gradedAttempts": 200_000, "infraAttemptsSkipped": 10**6, "startTime": "x"},
        messages=["m" * 200 + str(i) for i in range(5)],
        check=StabilityCheck(sample=200, times=10, max_noise_rate=0.0),
        tasks=tasks,
        ledger=ledger,
        done=True,
        now=0.0,
    )
    assert block["noisyTotal"] == 200 and len(block["noisy"]) == 20
    assert len(json.dumps(block)) < 32 * 1024


def test_a_finishing_pass_writes_status_even_when_nothing_else_changed() -> None:
    """An older CRD stored the eval pruned (no stabilityCheck, no graderCheck) while its
    status said CheckingGrader: the next operator's pass lets the grader pods go, and the
    pass after it, finishing, writes Complete=True; it never stops the daemon on a status
    that says the eval still runs."""
    harness = Harness(0, body=check_spec(), grader=hangs)
    for _ in range(3000):
        harness.clock.now += 1.0
        harness.kubelet.step()
        harness.loop.run_pass()
        if harness.api.pods_with_finalizer() and "graderCheck" in harness.status:
            break
    stored = harness.api.evals["demo"]
    del stored["spec"]["grading"]["stabilityCheck"]
    del stored["status"]["graderCheck"]
    harness.loop = harness.new_loop()
    assert condition_status(harness.status, "Complete") == "False"
    assert harness.loop.run_pass().state is PassState.CONTINUE
    assert harness.api.pods_with_finalizer() == []
    assert condition_status(harness.status, "Complete") == "False"
    assert harness.loop.run_pass().state is PassState.DONE
    assert condition_status(harness.status, "Complete") == "True"
