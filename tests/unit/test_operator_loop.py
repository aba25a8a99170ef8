"""The reconcile pass against an in-memory API server: exact accounting, also under kills."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from passhat.operator.config import OperatorConfig
from passhat.operator.loop import EvalLoop, PassState
from passhat.operator.ownership import PodSigner
from passhat.operator.pods import FINALIZER, LABEL_RECORDED, EvalRef, pod_key
from passhat.operator.status import condition_status
from passhat.trials.ledger import SlotLedger, SlotState
from tests.unit.operator_fake import (
    FakeApi,
    FakeKubelet,
    GraderScript,
    Killed,
    Script,
    terminated,
)

N_TASKS, TRIALS, RETRIES = 6, 5, 2
# NB: every pass that records writes (status_interval_s=0): these tests follow the
# ledger pass by pass; test_operator_retention.py runs the kill tests with it deferred.
CONFIG = OperatorConfig(deleted_pod_grace_s=30.0, image_error_grace_s=5.0, status_interval_s=0.0)


class Clock:
    """A manual clock (seconds)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def spec(**overrides: Any) -> dict[str, Any]:
    """A valid eval spec: N_TASKS tasks x TRIALS trials, no retry backoff."""
    body: dict[str, Any] = {
        "tasks": [{"id": f"task-{index}"} for index in range(N_TASKS)],
        "trials": TRIALS,
        "ks": [1, 3],
        "parallelism": 4,
        "trial": {
            "timeoutSeconds": 60,
            "template": {"spec": {"containers": [{"name": "agent", "image": "x"}]}},
        },
        "retry": {"infraErrors": RETRIES, "backoffSeconds": 0},
        "gate": {"metric": "meanPassRate", "k": 1, "min": 0.2},
    }
    body.update(overrides)
    return body


def script(task: int, trial: int, attempt: int) -> str:
    """A fixed outcome per attempt: mostly pass/fail by task, some infra errors and OOMs."""
    draw = random.Random(f"{task}/{trial}/{attempt}").random()
    if draw < 0.2:
        return "infra"
    if draw < 0.3:
        return "oom"
    return "pass" if draw < 0.3 + 0.7 * (task + 1) / (N_TASKS + 1) else "fail"


def expected_ledger(run: Script) -> SlotLedger:
    """The ledger the script implies, computed without the operator."""
    from passhat.trials.outcomes import Outcome, Verdict

    ledger = SlotLedger(N_TASKS, TRIALS)
    for task in range(N_TASKS):
        for trial in range(TRIALS):
            for attempt in range(RETRIES + 1):
                outcome = run(task, trial, attempt)
                if outcome in ("pass", "fail"):
                    verdict = Verdict(Outcome(outcome), "exit_code")
                    ledger.record(task, trial, attempt, verdict, final=True)
                    break
                verdict = Verdict(Outcome.INFRA_ERROR, "x")
                ledger.record(task, trial, attempt, verdict, final=attempt == RETRIES)
    return ledger


