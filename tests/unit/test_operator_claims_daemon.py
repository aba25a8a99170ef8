"""An eval's daemon serves it only once its namespace is claimed for the release (#24):
while another release (or a forged claim) holds the namespace, the daemon says so once (a
NamespaceClaimed Warning Event on the eval, posted by the daemon: kopf posts no log record)
and waits."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from passhat.operator import events, handlers

EVAL = {"metadata": {"namespace": "team-a", "name": "demo", "uid": "uid-1"}}


class Stopped:
    """kopf.DaemonStopped as the daemon uses it: falsy until stopped."""

    def __init__(self) -> None:
        self.flag = False

    def __bool__(self) -> bool:
        return self.flag

    async def wait(self) -> None:
        while not self.flag:
            await asyncio.sleep(0.01)


def test_a_namespace_another_release_serves_is_not_served(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Refused twice, then free: the daemon logs the refusal once and then serves."""
    answers = ["served by ph-a", "served by ph-a", None]
    asked: list[str] = []

    def claim(namespace: str) -> str | None:
        asked.append(namespace)
        return answers.pop(0)

    monkeypatch.setattr(handlers.runtime, "claim", claim)
    monkeypatch.setattr(handlers, "CLAIM_RETRY_S", 0.01)
    posted: list[tuple[Any, events.Event]] = []
    monkeypatch.setattr(events, "post", lambda body, event: posted.append((body, event)))
    logger: Any = logging.getLogger("test.daemon")
    with caplog.at_level(logging.WARNING, logger="test.daemon"):
        assert asyncio.run(handlers._may_serve(EVAL, Stopped(), logger))  # type: ignore[arg-type]
    assert asked == ["team-a"] * 3
    assert [r.message for r in caplog.records] == ["served by ph-a"]
    # NB: kopf posts no log record as an Event: the daemon posts one itself, once
    assert [(body, event.type, event.reason) for body, event in posted] == [
        (EVAL, "Warning", events.NAMESPACE_CLAIMED)
    ]
    assert posted[0][1].message.startswith("served by ph-a; the eval waits")


def test_a_stopped_daemon_gives_up_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped while refused: the daemon returns without serving."""
    stopped = Stopped()

    def claim(namespace: str) -> str | None:
        stopped.flag = True
        return "served by ph-a"

    monkeypatch.setattr(handlers.runtime, "claim", claim)
    logger: Any = logging.getLogger("test.daemon")
    assert not asyncio.run(handlers._may_serve(EVAL, stopped, logger))  # type: ignore[arg-type]


def test_without_claims_every_namespace_is_served() -> None:
    """Namespaced mode (claims made up front) and no election: nothing to ask."""
    assert handlers.runtime.claim is None
    assert asyncio.run(handlers._may_serve(EVAL, Stopped(), logging.getLogger("t")))  # type: ignore[arg-type]
