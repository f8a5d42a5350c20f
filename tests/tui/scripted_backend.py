"""A Backend that plays a script: no server, no clock, for Pilot and snapshot tests.

It implements the whole `Backend` protocol (mypy checks it); what a script cannot do (saved
sessions, the slot map) it declines the way a real backend would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from typing import TYPE_CHECKING

from fusion_tui.chat.backend import (
    Backend,
    Said,
    SessionCatalog,
    SlotView,
    StatusCallback,
    Unavailable,
)
from fusion_tui.chat.events import ReplyDone, ReplyEvent, StreamEnd, TextDelta
from fusion_tui.server.connect import Connection
from fusion_tui.server.types import Timings
from fusion_tui.status import ServerStatus

READY = ServerStatus(state="ready", model="SmolLM2-135M-Instruct", slots=4, n_ctx=4096, tok_s=95.0)


class ScriptedBackend:
    def __init__(
        self,
        replies: Sequence[Sequence[str]] = (),
        *,
        status: ServerStatus = READY,
        history: Sequence[tuple[str, str] | Said] = (),
        hold_after: int | None = None,
        start_error: str | None = None,
        prelude: Sequence[ReplyEvent] = (),
    ) -> None:
        self.replies = [list(r) for r in replies]
        self.status = status
        self._history: list[Said] = [Said(*h) for h in history]
        self.sent: list[str] = []
        self.read_aheads = 0
        """How often the screen said the user started the next message."""
        self.hold_after = hold_after
        self._held: asyncio.Event | None = None
        """Stop after this many fragments and wait forever (to test cancel mid-stream)."""
        self.start_error = start_error
        self.closed = False
        self.stopped = False
        self.prelude = list(prelude)
        """Events sent before the first fragment (prompt progress, notices)."""
        self.cancelled = False
        self.adopted: Connection | None = None

    async def start(self, report: StatusCallback) -> ServerStatus:
        report(ServerStatus(state="loading", model=self.status.model))
        if self.start_error:
            raise RuntimeError(self.start_error)
        return self.status

    async def reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        self.sent.append(text)
        self._history.append(Said("user", text))
        fragments = self.replies.pop(0) if self.replies else ["(no script)"]
        answer = ""
        try:
            for event in self.prelude:
                yield event
            if self.prelude and not fragments:
                await asyncio.Event().wait()  # hold on the prompt-reading stage
            for i, fragment in enumerate(fragments):
                if self.hold_after is not None and i >= self.hold_after:
                    await self.held().wait()
                answer += fragment
                yield TextDelta(fragment)
            timings = Timings(
                prompt_n=12, cache_n=30, predicted_n=len(fragments), predicted_per_second=88.0
            )
            yield StreamEnd(id_slot=2, timings=timings)
            yield ReplyDone("completed", note="slot 2 · 30 of 42 prompt tokens cached")
        finally:
            if answer != "".join(fragments):
                self._history.append(Said("assistant", answer, "cancelled"))
            elif answer or fragments:
                self._history.append(Said("assistant", answer))
            if answer != "".join(fragments):
                self.cancelled = True

    def held(self) -> asyncio.Event:
        """What a reply held by `hold_after` waits for (`release`)."""
        if self._held is None:
            self._held = asyncio.Event()
        return self._held

    def release(self) -> None:
        """Let a reply held by `hold_after` go on."""
        self.held().set()

    def history(self) -> list[Said]:
        return list(self._history)

    async def close(self) -> None:
        self.closed = True

    # --- sessions: one in memory, no catalog -----------------------------------------------------

    async def compact(self) -> str | None:
        return None

    async def new_session(self) -> str | None:
        self._history = []
        return None

    async def open_session(self, session_id: str) -> str | None:
        raise Unavailable(f"no saved session {session_id} in a scripted backend")

    def sessions(self) -> SessionCatalog | None:
        return None

    def current_session_id(self) -> str | None:
        return None

    async def make_title(self) -> str | None:
        return None

    async def read_ahead(self) -> None:
        self.read_aheads += 1

    # --- the server ------------------------------------------------------------------------------

    async def stop_server(self) -> str | None:
        self.stopped = True
        return None

    async def adopt(self, conn: Connection) -> ServerStatus:
        self.adopted = conn
        return self.status

    def slot_view(self) -> SlotView | None:
        return None

    async def died_of_sigill(self) -> bool:
        return False


if TYPE_CHECKING:  # mypy checks the scripted backends against the protocol
    _backend: Backend = ScriptedBackend()