class Harness:
    """One eval, a fake API server, a fake kubelet and an operator that can be killed."""

    def __init__(
        self,
        seed: int,
        *,
        body: dict[str, Any] | None = None,
        grader: GraderScript | None = None,
        config: OperatorConfig = CONFIG,
        watch: bool = False,
    ) -> None:
        self.rng = random.Random(seed)
        # With `watch`: the loop gets the eval's resourceVersion as a watch of evals would
        # show it, caught up at the start of each step (so not with a `between` write).
        self.watch = watch
        self.watched_rv = ""
        self.config = config
        self.clock = Clock()
        self.api = FakeApi(rng=random.Random(seed + 1), clock=self.clock)
        stored = self.api.add_eval("ns", "demo", body or spec())
        meta = stored["metadata"]
        self.ref = EvalRef("ns", "demo", meta["uid"])
        self.kubelet = FakeKubelet(self.api, script, rng=random.Random(seed + 2), grader=grader)
        self.loop = self.new_loop()
        self.kills = 0
        self.recorded: list[tuple[int, int, int]] = []

    def new_loop(self) -> EvalLoop:
        """A fresh operator process: no memory of earlier passes."""

        def on_recorded(ref: EvalRef, item: Any) -> None:
            self.recorded.append((item.key.task, item.key.trial, item.key.attempt))

        return EvalLoop(
            self.api,
            self.ref,
            config=self.config,
            clock=self.clock,
            on_recorded=on_recorded,
            watched_version=(lambda: self.watched_rv) if self.watch else None,
        )

    def collect_events(self, *, started: bool = False) -> list[Any]:
        """Replace the operator by one whose posted events land in the returned list (the
        Started event too only when `started`: test_operator_events_story pins it)."""
        posted: list[Any] = []

        def post(body: Any, event: Any) -> None:
            if started or event.reason != "Started":
                posted.append(event)

        self.loop = EvalLoop(
            self.api, self.ref, config=self.loop.config, clock=self.clock, post_event=post
        )
        return posted

    def finish(self, name: str, code: int) -> None:
        """End pod `name` with exit `code`, as a kubelet would."""
        now = self.clock.now
        status = self.api.pods[name]["status"]
        status["phase"] = "Succeeded" if code == 0 else "Failed"
        status["containerStatuses"] = [terminated(code, reason="Completed", now=now, start=now - 1)]

    def run(
        self,
        *,
        kill_chance: float = 0.0,
        steps: int = 3000,
        between: Callable[[], None] | None = None,
    ) -> None:
        """Alternate kubelet steps and passes until the loop is done."""
        for _ in range(steps):
            self.clock.now += 1.0
            self.watched_rv = self.api.evals["demo"]["metadata"]["resourceVersion"]
            self.kubelet.step()
            if between is not None:
                between()
            if self.rng.random() < kill_chance:
                self.api.kill_at = self.api.calls + self.rng.randint(1, 12)
            try:
                result = self.loop.run_pass()
            except Killed:
                self.kills += 1
                self.api.kill_at = None
                self.loop = self.new_loop()
                continue
            if result.state is PassState.DONE:
                self.api.kill_at = None  # NB: a kill armed for a later call never comes
                return
        raise AssertionError("the eval did not finish")

    @property
    def status(self) -> dict[str, Any]:
        """The eval's stored status."""
        return dict(self.api.evals["demo"].get("status") or {})


def assert_kept_one_pod_per_attempt(harness: Harness) -> None:
    """What is left is one finished pod per recorded attempt: released, labelled recorded."""
    ledger = SlotLedger.unpack(harness.status["ledger"])
    kept = sorted(
        (key.task, key.trial, key.attempt)
        for pod in harness.api.pods.values()
        if (key := pod_key(pod)) is not None
    )
    assert kept == sorted(
        (task, trial, attempt)
        for task in range(N_TASKS)
        for trial in range(TRIALS)
        for attempt in range(ledger.attempts(task, trial))
    )
    for pod in harness.api.pods.values():
        assert pod["metadata"]["labels"][LABEL_RECORDED] == "true"
        assert FINALIZER not in pod["metadata"].get("finalizers", [])
        assert pod["status"]["phase"] in ("Succeeded", "Failed")
    assert harness.api.list_pods("ns", harness.ref.uid) == []


def comparable(status: dict[str, Any]) -> dict[str, Any]:
    """Status without timestamps (which differ between runs)."""
    drop = {"startTime", "completionTime"}
    result = {key: value for key, value in status.items() if key not in drop}
    result["conditions"] = sorted(
        (c["type"], c["status"], c["reason"]) for c in status.get("conditions", [])
    )
    return result


def test_uninterrupted_run_matches_the_script() -> None:
    """Every slot ends as the script says, counted once, no pod left behind."""
    harness = Harness(0)
    harness.run()
    status = harness.status
    ledger = SlotLedger.unpack(status["ledger"])
    assert ledger == expected_ledger(script)
    assert status["phase"] == "Succeeded"
    assert condition_status(status, "Complete") == "True"
    assert status["progress"] == {
        "done": N_TASKS * TRIALS,
        "running": 0,
        "waiting": 0,
        "pending": 0,
        "retries": ledger.retries,
    }
    assert_kept_one_pod_per_attempt(harness)
    # one write per attempt to let its pod go (finalizer out + label in), no deletes
    assert harness.api.writes["keep"] == len(harness.recorded)
    assert harness.api.writes["release"] == harness.api.writes["delete"] == 0
    assert len(harness.recorded) == len(set(harness.recorded))
    assert len(harness.recorded) == sum(t.attempts for t in ledger.tallies([""] * N_TASKS))


