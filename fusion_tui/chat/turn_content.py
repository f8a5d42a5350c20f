"""Provides `TurnContent`, what a turn of the plain chat asks, and `ReadAhead`, for `LocalBackend`.

Why together: the request's content is the exact-extension `prompt` (`chat_prompt`), compacted
first when it would not fit the slot, or right after an answer that leaves too little room for
the next turn (`Compactor`, whose summary is a side call: a continuation of the session's own
prompt where prefix reuse is `full`, else a slot no session holds); the read-ahead reads the
opening of that same prompt into the slot while the user types.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import anyio

from fusion_tui.chat.compaction import (
    SUMMARY_TOKENS,
    Compactor,
    next_turn_room,
)
from fusion_tui.chat.events import Compacted, Notice
from fusion_tui.chat.titles import continuation_slot
from fusion_tui.config import Settings
from fusion_tui.endpoints.context_fit import reply_reserve
from fusion_tui.server.errors import ServerError
from fusion_tui.server.template import TemplateFrame, TemplateProbeError, template_frame
from fusion_tui.sessions.model import Message
from fusion_tui.sessions.store import SessionStore
from fusion_tui.slots.keeper import SlotKeeper

SYSTEM_PROMPT = (
    "You are a concise, careful coding assistant running on the user's own machine. "
    "Answer in Markdown; put code in fenced blocks."
)

SideCall = Callable[..., Awaitable[str]]
"""`RequestRunner.side_call`: (body, slot=None, *, record=True) → the text answered."""


class TurnContent:
    """Builds what the next request of the session asks, compacting it when it must."""

    def __init__(
        self, settings: Settings, store: SessionStore, keeper: SlotKeeper, side_call: SideCall
    ) -> None:
        self.settings = settings
        self.store = store
        self.keeper = keeper
        self.side_call = side_call

    def chat_messages(self) -> list[dict[str, str]]:
        """The request's messages: a fixed system prompt, then the transcript, append-only."""
        out = [{"role": "system", "content": SYSTEM_PROMPT}]
        out += [
            {"role": m.role, "content": m.content}
            for m in self.keeper.session.messages
            if m.role in ("user", "assistant") and m.content
        ]
        return out

    async def frame(self) -> TemplateFrame | None:
        """The model's template frame, probed once per daemon; None when the template cannot be
        cut (then the chat endpoint renders the messages, as before)."""
        conn = self.keeper.conn
        assert conn is not None
        try:
            return await template_frame(conn)
        except (TemplateProbeError, ServerError):
            return None

    def own_slot(self) -> int | None:
        """The session's slot when a side call can continue its cached prompt there (prefix
        reuse `full`); None: a slot no session holds."""
        conn = self.keeper.conn
        assert conn is not None
        return continuation_slot(conn, self.keeper.pool.pins.get(self.keeper.session.id))

    async def content(self, force: bool = False) -> tuple[dict[str, Any], Compacted | None]:
        """What the next request asks: the exact-extension `prompt` (see `chat_prompt`),
        compacted first when it would not fit the slot (or when `force`d)."""
        compactor = await self.compactor()
        if compactor is None:
            return {"messages": self.chat_messages()}, None
        session = self.keeper.session
        prompt, compacted = await compactor.prompt_for(self.store, session, force=force)
        return {"prompt": prompt}, compacted

    async def compactor(self) -> Compactor | None:
        """The session's compactor; None without a template frame (no exact prompt)."""
        frame = await self.frame()
        if frame is None:
            return None
        conn = self.keeper.conn
        assert conn is not None
        n_ctx, n_predict = conn.props.n_ctx, self.settings.llm.max_tokens
        own = self.own_slot()  # the session's slot, where prefix reuse is `full`

        async def on_own_slot(body: dict[str, Any]) -> str:
            return await self.side_call(body, slot=own)

        return Compactor(
            frame, SYSTEM_PROMPT, self.count, self.side_call, n_ctx,
            reply_reserve(n_ctx, n_predict), min(SUMMARY_TOKENS, n_predict),
            own_call=on_own_slot if own is not None else None, next_turn=next_turn_room(n_ctx),
        )  # fmt: skip

    async def compact_ahead(self) -> AsyncGenerator[Notice, None]:
        """After a completed turn: compact now when the next turn would likely not fit
        (`Compactor.ahead`): a notice while it runs, then the `Compacted` one. A server error
        is left to the next turn, which compacts before its request when it must."""
        if self.keeper.conn is None:
            return
        session = self.keeper.session
        try:
            compactor = await self.compactor()
            if compactor is None or not await compactor.ahead_due(self.store, session):
                return
            yield Notice("compacting the session ahead of the next turn…")
            compacted = await compactor.ahead(self.store, session)
        except ServerError:
            return
        if compacted is not None:
            yield compacted

    async def count(self, prompt: str) -> int:
        conn = self.keeper.conn
        assert conn is not None
        return len(await conn.client.tokenize(prompt, add_special=True))

    async def compact(self) -> str | None:
        """Compact the session's prompt now (the palette's "Compact session"); the notice, or
        None when there is nothing to summarise."""
        if self.keeper.conn is None:
            raise ServerError("the server is not connected yet")
        session = self.keeper.session
        if not any(m.role == "assistant" for m in session.messages):
            return None
        session.messages.append(Message(role="user", content=""))  # counts as the new turn
        try:
            _content, compacted = await self.content(force=True)
        finally:
            session.messages.pop()
        return None if compacted is None else compacted.text


