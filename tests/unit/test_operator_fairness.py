"""Evals share the operator's write pools fairly: a big or quota-stuck eval never holds up
a small one (round robin over evals, a per-eval cap, paced creates)."""

from __future__ import annotations

import threading
import time

import pytest

from passhat.operator.config import OperatorConfig
from passhat.operator.fairpool import FairPool
from passhat.operator.loop import EvalLoop
from passhat.operator.pods import EvalRef
from passhat.operator.status import condition_status
from tests.unit.apiserver_fake import FakeServer, FakeServerKube
from tests.unit.test_operator_loop import spec


def test_a_backlog_of_one_key_does_not_delay_another() -> None:
    """Key A queues 200 slow tasks, then key B 2: B's run as soon as a worker is free,
    while almost all of A's still wait (a FIFO pool would run B's last)."""
    pool = FairPool(4, per_key=3, name="test")
    try:
        a = [pool.submit("a", lambda: time.sleep(0.005)) for _ in range(200)]
        b = [pool.submit("b", lambda: pool.queued("a")) for _ in range(2)]
        assert min(future.result(30) for future in b) > 150
        for future in a:
            future.result(30)
    finally:
        pool.close()


def test_one_key_never_takes_every_worker() -> None:
    """A key whose tasks hang holds at most `per_key` workers; another key still runs."""
    pool = FairPool(4, per_key=3, name="test")
    gate = threading.Event()
    try:
        stuck = [pool.submit("a", lambda: gate.wait(30)) for _ in range(10)]
        assert pool.submit("b", lambda: "ran").result(10) == "ran"
        gate.set()
        assert all(future.result(30) for future in stuck)
    finally:
        pool.close()


def test_results_errors_and_close() -> None:
    """Futures carry results and errors; close() cancels what waits, later submits raise."""
    pool = FairPool(1, per_key=1, name="test")
    gate = threading.Event()

    def fail() -> None:
        raise ValueError("boom")

    assert pool.submit("a", lambda: 7).result(10) == 7
    with pytest.raises(ValueError, match="boom"):
        pool.submit("a", fail).result(10)
    started = threading.Event()

    def block() -> bool:
        started.set()
        return gate.wait(30)

    running = pool.submit("a", block)
    assert started.wait(10)
    waiting = pool.submit("b", lambda: 1)
    pool.close()
    gate.set()
    assert running.result(10) is True and waiting.cancelled()
    with pytest.raises(RuntimeError):
        pool.submit("a", lambda: 1)


def run_passes(loop: EvalLoop, stop: threading.Event) -> None:
    """An eval's daemon, fast: passes back to back, 50 ms apart."""
    while not stop.is_set():
        loop.run_pass()
        stop.wait(0.05)


def test_a_quota_stuck_eval_does_not_delay_a_small_one_nor_flood_the_api() -> None:
    """A 5,000-trial eval whose namespace has a quota of 3 pods and a 40-trial eval in
    another namespace share one operator (the real `Kube`, 2 ms per request): the small
    one completes promptly, and the big one POSTs a few pods a second, not every missing
    pod every pass (before: ~5,000 refused POSTs per pass, queued ahead of the small
    eval's creates)."""
    server = FakeServer(latency_s=0.002, quota={"full": 3})
    kube = FakeServerKube(server, OperatorConfig())
    big = server.add_eval(
        "full",
        "big",
        spec(tasks=[{"id": f"b{i}"} for i in range(5)], trials=1000, ks=[1], parallelism=5000),
    )
    small = server.add_eval(
        "small",
        "small",
        spec(tasks=[{"id": f"s{i}"} for i in range(4)], trials=10, ks=[1], parallelism=20),
    )
    loops = [
        EvalLoop(kube, EvalRef(ns, body["metadata"]["name"], body["metadata"]["uid"]))
        for ns, body in (("full", big), ("small", small))
    ]
    stop = threading.Event()
    threads = [threading.Thread(target=run_passes, args=(loop, stop)) for loop in loops]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    took: float | None = None
    try:
        while time.monotonic() - started < 5 or took is None:
            server.step(duration_s=0.2)
            done = condition_status(server.status("small", "small"), "Complete") == "True"
            if done and took is None:
                took = time.monotonic() - started
            if time.monotonic() - started > 60:
                break
            time.sleep(0.05)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
        kube.close()
    assert took is not None and took < 10, took
    created, refused = server.posts[("full", "created")], server.posts[("full", "refused")]
    # NB: the quota's pace (3 pods, 0.2 s each) and one or two refused POSTs each time
    # a pod of the big eval ends (quota freed), never every missing pod
    assert created <= 3 + 3 * 5 / 0.2 + 3, server.posts
    assert refused <= 10 + 2 * created, server.posts
    refusing = server.status("full", "big")
    assert condition_status(refusing, "CreateRefused") == "True", refusing.get("conditions")