def test_parallelism_is_never_exceeded_and_one_attempt_per_slot() -> None:
    """At any time at most `parallelism` live pods, and never two of one slot."""
    harness = Harness(1)

    def check() -> None:
        live = [
            pod
            for pod in harness.api.pods.values()
            if pod["status"]["phase"] in ("Pending", "Running")
        ]
        assert len(live) <= 4
        slots = [
            (
                p["metadata"]["labels"]["passhat.dev/task"],
                p["metadata"]["labels"]["passhat.dev/trial"],
            )
            for p in live
        ]
        assert len(slots) == len(set(slots))

    harness.run(between=check)


@pytest.mark.parametrize("seed", [12, 13, 14, 15, 16, 17])
def test_killed_at_random_api_calls_gives_the_uninterrupted_result(seed: int) -> None:
    """Kill the operator at random API calls (before or after they apply): same status.
    Every other seed with the watch of evals (passes read the eval they last wrote)."""
    reference = Harness(0)
    reference.run()
    harness = Harness(seed, watch=seed % 2 == 1)
    harness.run(kill_chance=0.35)
    assert harness.kills >= 5
    assert comparable(harness.status) == comparable(reference.status)
    assert harness.api.pods_with_finalizer() == []
    assert_kept_one_pod_per_attempt(harness)
    # each attempt was created exactly once: a re-create after a kill was a no-op
    assert len(harness.api.created_names) == len(set(harness.api.created_names))
    ledger = SlotLedger.unpack(harness.status["ledger"])
    assert len(harness.api.created_names) == sum(
        ledger.attempts(task, trial) for task in range(N_TASKS) for trial in range(TRIALS)
    )


def test_a_pass_reads_the_eval_not_older_than_what_the_loop_last_saw() -> None:
    """The first pass reads the eval from etcd; every later one from the watch cache, not
    older than the resourceVersion the loop last read or wrote (its own status write)."""
    harness = Harness(0)
    harness.run()
    reads = harness.api.eval_reads
    assert reads[0] == ""
    assert len(reads) > 10 and all(reads[1:])
    assert [int(rv) for rv in reads[1:]] == sorted(int(rv) for rv in reads[1:])


def test_a_pass_reads_the_eval_it_wrote_while_the_watch_shows_that_version() -> None:
    """With the watch of evals showing the version the loop last wrote, a pass reads no
    eval from the API server; a write it has not seen (another writer) costs a 409 and a
    GET; the result is the same."""
    reference = Harness(0)
    reference.run()
    harness = Harness(0, watch=True)
    passes = 0

    def count() -> None:
        nonlocal passes
        passes += 1

    harness.run(between=count)
    assert comparable(harness.status) == comparable(reference.status)
    # NB: each pass here writes status, and a write's answer is the eval at its version
    assert len(harness.api.eval_reads) < passes / 4, (len(harness.api.eval_reads), passes)
    bumped = Harness(0, watch=True)
    bumped.run(between=lambda: bumped.api.bump_eval("demo"), steps=6000)
    assert comparable(bumped.status) == comparable(reference.status)
    assert_kept_one_pod_per_attempt(bumped)


def test_a_stalled_watch_of_evals_delays_an_edit_by_at_most_eval_reread_s() -> None:
    """The watch of evals stuck at the version the loop holds (kopf's stream stalled) while
    someone else changes the eval: passes that write nothing go on with the version they
    hold for at most `eval_reread_s` (3 s), then GET it."""
    harness = Harness(0, watch=True)
    harness.loop.run_pass()
    harness.watched_rv = harness.api.evals["demo"]["metadata"]["resourceVersion"]
    harness.api.bump_eval("demo")
    edited = harness.api.evals["demo"]["metadata"]["resourceVersion"]
    seen = []
    for _ in range(4):
        harness.clock.now += 1.0
        harness.loop.run_pass()
        seen.append(harness.loop._read_rv == edited)
    assert seen == [False, False, True, True]