class ReadAhead:
    """Reads the next turn's opening into the session's slot while the user types; the turn
    takes over from it (`take_over`, then `lock`) and shows what preparing the slot said."""

    def __init__(
        self, store: SessionStore, keeper: SlotKeeper, content: TurnContent, side_call: SideCall
    ) -> None:
        self.store = store
        self.keeper = keeper
        self.content = content
        self.side_call = side_call
        self.lock = anyio.Lock()
        """A read-ahead and the start of a turn: one at a time (the turn waits for it)."""
        self._key: tuple[str, int] | None = None
        """(session, messages) of the last read-ahead: once per turn."""
        self._notes: list[str] = []
        """What preparing the slot at the read-ahead said, for the next turn to show."""
        self._scope: anyio.CancelScope | None = None
        """The read-ahead's request in flight: a turn that starts cancels it and takes over (the
        server keeps what it read)."""

    def take_over(self) -> None:
        """A turn starts: the read-ahead's request in flight, if any, is cut short."""
        if self._scope is not None:
            self._scope.cancel()

    def take_notes(self) -> list[str]:
        notes, self._notes = self._notes, []
        return notes

    async def read_ahead(self, *, several_endpoints: bool) -> None:
        """The user started the next message (the TUI's first keystroke): make the session's
        slot ready as its next turn would (a resumed session's saved slot restored, room made:
        `warm_resume`, `next_slot`, their notes kept for that turn) and read the next turn's
        opening (the last answer's end and the next user header) into it with `n_predict: 0`.
        The turn extends that prompt exactly, so this work is off its first token and nothing
        is read twice; a message never sent costs those few tokens. Once per turn; a session
        that has no answer yet, several endpoints or a prompt about to compact: nothing read.
        A failure costs nothing: the turn does it all again."""
        session = self.keeper.session
        key = (session.id, len(session.messages))
        if self._key == key or self.keeper.conn is None or several_endpoints:
            return
        if not any(m.role == "assistant" and m.content for m in session.messages):
            return
        self._key = key
        async with self.lock:
            try:
                self._notes += await self.keeper.warm_resume()
                slot = await self.keeper.next_slot()
                compactor = await self.content.compactor()
                prompt = None if compactor is None else await compactor.next_opening(
                    self.store, session)  # fmt: skip
                if prompt is None:
                    return  # no exact prompt, or the turn compacts first: its prompt starts anew
                if slot < 0:  # resumed cold: its prompt is read again, now rather than later
                    slot = await self.keeper.room_to_read_into()
                self._notes += self.keeper.take_notes()
                if slot < 0:
                    return
                body = {"prompt": prompt, "n_predict": 0, "temperature": 0.0}
                with anyio.CancelScope() as self._scope:  # Enter takes over (`take_over`)
                    await self.side_call(body, slot=slot, record=False)
                if not self._scope.cancelled_caught:
                    self.keeper.pin_answer(slot)  # the slot holds the session now
            except ServerError:
                return
            finally:
                self._scope = None
