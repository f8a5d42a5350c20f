"""Provides `until_stopped`: run a coroutine, and turn a stop signal into a cancellation.

The stop signals are SIGTERM, SIGINT and SIGHUP. Why: a headless command killed by `timeout`
(SIGTERM) used to die on the spot, so nothing after its first save reached the disk. Cancelling
instead lets every `finally` run (the session's last save, the server's stop, the best attempt's
files put back), after which the caller says what was kept and exits 128 + the signal, as a
shell expects (143 for SIGTERM, 130 for SIGINT, 129 for SIGHUP: the terminal was closed).
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import anyio

T = TypeVar("T")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@dataclass
class Stopped(Generic[T]):
    """The coroutine's result, or the signal that cancelled it (then `result` is None)."""

    result: T | None = None
    signum: int | None = None

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum or 0)

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""


async def until_stopped(fn: Callable[[], Awaitable[T]]) -> Stopped[T]:
    """`await fn()`, cancelled by the first stop signal (a second one is the default)."""
    outcome: Stopped[T] = Stopped()
    try:
        await _watched(fn, outcome)
    except BaseExceptionGroup as group:  # the work's own error, not wrapped by the task group
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    return outcome


async def _watched(fn: Callable[[], Awaitable[T]], outcome: Stopped[T]) -> None:
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
                async for signum in signals:
                    outcome.signum = int(signum)
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(watch)
        await anyio.sleep(0)  # the handlers are in place before the work starts
        outcome.result = await fn()
        tg.cancel_scope.cancel()