@pytest.mark.parametrize("seed", [21, 22, 23, 24])
def test_a_lagging_watch_cache_gives_the_uninterrupted_result(seed: int) -> None:
    """Every cached read returns the eval as it was at the version asked for (a cache that
    saw nothing since), another writer bumps the eval, and the operator is killed at random
    calls: the same status, each attempt created once."""
    reference = Harness(0)
    reference.run()
    harness = Harness(seed)
    harness.api.lagging_cache = True
    bumps = random.Random(seed)

    def bump() -> None:
        if bumps.random() < 0.5:
            harness.api.bump_eval("demo")

    harness.run(kill_chance=0.2, between=bump, steps=8000)
    assert comparable(harness.status) == comparable(reference.status)
    assert harness.api.pods_with_finalizer() == []
    assert_kept_one_pod_per_attempt(harness)
    assert len(harness.api.created_names) == len(set(harness.api.created_names))
    # the cache lagged for real: reads not older than X returned X though newer existed
    assert harness.api.lagged_reads >= 5


def test_stale_status_write_is_dropped_and_redone() -> None:
    """A 409 on the status write releases nothing; the next pass records the same pods."""
    harness = Harness(3)
    harness.run(between=lambda: harness.api.bump_eval("demo"), steps=6000)
    assert SlotLedger.unpack(harness.status["ledger"]) == expected_ledger(script)


def test_pod_deleted_by_someone_else_is_an_infra_error_and_retried() -> None:
    """A running pod deleted behind our back ends as infra_error/deleted, then runs again."""
    harness = Harness(4, body=spec(tasks=[{"id": "only"}], trials=1, ks=[1], parallelism=1))
    harness.loop.run_pass()
    harness.kubelet.step(share=0.0)  # the pod starts running
    (name,) = harness.api.pods
    harness.api.delete_pod(name)
    assert harness.api.pods[name]["metadata"]["finalizers"] == [FINALIZER]
    harness.kubelet.step(share=1.0)  # the kubelet kills it: 137 with a deletionTimestamp
    harness.loop.run_pass()
    ledger = SlotLedger.unpack(harness.status["ledger"])
    assert ledger.attempts(0, 0) == 1 and not ledger.is_final(0, 0)
    assert name not in harness.api.pods
    assert any(pod.endswith("-a1") for pod in harness.api.pods)


def test_pod_on_a_lost_node_counts_after_the_grace_period() -> None:
    """A deleted pod that never reports an end counts as deleted only after the grace."""
    harness = Harness(5, body=spec(tasks=[{"id": "only"}], trials=1, ks=[1], parallelism=1))
    harness.loop.run_pass()
    (name,) = harness.api.pods
    harness.api.delete_pod(name)  # no kubelet answers
    harness.clock.now += 10
    harness.loop.run_pass()
    assert name in harness.api.pods
    assert SlotLedger.unpack(harness.status["ledger"]).attempts(0, 0) == 0
    harness.clock.now += 30
    harness.loop.run_pass()
    ledger = SlotLedger.unpack(harness.status["ledger"])
    assert ledger.attempts(0, 0) == 1 and ledger.state(0, 0) is SlotState.PENDING
    assert name not in harness.api.pods


def test_missing_pod_is_created_again_never_counted() -> None:
    """A slot whose current attempt has no pod gets the same pod again; nothing is recorded."""
    harness = Harness(6, body=spec(tasks=[{"id": "only"}], trials=1, ks=[1], parallelism=1))
    harness.api.kill_at = 4  # get, list, status, then die right before the create applies
    harness.api.rng = random.Random(1)  # NB: first draw < 0.5: killed before the call
    with pytest.raises(Killed):
        harness.loop.run_pass()
    assert harness.api.pods == {}
    harness.loop = harness.new_loop()
    harness.loop.run_pass()
    (name,) = harness.api.pods
    assert name.endswith("-t0-0-a0")
    assert SlotLedger.unpack(harness.status["ledger"]).attempts(0, 0) == 0


