"""The user's keyboard in bench/cache_reuse.py: the first token is timed from the Enter key.

A typed message takes `len(text) / CHARS_PER_SECOND` seconds from its first keystroke to Enter
(about 70 words a minute); a pasted one (a file, notes) takes none. What a client does from the
first keystroke on (fusion-tui's read-ahead: a restore, room made on a crowded server, the next
prompt's opening read into the slot) overlaps the typing; whatever of it is still running at
Enter is waited for by the turn and so lands in its first-token time, as the user sees it.

When the client's work ends before Enter, the rest of the typing is idle for both the client and
the server (the other policy's requests never overlap, see `run_group`), so it is skipped rather
than slept: nothing the server or the client does depends on that wait, only the wall clock.
`sleep=True` (`--sleep-typing`) sleeps it anyway, for a reader who wants to see that it changes
nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

CHARS_PER_SECOND = 6.0
"""70 words a minute at the typing tests' 5 characters a word: 350 characters a minute."""


def typing_seconds(text: str, *, pasted: bool) -> float:
    """From the first keystroke to Enter: 0 for a paste, else the characters at 70 wpm."""
    return 0.0 if pasted else len(text) / CHARS_PER_SECOND


def enter_time(first_key: float, typing_s: float, ready_at: float | None) -> float:
    """When Enter is pressed, on the bench's clock: after the typing, counted from the first
    key; when the client's keystroke work ended before that (`ready_at`), at `ready_at` (the
    idle rest of the typing skipped, see the module docstring)."""
    due = first_key + typing_s
    return due if ready_at is None or ready_at > due else ready_at


@dataclass
class Typed:
    """One message typed: when Enter came, and the client's keystroke work if still running."""

    enter: float
    typing_s: float
    pending: asyncio.Task[None] | None = None
    started: float = 0.0
    ended: float | None = None
    """When the keystroke work ended (None: none was done, or it is still running)."""

    async def settle(self) -> float:
        """Waits for the keystroke work (a failure is the turn's to see, not the typist's) and
        answers how long it took, 0 when there was none."""
        if self.pending is not None:
            try:
                await self.pending
            finally:
                self.ended = self.ended or time.monotonic()
                self.pending = None
        return 0.0 if self.ended is None else self.ended - self.started


async def type_message(
    text: str,
    *,
    pasted: bool,
    at_first_key: Callable[[], Awaitable[None]] | None = None,
    sleep: bool = False,
) -> Typed:
    """Types `text`: `at_first_key` (the client's work at the first keystroke) starts at once and
    runs while the user types. Returns at Enter; the work may still be running then (`pending`:
    the turn waits for it, as the TUI's turn does)."""
    first = time.monotonic()
    typing_s = typing_seconds(text, pasted=pasted)
    typed = Typed(first, typing_s, started=first)
    if at_first_key is not None:

        async def work() -> None:
            try:
                await at_first_key()
            finally:
                typed.ended = time.monotonic()

        typed.pending = asyncio.ensure_future(work())
        await asyncio.sleep(0)  # the keystroke is handled before Enter, however fast the paste
        await asyncio.wait({typed.pending}, timeout=typing_s)
        if typed.pending.done():
            await typed.settle()
    ready = typed.ended if at_first_key is not None else first
    if sleep:
        await asyncio.sleep(max(0.0, first + typing_s - time.monotonic()))
        ready = None
    typed.enter = enter_time(first, typing_s, ready)
    return typed
