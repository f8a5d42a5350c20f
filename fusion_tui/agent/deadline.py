"""Task ceiling and user cancel around one awaited call, on an injectable clock.

`run_guarded` runs a call inside an anyio cancel scope that two watchers may cancel: the clock
reaching the deadline (the task ceiling, or a finalization deadline) and the user's cancel token.
It reports which one fired, and a fired deadline is read *before* the cancel flag, so a ceiling
never turns into "cancelled" even though it was delivered as a cancellation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

import anyio

from fusion_tui.clock import Clock, sleep_until

T = TypeVar("T")

DEFAULT_MAX_DURATION_MS = 2 * 60 * 60 * 1000
DEFAULT_FINALIZATION_MS = 5 * 60 * 1000


class CancelToken:
    """The user's cancel (Esc, Ctrl-C). Set it from the event loop's thread."""

    def __init__(self) -> None:
        self._cancelled = False
        self._event: anyio.Event | None = None

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        self._cancelled = True
        if self._event is not None:
            self._event.set()

    async def wait(self) -> None:
        if self._cancelled:
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()


Ended = Literal["ok", "deadline", "cancelled"]


@dataclass(frozen=True)
class Guarded(Generic[T]):
    ended: Ended
    value: T | None = None


async def run_guarded(
    fn: Callable[[], Awaitable[T]],
    *,
    clock: Clock,
    deadline: float | None,
    cancel: CancelToken | None,
) -> Guarded[T]:
    """Run `fn` until it returns, the deadline passes, or the user cancels.

    Exceptions from `fn` propagate, except when the deadline or the cancel fired first (a client
    that turns its cancellation into an error must not hide which of the two it was).
    """
    if deadline is not None and clock.now() >= deadline:
        return Guarded("deadline")
    if cancel is not None and cancel.cancelled:
        return Guarded("cancelled")
    fired = {"deadline": False, "cancel": False}
    box: list[T] = []
    error: BaseException | None = None
    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as body:

            async def watch_deadline(when: float) -> None:
                await sleep_until(clock, when)
                fired["deadline"] = True
                body.cancel()

            async def watch_cancel(token: CancelToken) -> None:
                await token.wait()
                fired["cancel"] = True
                body.cancel()

            if deadline is not None:
                tg.start_soon(watch_deadline, deadline)
            if cancel is not None:
                tg.start_soon(watch_cancel, cancel)
            try:
                box.append(await fn())
            except Exception as exc:
                error = exc
            finally:
                tg.cancel_scope.cancel()
    if fired["deadline"] and not box:
        return Guarded("deadline")
    if fired["cancel"] and not box:
        return Guarded("cancelled")
    if error is not None:
        raise error
    if not box:  # cancelled from outside this helper: let the caller's scope see it
        return Guarded("cancelled")
    return Guarded("ok", box[0])
