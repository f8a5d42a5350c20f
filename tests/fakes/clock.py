"""The one fake `fusion_tui.clock.Clock` for tests: time moves only when a test says so.

Two ways to move it. By hand: `clock.advance(seconds)` wakes every sleeper due by then (the agent
loop's tests push a tool or a request past a deadline this way). Automatically (inside an async
test on the asyncio backend)::

    clock = FakeClock()
    result = await clock.run(some_coroutine_function, arg1, arg2)

`run` starts the coroutine and a driver task. Whenever nothing else can run, the driver jumps
`now()` to the earliest pending `sleep` deadline and wakes the sleepers due then. So a 15-minute
wait runs in microseconds and every test sees the same order of events. Only code that waits on
`clock.sleep` (or on events set by such code) may be driven; real I/O would make "nothing can run"
a lie, so keep real sockets out of virtual-clock tests.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

T = TypeVar("T")


class FakeClock:
    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, anyio.Event]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await anyio.sleep(0)
            return
        event = anyio.Event()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), event))
        await event.wait()

    def advance(self, seconds: float) -> None:
        """Move time on by `seconds` and wake every sleeper due by then."""
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            heapq.heappop(self._sleepers)[2].set()

    async def _settle(self) -> None:
        """Yield until no other task is runnable (the asyncio ready queue stays empty)."""
        loop = asyncio.get_running_loop()
        quiet = 0
        for _ in range(10_000):
            await asyncio.sleep(0)
            ready = getattr(loop, "_ready", None)
            if ready is not None and len(ready) == 0:
                quiet += 1
                if quiet >= 3:
                    return
            else:
                quiet = 0
        raise RuntimeError("FakeClock: tasks never settled (a busy loop?)")

    async def run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run `fn(*args)` to completion under virtual time; its exception propagates."""
        box: dict[str, Any] = {}
        done = anyio.Event()

        async def main() -> None:
            try:
                box["value"] = await fn(*args)
            except BaseException as exc:  # re-raised below, outside the task group
                box["error"] = exc
            finally:
                done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(main)
            while True:
                await self._settle()
                if done.is_set():
                    break
                # drop sleepers whose task was cancelled and will never be woken usefully
                if not self._sleepers:
                    raise RuntimeError("FakeClock: deadlock, nothing sleeps and nothing runs")
                when = self._sleepers[0][0]
                self._now = max(self._now, when)
                while self._sleepers and self._sleepers[0][0] <= self._now:
                    heapq.heappop(self._sleepers)[2].set()
        if "error" in box:
            raise box["error"]
        return box["value"]  # type: ignore[no-any-return]