def test_unsafe_template_is_a_config_error_without_pods() -> None:
    """A privileged template is refused with a ConfigError naming the field."""
    template = {
        "spec": {
            "containers": [{"name": "agent", "image": "x", "securityContext": {"privileged": True}}]
        }
    }
    harness = Harness(7, body=spec(trial={"timeoutSeconds": 60, "template": template}))
    result = harness.loop.run_pass()
    assert result.state is PassState.DONE
    assert harness.api.pods == {}
    status = harness.status
    assert status["phase"] == "Failed"
    assert condition_status(status, "ConfigError") == "True"
    assert "spec.trial.template.spec.containers[0].securityContext.privileged" in status["message"]


def test_invalid_spec_is_a_config_error_naming_the_field() -> None:
    """A spec that got past the CRD schema but fails the model names the field."""
    harness = Harness(8, body=spec(ks=[1, 9]))
    assert harness.loop.run_pass().state is PassState.DONE
    assert harness.status["message"].startswith("spec.ks[1]:")
    assert harness.api.pods == {}


def test_missing_config_map_waits_then_runs() -> None:
    """Tasks from a missing ConfigMap: ConfigError while Pending, then the eval runs."""
    body = spec(tasksFrom=[{"configMap": "suite"}], trials=1, ks=[1], parallelism=2)
    body.pop("tasks")
    harness = Harness(9, body=body)
    assert harness.loop.run_pass().state is PassState.CONTINUE
    assert harness.status["phase"] == "Pending"
    assert condition_status(harness.status, "ConfigError") == "True"
    assert 'ConfigMap "suite" not found' in harness.status["message"]
    harness.api.config_maps["suite"] = {"data": {"tasks.yaml": "- id: a\n- id: b\n"}}
    harness.loop.run_pass()
    assert len(harness.api.pods) == 2
    assert condition_status(harness.status, "ConfigError") == "False"
    assert "message" not in harness.status


def test_image_errors_on_every_first_attempt_stop_the_eval() -> None:
    """When no attempt can start its image, the eval fails with ConfigError."""
    harness = Harness(10)
    harness.loop.run_pass()
    for pod in harness.api.pods.values():
        pod["metadata"]["creationTimestamp"] = "2023-11-14T22:13:20Z"
        pod["status"] = {
            "phase": "Pending",
            "containerStatuses": [
                {
                    "name": "agent",
                    "image": "x",
                    "state": {"waiting": {"reason": "ErrImageNeverPull", "message": "no x"}},
                }
            ],
        }
    harness.clock.now += 120
    result = harness.loop.run_pass()
    assert result.state is PassState.DONE
    status = harness.status
    assert status["phase"] == "Failed"
    assert condition_status(status, "ConfigError") == "True"
    assert "every trial attempt so far (4) failed to start" in status["message"]
    assert harness.api.pods == {}


