"""Provides `LocalSideCalls`, the base of `LocalBackend`: what a turn asks, and the side calls.

Why together: the request's content is the exact-extension `prompt` (`chat_prompt`), compacted
first when it would not fit the slot, or right after an answer that leaves too little room for
the next turn (`Compactor`, whose summary is a side call: a continuation of the session's own
prompt where prefix reuse is `full`, else a slot no session holds), and the
title is a side call built on the same frame and summary (`titles.py`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import anyio

from fusion_tui.agent.host import template_frame
from fusion_tui.agent.prompt import TemplateFrame, TemplateProbeError
from fusion_tui.chat.compaction import (
    SUMMARY_TOKENS,
    Compactor,
    load_summary,
    next_turn_room,
)
from fusion_tui.chat.events import Compacted, Notice
from fusion_tui.chat.local_requests import LocalRequests
from fusion_tui.chat.titles import clean_title, continuation_slot, title_body
from fusion_tui.endpoints.context_fit import reply_reserve
from fusion_tui.server.errors import ServerError
from fusion_tui.sessions.model import Message
from fusion_tui.slots.side_calls import SideCallQueue

SYSTEM_PROMPT = (
    "You are a concise, careful coding assistant running on the user's own machine. "
    "Answer in Markdown; put code in fenced blocks."
)


class LocalSideCalls(LocalRequests):
    side_calls: SideCallQueue
    """Titles run between turns, never beside one."""
    _turn_lock: anyio.Lock
    """A read-ahead and the start of a turn: one at a time (the turn waits for it)."""
    _ahead_key: tuple[str, int] | None
    """(session, messages) of the last read-ahead: once per turn."""
    _ahead_notes: list[str]
    """What preparing the slot at the read-ahead said, for the next turn to show."""
    _ahead_scope: anyio.CancelScope | None
    """The read-ahead's request in flight: a turn that starts cancels it and takes over (the
    server keeps what it read)."""

    def chat_messages(self) -> list[dict[str, str]]:
        """The request's messages: a fixed system prompt, then the transcript, append-only."""
        out = [{"role": "system", "content": SYSTEM_PROMPT}]
        out += [
            {"role": m.role, "content": m.content}
            for m in self.session.messages
            if m.role in ("user", "assistant") and m.content
        ]
        return out

    async def _frame(self) -> TemplateFrame | None:
        """The model's template frame, probed once per daemon; None when the template cannot be
        cut (then the chat endpoint renders the messages, as before)."""
        assert self.conn is not None
        try:
            return await template_frame(self.conn)
        except (TemplateProbeError, ServerError):
            return None

    async def _content(self, force: bool = False) -> tuple[dict[str, Any], Compacted | None]:
        """What the next request asks: the exact-extension `prompt` (see `chat_prompt`),
        compacted first when it would not fit the slot (or when `force`d)."""
        compactor = await self._compactor()
        if compactor is None:
            return {"messages": self.chat_messages()}, None
        prompt, compacted = await compactor.prompt_for(self.store, self.session, force=force)
        return {"prompt": prompt}, compacted

    async def _compactor(self) -> Compactor | None:
        """The session's compactor; None without a template frame (no exact prompt)."""
        frame = await self._frame()
        if frame is None:
            return None
        assert self.conn is not None
        n_ctx, n_predict = self.conn.props.n_ctx, self.settings.llm.max_tokens
        own = self._title_slot()  # the session's slot, where prefix reuse is `full`

        async def on_own_slot(body: dict[str, Any]) -> str:
            return await self._side_call(body, slot=own)

        return Compactor(
            frame, SYSTEM_PROMPT, self._count, self._side_call, n_ctx,
            reply_reserve(n_ctx, n_predict), min(SUMMARY_TOKENS, n_predict),
            own_call=on_own_slot if own is not None else None, next_turn=next_turn_room(n_ctx),
        )  # fmt: skip

    async def compact_ahead(self) -> AsyncGenerator[Notice, None]:
        """After a completed turn: compact now when the next turn would likely not fit
        (`Compactor.ahead`): a notice while it runs, then the `Compacted` one. A server error
        is left to the next turn, which compacts before its request when it must."""
        if self.keeper.conn is None:
            return
        try:
            compactor = await self._compactor()
            if compactor is None or not await compactor.ahead_due(self.store, self.session):
                return
            yield Notice("compacting the session ahead of the next turn…")
            compacted = await compactor.ahead(self.store, self.session)
        except ServerError:
            return
        if compacted is not None:
            yield compacted

    async def read_ahead(self) -> None:
        """The user started the next message (the TUI's first keystroke): make the session's
        slot ready as its next turn would (a resumed session's saved slot restored, room made:
        `warm_resume`, `next_slot`, their notes kept for that turn) and read the next turn's
        opening (the last answer's end and the next user header) into it with `n_predict: 0`.
        The turn extends that prompt exactly, so this work is off its first token and nothing
        is read twice; a message never sent costs those few tokens. Once per turn; a session
        that has no answer yet, several endpoints or a prompt about to compact: nothing read.
        A failure costs nothing: the turn does it all again."""
        session = self.session
        key = (session.id, len(session.messages))
        if self._ahead_key == key or self.keeper.conn is None or self.endpoints is not None:
            return
        if not any(m.role == "assistant" and m.content for m in session.messages):
            return
        self._ahead_key = key
        async with self._turn_lock:
            try:
                self._ahead_notes += await self.keeper.warm_resume()
                slot = await self.keeper.next_slot()
                compactor = await self._compactor()
                prompt = None if compactor is None else await compactor.next_opening(
                    self.store, session)  # fmt: skip
                if prompt is None:
                    return  # no exact prompt, or the turn compacts first: its prompt starts anew
                if slot < 0:  # resumed cold: its prompt is read again, now rather than later
                    slot = await self.keeper.room_to_read_into()
                self._ahead_notes += self.keeper.take_notes()
                if slot < 0:
                    return
                body = {"prompt": prompt, "n_predict": 0, "temperature": 0.0}
                with anyio.CancelScope() as self._ahead_scope:  # Enter takes over (`_reply`)
                    await self._side_call(body, slot=slot, record=False)
                if not self._ahead_scope.cancelled_caught:
                    self.keeper.pin_answer(slot)  # the slot holds the session now
            except ServerError:
                return
            finally:
                self._ahead_scope = None

    async def _count(self, prompt: str) -> int:
        assert self.conn is not None
        return len(await self.conn.client.tokenize(prompt, add_special=True))

    async def compact(self) -> str | None:
        """Compact the session's prompt now (the palette's "Compact session"); the notice, or
        None when there is nothing to summarise."""
        if self.keeper.conn is None:
            raise ServerError("the server is not connected yet")
        if not any(m.role == "assistant" for m in self.session.messages):
            return None
        self.session.messages.append(Message(role="user", content=""))  # counts as the new turn
        try:
            _content, compacted = await self._content(force=True)
        finally:
            self.session.messages.pop()
        return None if compacted is None else compacted.text

    # --- side calls ----------------------------------------------------------------------------

    async def make_title(self) -> str | None:
        """The title side call, queued behind the session's turns (see `reply`)."""
        return await self.side_calls.submit(self._make_title)

    async def _make_title(self) -> str | None:
        """Title the session with a side call that costs no session its cache (`titles.py`): a
        continuation of its own prompt where prefix reuse is `full`, else a slot no session
        holds; saves the session. None when there is nothing to title from, no such slot, or
        the model said nothing usable."""
        keeper, gate = self.keeper, self.keeper.gate
        if keeper.conn is None or gate is None:
            raise ServerError("the server is not connected yet")
        session = self.session
        first = next((m.content for m in session.messages if m.role == "user"), "")
        if not first.strip():
            return None
        if session.title and session.title != " ".join(first.split())[:60]:
            return session.title  # titled already (a resumed session): no side call
        slot = self._title_slot()
        if slot is None:
            slot = self.keeper.side_slot_for(free_only=True)
        if slot is None:  # every slot holds a session: a title is not worth evicting one
            return None
        raw = await self._side_call(await self._title_body(first), slot=slot)
        title = clean_title(raw)
        if not title:
            return None
        session.title = title
        self._save()
        return title

    def _title_slot(self) -> int | None:
        assert self.conn is not None
        return continuation_slot(self.conn, self.pool.pins.get(self.session.id))

    async def _title_body(self, first: str) -> dict[str, Any]:
        frame = await self._frame()
        if frame is None or self._title_slot() is None:
            return title_body(None, first, [], None, SYSTEM_PROMPT)
        summary = load_summary(self.store, self.session.id)
        return title_body(frame, first, self.session.messages, summary, SYSTEM_PROMPT)
