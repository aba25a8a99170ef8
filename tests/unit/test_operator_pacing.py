"""Pod creates paced like the Job controller's: slow start, backoff while refused, events."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from passhat import metrics
from passhat.api import conditions as cond
from passhat.api.spec import MAX_PARAMS_BYTES
from passhat.operator import events
from passhat.operator.config import OperatorConfig
from passhat.operator.kube import ApiError
from passhat.operator.loop import EvalLoop, PassState
from passhat.operator.pacing import CreatePacer, Refusal, create_paced, refusal_of, slow_start
from passhat.operator.pods import EvalRef
from tests.unit.operator_fake import FakeApi, FakeKubelet
from tests.unit.test_operator_loop import Clock, spec

QUOTA = 'pods "p" is forbidden: exceeded quota: q, requested: pods=1, used: pods=3, limited: pods=3'


def test_slow_start_batches_double_up_to_the_cap() -> None:
    """1, 2, 4, ... capped at batch_max, adding up to the total."""
    assert list(slow_start(100, batch_max=32)) == [1, 2, 4, 8, 16, 32, 32, 5]
    assert list(slow_start(3, batch_max=32)) == [1, 2]
    assert list(slow_start(0, batch_max=32)) == []
    assert list(slow_start(5, batch_max=1)) == [1] * 5


@pytest.mark.parametrize(
    ("status", "message", "reason"),
    [
        (403, QUOTA, cond.REASON_QUOTA_EXCEEDED),
        (403, 'pods "p" is forbidden: error looking up service account ns/sa', "Forbidden"),
        (429, "the server has received too many requests", cond.REASON_THROTTLED),
        (403, 'pods "p" is forbidden: violates PodSecurity "restricted:latest"', None),
        (500, "etcd timeout", None),
        (422, "invalid", None),
    ],
)
def test_which_create_errors_are_refusals_for_now(
    status: int, message: str, reason: str | None
) -> None:
    """Quota and other admission 403s and 429 pass later; PodSecurity and the rest never."""
    refusal = refusal_of(ApiError("create", status, message))
    assert (refusal.reason if refusal else None) == reason
    assert refusal_of(ApiError("patch", 429, "throttled")) is None


class Pods:
    """`EvalApi.settle` for creates only: accepts `room` pods, then refuses like a full
    quota (stopping its batch at the first refusal, as `Kube.settle` does)."""

    def __init__(self, room: int, *, status: int = 403, message: str = QUOTA) -> None:
        self.room = room
        self.status, self.message = status, message
        self.batches: list[int] = []
        self.posts = 0
        self.created: list[str] = []

    def settle(
        self,
        namespace: str,
        *,
        keep: Sequence[Mapping[str, Any]],
        release: Sequence[Mapping[str, Any]],
        create: Sequence[Mapping[str, Any]],
        before: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> list[str]:
        self.batches.append(len(create))
        for pod in create:
            self.posts += 1
            if len(self.created) >= self.room:
                raise ApiError("create", self.status, self.message)
            self.created.append(pod["name"])
        return []


def pacer(clock: Clock, **settings: Any) -> CreatePacer:
    return CreatePacer(config=OperatorConfig(**settings), clock=clock)


class SlowPods(Pods):
    """Pods whose creates take `per_pod_s` each on `clock` (a client or API server that
    is the bottleneck: a batch takes as long as its pods together)."""

    def __init__(self, clock: Clock, per_pod_s: float = 0.1) -> None:
        super().__init__(room=10_000)
        self.clock, self.per_pod_s = clock, per_pod_s

    def settle(self, namespace: str, **kwargs: Any) -> list[str]:
        self.clock.now += self.per_pod_s * len(kwargs["create"])
        return super().settle(namespace, **kwargs)


def test_a_pass_fits_its_batches_into_create_pass_max_s() -> None:
    """At 0.1 s a pod a pass sends 1, 2, 4, then only the 3 pods that fit the 0.3 s left
    of its 1 s (not 8), and stops there: 10 created of 500, and the pacer is not told that
    every create went through; the window is what slow start reached."""
    clock = Clock()
    api, paces = SlowPods(clock), pacer(clock)
    began = clock.now
    paced = create_paced(api, "ns", list(range(500)), lambda k: {"name": f"p{k}"}, paces)
    assert api.batches == [1, 2, 4, 3] and paced.created == 10
    assert clock.now - began == pytest.approx(1.0)
    assert paces.window == 8 and paces.per_pod_s == pytest.approx(0.1)


def test_the_first_batch_always_goes_and_the_pace_carries_over() -> None:
    """A pass's first batch goes whole even when it alone takes longer than the budget
    (the eval moves on however slow the API server is), and nothing after it fits; the
    next pass starts from the pace the last batch measured."""
    clock = Clock()
    api, paces = SlowPods(clock, per_pod_s=0.05), pacer(clock)
    paces.window = 32
    build = lambda k: {"name": f"p{k}"}  # noqa: E731
    create_paced(api, "ns", list(range(500)), build, paces)
    # NB: 32 pods take 1.6 s: the budget is spent
    assert api.batches == [32] and paces.per_pod_s == pytest.approx(0.05)
    api.batches.clear()
    api.per_pod_s = 0.01
    create_paced(api, "ns", list(range(500, 1000)), build, paces)
    # NB: 32 pods in 0.32 s, then 0.68 s left: 32, 32 (36 would fit), the 4 that fit 0.04 s
    assert api.batches == [32, 32, 32, 4]


def test_a_fast_pass_is_not_cut_short() -> None:
    """At 1 ms a pod the budget never binds: 500 pods in the slow-start batches."""
    clock = Clock()
    api, paces = SlowPods(clock, per_pod_s=0.001), pacer(clock)
    paced = create_paced(api, "ns", list(range(500)), lambda k: {"name": f"p{k}"}, paces)
    assert paced.created == 500 and api.batches[:6] == [1, 2, 4, 8, 16, 32]
    assert set(api.batches[6:-1]) == {32}


def test_the_next_pass_goes_on_where_slow_start_got_to() -> None:
    """Pass 1 ramps 1, 2, 4, ... to the cap; pass 2 (the next wave) starts at the cap, not
    at 1 again; after a refusal the pass after starts at 1 again."""
    clock = Clock()
    api, paces = Pods(room=150), pacer(clock)
    build = lambda k: {"name": f"p{k}"}  # noqa: E731
    create_paced(api, "ns", list(range(100)), build, paces)
    assert api.batches == [1, 2, 4, 8, 16, 32, 32, 5]
    api.batches.clear()
    create_paced(api, "ns", list(range(100, 140)), build, paces)
    assert api.batches == [32, 8]
    api.batches.clear()
    create_paced(api, "ns", list(range(140, 200)), build, paces)  # NB: room for 10 more
    assert api.batches == [32]
    assert paces.window == 1


def test_a_pass_stops_at_the_first_refused_batch() -> None:
    """Room for 5 pods out of 100 wanted: batches 1, 2, 4 (the last one refused), so 6
    POSTs instead of 100, and the eval backs off (counted in passhat_create_backoffs_total)."""
    clock = Clock()
    api = Pods(room=5)
    sample = ("passhat_create_backoffs_total", {"reason": "QuotaExceeded"})
    before = metrics.REGISTRY.get_sample_value(*sample) or 0
    paced = create_paced(api, "ns", list(range(100)), lambda k: {"name": f"p{k}"}, pacer(clock))
    assert metrics.REGISTRY.get_sample_value(*sample) == before + 1
    assert api.batches == [1, 2, 4]
    assert api.posts == 6 and paced.created == 3
    assert paced.refusal == Refusal(cond.REASON_QUOTA_EXCEEDED, f"create: HTTP 403: {QUOTA}")
    assert paced.report


def test_backoff_doubles_per_refused_pass_up_to_the_cap_and_resets_on_success() -> None:
    """Refused passes wait 1, 2, 4, ... s (capped); a pass that created pods before its
    refusal starts over at 1 s; one that created every pod clears the backoff."""
    clock = Clock()
    paced = pacer(clock, create_backoff_initial_s=1.0, create_backoff_max_s=8.0)
    refusal = Refusal(cond.REASON_QUOTA_EXCEEDED, QUOTA)
    delays = []
    for _ in range(6):
        assert paced.may_create(pods_ended=False)
        paced.refused(refusal, created_first=False)
        delays.append(paced.not_before - clock.now)
        assert not paced.may_create(pods_ended=False)
        clock.now = paced.not_before
    assert delays == [1, 2, 4, 8, 8, 8]
    paced.refused(refusal, created_first=True)
    assert paced.not_before - clock.now == 1
    clock.now += 1
    paced.created()
    assert paced.refusal is None and paced.delay_s() == 0 and paced.may_create(pods_ended=False)


def test_a_quota_backoff_starts_over_when_one_of_our_pods_ended() -> None:
    """A pod of the eval that ended frees quota: the pass that sees it may try at once
    (one pod first) and its backoff starts over at 1 s, however long it had grown (the
    kubelet may move the pod's phase, which frees the quota, a moment after the pass);
    throttling (429) waits for its backoff whatever ends."""
    clock = Clock()
    paced = pacer(clock)
    quota = Refusal(cond.REASON_QUOTA_EXCEEDED, QUOTA)
    for _ in range(5):
        paced.refused(quota, created_first=False)
    assert paced.not_before - clock.now == 16
    assert not paced.may_create(pods_ended=False)
    assert paced.may_create(pods_ended=True)
    paced.refused(quota, created_first=False)
    assert paced.not_before - clock.now == 1
    paced.refused(Refusal(cond.REASON_THROTTLED, "too many requests"), created_first=False)
    assert not paced.may_create(pods_ended=True)


def test_refusal_events_are_rate_limited_per_reason() -> None:
    """One event per reason per refusal_event_interval_s, however often the quota refuses."""
    clock = Clock()
    paced = pacer(clock, refusal_event_interval_s=600.0)
    quota = Refusal(cond.REASON_QUOTA_EXCEEDED, QUOTA)
    throttled = Refusal(cond.REASON_THROTTLED, "too many requests")
    reports = []
    for second in range(0, 1300, 10):
        clock.now = 1_700_000_000.0 + second
        reports.append(paced.refused(quota, created_first=second % 20 == 0))
    assert sum(reports) == 3  # NB: at 0 s, 600 s and 1,200 s
    assert paced.refused(throttled, created_first=False)
    event = paced.event()
    assert event is not None and event.reason == events.FAILED_CREATE
    paced.refused(quota, created_first=False)
    event = paced.event()
    assert event is not None and event.reason == events.QUOTA_EXCEEDED
    assert QUOTA in event.message


def test_the_condition_says_why_and_until_when_then_clears() -> None:
    """CreateRefused=True names the reason, the API server's message and the next try;
    False (Created) once creates work again; absent while never refused."""
    clock = Clock()
    paced = pacer(clock)
    assert paced.conditions([], generation=1, now=clock.now) == []
    paced.refused(Refusal(cond.REASON_QUOTA_EXCEEDED, QUOTA), created_first=False)
    (refused,) = paced.conditions([], generation=1, now=clock.now)
    assert (refused["type"], refused["status"], refused["reason"]) == (
        "CreateRefused",
        "True",
        "QuotaExceeded",
    )
    assert QUOTA in refused["message"]
    assert cond.timestamp(paced.not_before) in refused["message"]
    paced.created()
    (cleared,) = paced.conditions([refused], generation=1, now=clock.now)
    assert (cleared["status"], cleared["reason"]) == ("False", "Created")


class QuotaApi(FakeApi):
    """FakeApi whose namespace has a ResourceQuota of `pods` non-terminal pods; counts
    every pod POST (refused ones too), by second."""

    def __init__(self, *, pods: int, clock: Clock) -> None:
        super().__init__(rng=random.Random(5), clock=clock)
        self.quota = pods
        self.posts: list[float] = []

    def create_pods(self, namespace: str, pods: Sequence[Mapping[str, Any]]) -> None:
        for pod in pods:
            self.posts.append(self.clock())
            used = sum(
                1 for p in self.pods.values() if p["status"]["phase"] in ("Pending", "Running")
            )
            if used >= self.quota and pod["metadata"]["name"] not in self.pods:
                raise ApiError("create", 403, QUOTA)
            super().create_pods(namespace, [pod])


def test_a_5000_trial_eval_on_a_3_pod_quota_posts_little_and_still_runs() -> None:
    """5,000 trials at parallelism 5,000 against a quota of 3 pods, a pass every second
    for 10 minutes: at most a few dozen POSTs per 30 s (before: 5,000 per pass), the
    eval runs its trials at the quota's pace and says why it waits."""
    clock = Clock()
    api = QuotaApi(pods=3, clock=clock)
    body = spec(tasks=[{"id": f"t{i}"} for i in range(5)], trials=1000, ks=[1], parallelism=5000)
    stored = api.add_eval("ns", "big", body)
    ref = EvalRef("ns", "big", stored["metadata"]["uid"])
    kubelet = FakeKubelet(api, lambda *_: "pass", rng=random.Random(6))
    posted: list[events.Event] = []
    loop = EvalLoop(api, ref, clock=clock, post_event=lambda _, event: posted.append(event))
    start = clock.now
    for _ in range(600):
        clock.now += 1.0
        kubelet.step(share=0.2)
        loop.run_pass()
    windows = [0] * 20
    for when in api.posts:
        windows[min(19, int((when - start) // 30))] += 1
    done = api.evals["big"]["status"]["progress"]["done"]
    assert max(windows) <= 60, windows
    assert done >= 100, done  # NB: the quota's pace: 3 pods, ~5 s each
    refused = next(
        c for c in api.evals["big"]["status"]["conditions"] if c["type"] == "CreateRefused"
    )
    assert refused["reason"] == "QuotaExceeded"
    assert [event.reason for event in posted] == [events.STARTED, events.QUOTA_EXCEEDED]


class SlimApi(FakeApi):
    """FakeApi that keeps only the metadata and status of the pods it stores (so a test of
    the operator's memory does not measure the fake's copies)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(rng=random.Random(7), clock=clock)
        self.batches: list[int] = []

    def settle(self, namespace: str, *, create: Sequence[Mapping[str, Any]], **kw: Any) -> Any:
        self.batches.append(len(create))
        return super().settle(namespace, create=create, **kw)

    def create_pods(self, namespace: str, pods: Sequence[Mapping[str, Any]]) -> None:
        slim = [{**pod, "spec": {"containers": [{"name": "agent"}]}} for pod in pods]
        super().create_pods(namespace, slim)


def test_pod_bodies_are_built_one_batch_at_a_time() -> None:
    """One task with the largest params allowed (64 KiB) at parallelism 1,000: a pass
    sends batches of at most create_batch_max pods, at most create_per_pass_max in all,
    and its memory peak stays near one batch of bodies, not 500 of them (32 MiB)."""
    clock = Clock()
    api = SlimApi(clock)
    params = {"blob": "x" * (MAX_PARAMS_BYTES - 64)}
    body = spec(tasks=[{"id": "big", "params": params}], trials=1000, ks=[1], parallelism=1000)
    stored = api.add_eval("ns", "big", body)
    ref = EvalRef("ns", "big", stored["metadata"]["uid"])
    loop = EvalLoop(api, ref, clock=clock)
    tracemalloc.start()
    try:
        first = loop.run_pass()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert first.state is PassState.CONFLICT  # NB: 500 made; run again now for the rest
    assert first.created == 500 == len(api.pods)
    assert max(api.batches) == 32
    assert peak < 12 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB"
    second = loop.run_pass()
    assert second.created == 500 and len(api.pods) == 1000


class BackloggedApi(FakeApi):
    """FakeApi whose release pool has `backlog` of the eval's keeps and releases queued."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(rng=random.Random(8), clock=clock)
        self.backlog = 0

    def releasing(self, namespace: str, eval_uid: str) -> int:
        return self.backlog


def _backlogged(release_backlog_max: int) -> tuple[BackloggedApi, EvalLoop, Clock]:
    """A 500-trial eval at parallelism 20 on a BackloggedApi; creates bounded only by
    parallelism and the backlog (no slow start or create budget in the way)."""
    clock = Clock()
    api = BackloggedApi(clock)
    body = spec(tasks=[{"id": f"t{i}"} for i in range(50)], trials=10, ks=[1], parallelism=20)
    stored = api.add_eval("ns", "big", body)
    ref = EvalRef("ns", "big", stored["metadata"]["uid"])
    config = OperatorConfig(
        release_backlog_max=release_backlog_max, create_batch_max=100, create_pass_max_s=60
    )
    return api, EvalLoop(api, ref, clock=clock, config=config), clock


def test_creates_wait_while_the_release_backlog_is_full() -> None:
    """Beyond release_backlog_max finished pods waiting for their release, no pod is
    created; below it, only as many as the backlog has room for (a release is two writes
    to a create's one: on a saturated API server the backlog grew without bound)."""
    api, loop, clock = _backlogged(30)
    api.backlog = 30
    loop.run_pass()
    assert api.writes["create"] == 0
    api.backlog = 24
    clock.now += 1.0
    loop.run_pass()
    assert api.writes["create"] == 6
    api.backlog = 0
    for _ in range(5):
        clock.now += 1.0
        loop.run_pass()
    assert api.writes["create"] == 20  # NB: then parallelism bounds it again


def test_the_release_backlog_may_always_hold_a_whole_wave() -> None:
    """The backlog's bound is at least the eval's parallelism: a wave of pods that end
    together does not stop the next wave's creates until all of it is released (10,000
    trials at parallelism 1,000 took 319 s with a bound of 500, 207 s without one)."""
    api, loop, _ = _backlogged(5)
    api.backlog = 12
    loop.run_pass()
    assert api.writes["create"] == 8