def test_a_running_pod_is_classified_again_only_once_it_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pass skips classifying a running pod it saw unchanged (uid and resourceVersion)
    in the last pass; a pod waiting on an image error is classified on every pass (its
    grace period runs on the clock, not on the pod), and so turns into an infra error
    without ever changing."""
    import passhat.operator.loop as loop_module
    from passhat.trials.classify_pod import pod_facts as real

    classified: list[str] = []

    def counting(pod: Any, **kwargs: Any) -> Any:
        classified.append(pod["metadata"]["name"])
        return real(pod, **kwargs)

    monkeypatch.setattr(loop_module, "pod_facts", counting)
    harness = Harness(12, body=spec(tasks=[{"id": "a"}, {"id": "b"}], trials=1, ks=[1]))
    harness.loop.run_pass()
    running, stuck = sorted(harness.api.pods)
    for name in (running, stuck):
        harness.api.pods[name]["status"] = {"phase": "Running", "startTime": "2023-11-14T22:13:20Z"}
    harness.api.pods[stuck]["status"]["containerStatuses"] = [
        {"name": "agent", "state": {"waiting": {"reason": "ErrImagePull", "message": "no x"}}}
    ]
    for _ in range(3):
        harness.loop.run_pass()
    assert classified.count(running) == 1
    assert classified.count(stuck) == 3
    assert harness.api.pods[stuck]["status"]["phase"] == "Running"  # NB: unchanged throughout

    harness.clock.now += 10  # NB: past image_error_grace_s (5 s) since the pod started
    harness.loop.run_pass()
    ledger = SlotLedger.unpack(harness.status["ledger"])
    assert ledger.attempts(1, 0) == 1  # NB: the image error, recorded without a change
    assert ledger.attempts(0, 0) == 0
    harness.finish(running, 0)  # NB: changes the pod, hence its resourceVersion
    harness.loop.run_pass()
    assert classified.count(running) == 2
    assert SlotLedger.unpack(harness.status["ledger"]).state(0, 0) is SlotState.PASS


def test_a_skipped_pod_has_no_verdict_at_any_time_or_spec() -> None:
    """What makes skipping unchanged running pods safe (`EvalLoop._unended`): a pod the
    classifier finds still running, not being deleted and with no container waiting on an
    image or config error gets no verdict however late it is and whatever the spec's
    grading, timeout_is or the grace periods; a future rule that runs on the clock or the
    spec for such a pod must also be excluded from the skip."""
    import json
    from pathlib import Path

    from passhat.api.spec import ExitCodes, Grading
    from passhat.trials.classify_pod import POD_RULES, classify_facts, pod_facts

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "pods"
    pods = [json.loads(path.read_text()) for path in sorted(fixtures.glob("*.json"))]
    running = json.loads((fixtures / "running.json").read_text())
    restarted = copy.deepcopy(running)
    restarted["status"]["containerStatuses"][0]["lastState"] = {
        "terminated": {"exitCode": 1, "reason": "Error"}
    }
    disrupted = copy.deepcopy(running)
    disrupted["status"]["conditions"].append(
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    )
    pending = copy.deepcopy(running)
    pending["status"] = {"phase": "Pending"}
    pods += [restarted, disrupted, pending]
    gradings = [Grading(), Grading(exit_codes=ExitCodes(**{"pass": [1], "fail": [0, 2]}))]
    now = 1_700_000_000.0
    skipped = 0
    for pod in pods:
        facts = pod_facts(pod, grading=Grading(), timeout_is="infra_error", now=now)
        if classify_facts(facts, POD_RULES) is not None or facts.deleting or facts.waiting:
            continue
        skipped += 1
        for later in (now, now + 86_400.0, now + 1e9):
            for grading in gradings:
                for timeout_is in ("infra_error", "fail"):
                    for grace in (0.0, 60.0, 1e9):
                        again = pod_facts(
                            pod,
                            grading=grading,
                            timeout_is=timeout_is,
                            now=later,
                            image_error_grace_s=grace,
                        )
                        assert classify_facts(again, POD_RULES) is None
    assert skipped == 5, skipped  # NB: running.json, kueue_gated.json and the three above


def test_status_patch_deletes_keys_at_any_depth() -> None:
    """The merge patch nulls keys the new status lacks, also inside nested objects."""
    from passhat.operator.loop import _status_patch

    old = {"phase": "Pending", "message": "m", "summary": {"k": 3, "byK": []}}
    new = {"phase": "Running", "summary": {"byK": [1]}}
    assert _status_patch(new, old) == {
        "message": None,
        "phase": "Running",
        "summary": {"k": None, "byK": [1]},
    }
    assert _status_patch(old, dict(old)) is None


def test_pod_refused_by_the_api_server_is_a_config_error() -> None:
    """A trial pod the API server refuses as invalid stops the eval with a ConfigError."""
    from passhat.operator.kube import ApiError

    harness = Harness(17)

    def refuse(namespace: str, *, keep: Any, release: Any, create: Any, **_: Any) -> list[str]:
        raise ApiError("create", 422, 'Pod "x" is invalid: spec.containers[0].image: Required')

    harness.api.settle = refuse  # type: ignore[method-assign]
    assert harness.loop.run_pass().state is PassState.CONFLICT  # NB: the next pass, now
    assert harness.loop.run_pass().state is PassState.DONE
    status = harness.status
    assert status["phase"] == "Failed"
    assert condition_status(status, "ConfigError") == "True"
    assert "refused the trial pod" in status["message"]
    assert "spec.containers[0].image" in status["message"]


def one_trial_harness(seed: int) -> Harness:
    """An eval of one task x one trial at parallelism 1."""
    return Harness(seed, body=spec(tasks=[{"id": "only"}], trials=1, ks=[1], parallelism=1))


def test_recorded_but_unreleased_pod_is_only_released() -> None:
    """Died between the status write and the release: the next pass lists the pod again
    (no label yet), records nothing twice and keeps it with ONE patch."""
    harness = one_trial_harness(18)
    harness.loop.run_pass()
    harness.kubelet.step(share=0.0)
    harness.kubelet.step(share=1.0)  # the attempt ends

    def die(namespace: str, **_: Any) -> list[str]:
        raise Killed("before the release")

    harness.api.settle = die  # type: ignore[method-assign]
    with pytest.raises(Killed):
        harness.loop.run_pass()
    assert len(harness.recorded) == 1
    (name,) = harness.api.pods
    assert [pod["metadata"]["name"] for pod in harness.api.list_pods("ns", harness.ref.uid)] == [
        name
    ]
    del harness.api.settle  # NB: back to FakeApi.settle
    harness.loop = harness.new_loop()
    # NB: the pass that keeps the pod, then the one that writes Complete (none is left)
    assert harness.loop.run_pass().state is PassState.CONTINUE
    assert condition_status(harness.status, "Complete") == "False"
    assert harness.loop.run_pass().state is PassState.DONE
    assert condition_status(harness.status, "Complete") == "True"
    assert len(harness.recorded) == 1
    assert harness.api.writes["keep"] == 1 and harness.api.writes["delete"] == 0
    assert harness.api.kept_pods() == [name]
    assert harness.api.pods[name]["metadata"]["finalizers"] == []


def test_recorded_pod_that_still_runs_is_deleted_not_kept() -> None:
    """A trial container that ended beside a running sidecar: recorded, then deleted."""
    harness = one_trial_harness(19)
    harness.loop.run_pass()
    (name,) = harness.api.pods
    pod = harness.api.pods[name]
    now = harness.clock.now
    ended = terminated(0, reason="Completed", now=now, start=now)
    sidecar = {"name": "proxy", "state": {"running": {}}}
    pod["status"] = {"phase": "Running", "containerStatuses": [ended, sidecar]}
    assert harness.loop.run_pass().state is PassState.CONTINUE
    assert harness.loop.run_pass().state is PassState.DONE
    assert SlotLedger.unpack(harness.status["ledger"]).is_final(0, 0)
    assert harness.api.pods == {}
    assert harness.api.writes["keep"] == 0
    assert harness.api.writes["release"] == harness.api.writes["delete"] == 1


def defer_lets_go(api: FakeApi) -> Callable[[], None]:
    """Make `api` let pods go later, as the real `Kube`'s release pool does: keeps and
    releases wait until the returned flush runs; meanwhile `list_pods` leaves their
    pods out and `releasing` counts them."""
    later: list[tuple[str, str, Mapping[str, Any]]] = []
    settle, list_pods = api.settle, api.list_pods

    def settle_later(namespace: str, **kw: Any) -> list[str]:
        later.extend((namespace, "keep", pod) for pod in kw.pop("keep"))
        later.extend((namespace, "release", pod) for pod in kw.pop("release"))
        return settle(namespace, keep=[], release=[], **kw)

    def list_without_in_flight(namespace: str, eval_uid: str) -> list[dict[str, Any]]:
        going = {pod["metadata"]["name"] for _, _, pod in later}
        return [p for p in list_pods(namespace, eval_uid) if p["metadata"]["name"] not in going]

    def flush() -> None:
        for namespace, kind, pod in later:
            (api.keep_pods if kind == "keep" else api.release_pods)(namespace, [pod])
        later.clear()

    api.settle = settle_later  # type: ignore[method-assign]
    api.list_pods = list_without_in_flight  # type: ignore[method-assign]
    api.releasing = lambda namespace, eval_uid: len(later)  # type: ignore[method-assign]
    return flush


def test_an_eval_is_complete_only_once_every_pod_is_let_go() -> None:
    """As a Job is Complete only once no pod holds its tracking finalizer: the pass that
    records the last outcomes writes Complete=False (its keeps are still to go out), a
    pass while they are in flight writes nothing and goes on, and the first pass after
    they landed writes Complete=True with every pod kept and labelled recorded."""
    harness = Harness(0, body=spec(tasks=[{"id": "a"}, {"id": "b"}], trials=2, ks=[1]))
    flush = defer_lets_go(harness.api)
    harness.loop.run_pass()
    for name in list(harness.api.pods):
        harness.finish(name, 0)
    harness.clock.now += 1
    assert harness.loop.run_pass().state is PassState.CONTINUE
    complete = next(c for c in harness.status["conditions"] if c["type"] == "Complete")
    assert complete["status"] == "False"
    assert complete["message"] == "4/4 trial slots final; 4 pods wait to be kept or released"
    assert harness.api.pods_with_finalizer() != []
    writes = harness.api.writes["status"]
    assert harness.loop.run_pass().state is PassState.CONTINUE  # NB: still in flight
    assert harness.api.writes["status"] == writes
    flush()
    assert harness.loop.run_pass().state is PassState.DONE
    assert condition_status(harness.status, "Complete") == "True"
    assert harness.status["phase"] == "Succeeded"
    assert harness.api.pods_with_finalizer() == []
    assert len(harness.api.kept_pods()) == 4


def test_leftover_of_a_finished_eval_is_kept() -> None:
    """A finished eval's pod still holding our finalizer (released by no one yet) is
    released and kept by the next operator; a running stray of ours is deleted, a
    look-alike the operator did not create is left alone."""
    harness = Harness(20)
    harness.run()
    kept = harness.api.kept_pods()
    leftover = harness.api.pods[kept[0]]["metadata"]
    leftover["labels"].pop(LABEL_RECORDED)
    leftover["finalizers"] = [FINALIZER]
    stray = copy.deepcopy(harness.api.pods[kept[1]])
    stray["metadata"].update(name="stray", uid="stray-uid", finalizers=[FINALIZER])
    stray["metadata"]["labels"].pop(LABEL_RECORDED)
    stray["metadata"]["labels"]["passhat.dev/attempt"] = "9"  # never recorded
    stray["status"] = {"phase": "Running"}
    look_alike = copy.deepcopy(stray)
    look_alike["metadata"].update(name="look-alike", uid="look-alike-uid")
    harness.api.pods["look-alike"] = look_alike  # NB: its mark is the stray's
    harness.api.pods["stray"] = PodSigner(OperatorConfig().pod_key).sign(stray)
    harness.loop = harness.new_loop()
    assert harness.loop.run_pass().state is PassState.DONE
    assert sorted(harness.api.kept_pods()) == sorted(kept)
    assert harness.api.pods_with_finalizer() == ["look-alike"]
    assert "stray" not in harness.api.pods
    assert harness.api.pods["look-alike"] == look_alike
    assert harness.api.foreign_touches == []


def test_recorded_pod_whose_phase_lags_is_kept() -> None:
    """Every container ended but the phase still says Running (a real kubelet moves it a
    moment later): the pod is kept, not deleted."""
    harness = one_trial_harness(21)
    harness.loop.run_pass()
    (name,) = harness.api.pods
    now = harness.clock.now
    ended = terminated(0, reason="Completed", now=now, start=now)
    harness.api.pods[name]["status"] = {"phase": "Running", "containerStatuses": [ended]}
    assert harness.loop.run_pass().state is PassState.CONTINUE
    assert harness.loop.run_pass().state is PassState.DONE
    assert harness.api.kept_pods() == [name]
    assert harness.api.writes["delete"] == 0
