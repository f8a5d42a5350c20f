"""Provides `Clock`: the one injectable clock for waiting (monotonic time and sleeping), and
`WallClock`, the one for stamping records (seconds since the epoch).

The agent's task ceiling (`agent.deadline`) and the first-token watch (`slots.watch`) take a
`Clock`, so tests drive hours of waiting in microseconds on the fake in `tests/fakes/clock.py`;
sessions stamp turns and requests with a `WallClock` passed in by whoever records them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import anyio

WallClock = Callable[[], float]
"""Seconds since the epoch (`time.time`): what turns and requests are stamped with."""


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    """The real clock."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


REAL_CLOCK = MonotonicClock()


async def sleep_until(clock: Clock, when: float) -> None:
    """Sleep on `clock` until `clock.now() >= when` (an early wake-up sleeps again)."""
    while (left := when - clock.now()) > 0:
        await clock.sleep(left)
