"""Waking an eval's daemon from another thread (`OperatorRuntime.wake`)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from passhat.operator.handlers import OperatorRuntime


def test_a_wake_while_a_pass_is_due_costs_the_loop_nothing() -> None:
    """A wake-up sets the daemon's event through its loop; more while it is set (a burst
    of pod events before the pass starts) schedule nothing; once the daemon clears it for
    its pass, the next wake-up sets it again."""

    async def scenario() -> int:
        runtime = OperatorRuntime()
        loop, event = asyncio.get_running_loop(), asyncio.Event()
        runtime.wakers["uid-1"] = (loop, event)
        scheduled = 0
        threadsafe = loop.call_soon_threadsafe

        def counted(callback: Any, *args: Any) -> Any:
            nonlocal scheduled
            scheduled += callback == event.set  # NB: to_thread's own result comes this way
            return threadsafe(callback, *args)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign,assignment]

        def burst() -> None:
            assert runtime.wake("uid-1")
            while not event.is_set():  # NB: the loop runs event.set
                time.sleep(0.001)
            for _ in range(50):
                assert runtime.wake("uid-1")

        await asyncio.to_thread(burst)
        assert scheduled == 1
        event.clear()  # NB: the daemon, before its pass
        await asyncio.to_thread(burst)
        assert scheduled == 2
        assert not runtime.wake("no-such-eval")
        return scheduled

    assert asyncio.run(scenario()) == 2
