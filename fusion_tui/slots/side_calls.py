"""Provides `SideCallQueue`: side calls (session titles, summaries) that never cost a session turn.

Why: on a 2-core machine a title call started right after the first turn competes with the next
turn for the cores and delays its first token. The queue runs a side call only while no session
turn of ours is in flight; a turn that starts while a side call runs cancels it (closing the
stream frees the server slot at once) and the call is run again, from the start, once the turns
are done. A side call is short and idempotent (a title), so a rerun costs little; the turn's
first token costs nothing. Pure asyncio/anyio, no I/O of its own; the chat path wires it in:
`async with queue.turn(): ...` around every turn, `queue.submit(make_title)` instead of calling it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import anyio

T = TypeVar("T")
MAX_RERUNS = 3


class SideCallQueue:
    """Turns first; side calls in the gaps (see the module docstring)."""

    def __init__(self, max_reruns: int = MAX_RERUNS) -> None:
        self.max_reruns = max_reruns
        self._turns = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._running: set[anyio.CancelScope] = set()
        self.cancelled = 0
        """Side calls cut short by a turn (each was rerun or given up)."""

    @property
    def turns_in_flight(self) -> int:
        return self._turns

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold around a session turn: running side calls stop, new ones wait for the end."""
        self._turns += 1
        if self._turns == 1:
            self._idle = anyio.Event()
        for scope in list(self._running):
            scope.cancel()
        try:
            yield
        finally:
            self._turns -= 1
            if self._turns == 0:
                self._idle.set()

    async def submit(self, call: Callable[[], Awaitable[T]]) -> T | None:
        """Run `call` when no turn is in flight; rerun it if a turn interrupts it (at most
        `max_reruns` times, then None). Other exceptions propagate."""
        for _ in range(self.max_reruns + 1):
            await self._idle.wait()
            if self._turns:
                continue
            with anyio.CancelScope() as scope:
                self._running.add(scope)
                try:
                    return await call()
                finally:
                    self._running.discard(scope)
            self.cancelled += 1
        return None
