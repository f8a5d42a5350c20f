"""Provides `LocalBackend`: the TUI's plain chat, turns of one session against a (managed or
external) server. (`fusion-tui run` and agent mode run turns through `agent.session_run`.)

Each turn rides the session's slot, one request in flight per slot; which slot, and how a resumed
session gets its prompt back, is the `SlotKeeper`'s business. The session is saved atomically after
every turn, also a cancelled or failed one.

Until the first byte, `watch_first_token` polls `/slots` next to the stream; a request that got
no data at all (lost, stalled, connection dropped) is retried once on the same slot.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from fusion_tui.agent.host import template_frame
from fusion_tui.agent.prompt import TemplateFrame, TemplateProbeError
from fusion_tui.chat import endpoint_turns
from fusion_tui.chat.backend import (
    Said,
    SessionCatalog,
    SlotView,
    StatusCallback,
    Unavailable,
    said,
)
from fusion_tui.chat.compaction import SUMMARY_TOKENS, Compactor, load_summary, reply_reserve
from fusion_tui.chat.events import (
    AnswerRestarted,
    Compacted,
    Notice,
    Progress,
    ReplyDone,
    ReplyEvent,
)
from fusion_tui.chat.notes import context_full_message, cost_note, stall_message
from fusion_tui.chat.slot_keeper import SlotKeeper
from fusion_tui.chat.titles import clean_title, continuation_slot, title_body
from fusion_tui.chat.warm import first_event, watch_config
from fusion_tui.clock import REAL_CLOCK, Clock
from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.runtime import Connection, connect, make_daemon, release, stops_on_exit
from fusion_tui.server.errors import (
    ContextExceeded,
    ProtocolError,
    ServerError,
    ServerUnreachable,
    StreamStalled,
)
from fusion_tui.server.types import PromptProgress, StreamEnd, StreamEvent, TextDelta
from fusion_tui.sessions.model import Message, Outcome, Session, WallClock
from fusion_tui.sessions.store import SessionStore
from fusion_tui.sigill_recovery import sigill_after_serving
from fusion_tui.slots.archive import DEFAULT_MAX_BYTES
from fusion_tui.slots.gate import waiting_message
from fusion_tui.slots.pins import SlotPool
from fusion_tui.slots.progress import ProgressTracker
from fusion_tui.slots.side_calls import SideCallQueue
from fusion_tui.slots.watch import FirstTokenStall
from fusion_tui.status import ServerStatus

SYSTEM_PROMPT = (
    "You are a concise, careful coding assistant running on the user's own machine. "
    "Answer in Markdown; put code in fenced blocks."
)
Connector = Callable[..., Awaitable[Connection]]
NO_DATA = (FirstTokenStall, ServerUnreachable, ProtocolError)
"""Failures that, before any event arrived, mean the request got no answer: retried once."""


@dataclass
class _Flag:
    data: bool = False


class LocalBackend:
    """The real backend of the TUI's plain chat."""

    def __init__(
        self,
        settings: Settings,
        paths: AppPaths,
        *,
        model: str | None = None,
        resume: str | None = None,
        clock: Clock = REAL_CLOCK,
        wall_clock: WallClock = time.time,
        connector: Connector | None = None,
        archive_max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.settings = settings
        self.paths = paths
        self.model = model
        self.resume = resume
        self.clock = clock
        """Monotonic time and sleeping: time to first token and the first-token watch."""
        self.wall_clock = wall_clock
        """What turns and requests are stamped with."""
        self.connector = connector or connect
        self.store = SessionStore.default(paths)
        session = self._open_session(resume)
        self.store.claim(session.id)  # SessionLocked: another instance has it open
        self.keeper = SlotKeeper(self.store, session, archive_max_bytes=archive_max_bytes)
        self.side_calls = SideCallQueue()
        """Titles run between turns, never beside one."""
        self.save_error: str | None = None
        """The last save failure, shown to the user; the session stays in memory."""
        # issue 14: several endpoints (None with one: the single-server app, unchanged)
        self.endpoints = endpoint_turns.endpoint_pins_for(settings)
        self.endpoint_turn: endpoint_turns.TurnRoute | None = None
        self.ask_failover: endpoint_turns.FailoverAsk | None = None
        """Asked before a session moves to another endpoint (the TUI); None: move."""
        self._primary: Connection | None = None

    @property
    def session(self) -> Session:
        return self.keeper.session

    @property
    def conn(self) -> Connection | None:
        return self.keeper.conn

    @property
    def pool(self) -> SlotPool:
        return self.keeper.pool

    def _open_session(self, resume: str | None) -> Session:
        if resume is None:
            return Session.new()
        if resume == "":
            entries = [e for e in self.store.list() if e.ok]
            if not entries:
                return Session.new()
            resume = max(entries, key=lambda e: e.updated).id
        return self.store.load(resume)

    # --- Backend: turns ------------------------------------------------------------------------

    async def start(self, report: StatusCallback) -> ServerStatus:
        connector = endpoint_turns.connector(self)  # issue 14: several endpoints
        conn = await connector(self.settings, self.paths, report, model=self.model)
        return await self.adopt(conn)

    async def adopt(self, conn: Connection) -> ServerStatus:
        """Take over a connection made elsewhere (the launch wizard) instead of connecting."""
        self.keeper.attach(conn)
        if self.endpoints is not None and conn is not self._primary:  # issue 14: F2's launch
            self._primary = self.endpoints.adopt(conn)
        return conn.status

    def history(self) -> list[Said]:
        return [said(m) for m in self.session.messages if m.role in ("user", "assistant")]

    async def close(self) -> None:
        """Save the session's slot, close the client; stop the daemon this app launched (after
        saving every session's slot) unless told to keep it."""
        conn = self.keeper.conn
        if conn is None:
            return
        try:
            await self.keeper.leave()
            if stops_on_exit(self.settings, conn):
                await self.keeper.save_others()
        finally:
            self.keeper.detach()
            try:
                await release(self.settings, self.paths, conn)
            finally:  # issue 14: the first connection and the endpoints' clients
                await endpoint_turns.close(self, self._primary, conn)

    # --- Backend: sessions and the server ------------------------------------------------------

    async def switch_session(self, resume: str | None) -> str | None:
        """Leave the current session (saving its slot) and open another (None: a new one)."""
        return await self.keeper.switch(self._open_session(resume))

    async def new_session(self) -> str | None:
        return await self.switch_session(None)

    async def open_session(self, session_id: str) -> str | None:
        return await self.switch_session(session_id)

    def sessions(self) -> SessionCatalog:
        return self.store

    def current_session_id(self) -> str | None:
        return self.session.id

    def slot_view(self) -> SlotView:
        if self.endpoints is not None:  # issue 14: every endpoint's slots, grouped
            return endpoint_turns.slot_view(self)
        return self.keeper

    async def died_of_sigill(self) -> bool:
        primary, conn = self._primary, self.conn  # issue 14: the managed one is the first
        found = await sigill_after_serving(self.settings, self.paths, primary)
        if not found and conn is not primary:
            found = await sigill_after_serving(self.settings, self.paths, conn)
        return found

    async def stop_server(self) -> str | None:
        """Save every session's slot, then stop the managed daemon (never an external one).
        With several endpoints and the session on a remote one: only the managed server here
        is stopped, and the sentence says so (the session keeps its endpoint)."""
        said = await endpoint_turns.stop_managed(self)  # issue 14
        if said is not None:
            return said
        conn = self.keeper.conn
        if conn is None or conn.record is None:
            raise Unavailable("this server was not launched by fusion-tui; it is not ours to stop")
        await self.keeper.leave()
        await self.keeper.save_others()
        self.keeper.detach()
        await conn.client.aclose()
        await make_daemon(self.settings, self.paths).stop()
        return None

    def chat_messages(self) -> list[dict[str, str]]:
        """The request's messages: a fixed system prompt, then the transcript, append-only."""
        out = [{"role": "system", "content": SYSTEM_PROMPT}]
        out += [
            {"role": m.role, "content": m.content}
            for m in self.session.messages
            if m.role in ("user", "assistant") and m.content
        ]
        return out

    # --- turns ---------------------------------------------------------------------------------

    async def reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        """The turn, with side calls held off (`SideCallQueue`): a running title is cut short
        and rerun after it, so it never competes with the turn's first token."""
        async with self.side_calls.turn(), aclosing(self._reply(text)) as events:
            async for event in events:
                yield event

    async def _reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        keeper = self.keeper
        if keeper.conn is None or keeper.gate is None:
            raise ServerError("the server is not connected yet")
        session = self.session
        session.begin_turn(text, clock=self.wall_clock)
        answer: list[str] = []
        outcome: Outcome = "cancelled"
        detail = "cancelled"
        try:
            placed: tuple[int, list[ReplyEvent]] | None = None
            if self.endpoints is not None:  # issue 14: the session's endpoint, and why
                placed = await endpoint_turns.before_turn(self)
                for shown in placed[1]:
                    yield shown
            for note in await keeper.warm_resume():
                yield Notice(note)
            slot = await keeper.next_slot() if placed is None else placed[0]
            for note in keeper.take_notes():
                yield Notice(note)
            content, compacted = await self._content()
            if compacted is not None:
                yield compacted
            retried = moved_once = False
            while True:
                got = _Flag()
                try:
                    # aclosing: a cancelled turn must release the slot's lock in this task
                    async with aclosing(self._attempt(slot, got, content)) as events:
                        async for event in events:
                            if isinstance(event, TextDelta):
                                answer.append(event.text)
                            yield event
                    break
                except (*NO_DATA, StreamStalled) as exc:
                    # issue 14: no answer, or the stream broke mid-answer: its endpoint may be
                    # gone; then the turn is sent again elsewhere (once), the partial answer
                    # dropped. One endpoint, or a healthy one: as before.
                    if self.endpoints is not None and not moved_once:
                        moved = await endpoint_turns.after_no_data(self)
                        if moved is not None:
                            moved_once, slot = True, moved[0]
                            if got.data:
                                answer.clear()
                                yield AnswerRestarted(endpoint_turns.restart_note(self))
                            for shown in moved[1]:
                                yield shown
                            continue
                    if got.data or retried or not isinstance(exc, NO_DATA):
                        raise
                    retried = True
                    where = f"slot {slot}" if slot >= 0 else "the slot the server picks"
                    yield Notice(f"no data from llama-server ({exc}); retrying once on {where}")
            outcome, detail = (
                "completed",
                endpoint_turns.cost_note(self, cost_note(self.session, self.keeper.take_resume())),
            )
        except StreamStalled as exc:
            outcome, detail = "error", stall_message(exc, self.settings)
            yield ReplyDone("error", note=f"error · {detail}", partial=True)
            return
        except ContextExceeded as exc:
            outcome, detail = "error", context_full_message(exc)
            yield ReplyDone("error", note=f"error · {detail}", partial=True)
            return
        except ServerError as exc:
            outcome, detail = "error", str(exc)
            yield ReplyDone("error", note=f"error · {exc}", partial=True)
            return
        finally:
            self._finish_turn("".join(answer), outcome, detail)
        yield ReplyDone("completed", note=detail)
        await keeper.save_ahead()  # after the answer, off every first token (crowded slots)

    def _open_stream(self, body: dict[str, Any]) -> AsyncGenerator[StreamEvent, None]:
        """The HTTP stream of one request: native `/completion` for a `prompt`, else the chat
        endpoint (tests swap the endpoint)."""
        assert self.conn is not None
        idle = self.settings.local_models.request_timeout_ms / 1000
        if "prompt" in body:
            return self.conn.client.stream_completion(body, idle_timeout=idle)
        return self.conn.client.stream_chat(body, idle_timeout=idle)

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
        frame = await self._frame()
        if frame is None:
            return {"messages": self.chat_messages()}, None
        assert self.conn is not None
        n_ctx, n_predict = self.conn.props.n_ctx, self.settings.llm.max_tokens
        own = self._title_slot()  # the session's slot, where prefix reuse is `full`

        async def on_own_slot(body: dict[str, Any]) -> str:
            return await self._side_call(body, slot=own)

        compactor = Compactor(
            frame, SYSTEM_PROMPT, self._count, self._side_call, n_ctx,
            reply_reserve(n_ctx, n_predict), min(SUMMARY_TOKENS, n_predict),
            own_call=on_own_slot if own is not None else None,
        )  # fmt: skip
        prompt, compacted = await compactor.prompt_for(self.store, self.session, force=force)
        return {"prompt": prompt}, compacted

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

    async def _attempt(
        self, slot: int, got: _Flag, content: dict[str, Any]
    ) -> AsyncGenerator[ReplyEvent, None]:
        """One request on `slot`: gate, stream with the first-token watch, progress, record."""
        gate, totals = self.keeper.gate, self.keeper.live_totals
        assert gate is not None
        if slot >= 0 and gate.is_held(slot):
            yield Notice(waiting_message(slot))
        async with gate.hold(slot) as lease:
            started = self.clock.now()
            first: float | None = None
            tracker = ProgressTracker()
            try:
                async with aclosing(self._open_stream(self._body(lease.slot, content))) as events:
                    it = events.__aiter__()
                    event = await self._first_event(it, lease.slot)
                    if event is None:
                        raise ProtocolError(
                            "llama-server closed the stream without sending anything"
                        )
                    while event is not None:
                        got.data = True
                        if isinstance(event, TextDelta):
                            first = self.clock.now() if first is None else first
                            yield event
                        elif isinstance(event, PromptProgress):
                            if lease.slot >= 0:
                                totals[lease.slot] = event.total
                            yield event
                            p = tracker.on_event(event)
                            yield Progress(
                                p.processed, p.total, p.cache, p.tokens_per_second, p.eta_s
                            )
                        elif isinstance(event, StreamEnd):
                            ttft = ((first or self.clock.now()) - started) * 1000
                            self._record_request(event, ttft)
                            yield event
                        event = await anext(it, None)
            finally:
                totals.pop(lease.slot, None)

    async def _first_event(self, it: AsyncIterator[StreamEvent], slot: int) -> StreamEvent | None:
        assert self.conn is not None
        config = watch_config(self.settings)
        return await first_event(it, self.conn.client.slots, slot, config, self.clock)

    def _body(self, slot: int, content: dict[str, Any]) -> dict[str, Any]:
        return {
            **content,
            "id_slot": slot,
            "cache_prompt": True,
            "return_progress": True,
            "n_predict": self.settings.llm.max_tokens,
            "temperature": self.settings.llm.temperature,
        }

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

    async def _side_call(self, body: dict[str, Any], slot: int | None = None) -> str:
        """One side call (title, summary); its text. `slot` None: a slot no session holds
        (`SlotKeeper.side_slot_for`), else the one named (the session's own, for a title that
        continues its prompt)."""
        gate = self.keeper.gate
        assert gate is not None
        side = self.keeper.side_slot_for() if slot is None else slot
        assert side is not None
        pieces: list[str] = []
        async with gate.hold(side) as lease:
            started = self.clock.now()
            first_at: float | None = None
            request = {**body, "cache_prompt": True, "id_slot": lease.slot}
            async with aclosing(self._open_stream(request)) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        first_at = self.clock.now() if first_at is None else first_at
                        pieces.append(event.text)
                    elif isinstance(event, StreamEnd):
                        ttft = ((first_at or self.clock.now()) - started) * 1000
                        self._record_request(event, ttft, side=True)
        return "".join(pieces)

    # --- records -------------------------------------------------------------------------------

    def _record_request(self, end: StreamEnd, ttft_ms: float, *, side: bool = False) -> None:
        t = end.timings
        if not side:
            self.keeper.pin_answer(end.id_slot)
            self.keeper.measured_prompt(t.prompt_n, t.prompt_per_second)
        self.session.record_request(
            id_slot=end.id_slot,
            prompt_n=t.prompt_n,
            cache_n=t.cache_n,
            ttft_ms=ttft_ms,
            predicted_per_second=t.predicted_per_second,
            side_call=side,
            clock=self.wall_clock,
        )
        endpoint_turns.after_request(self, end, side=side)  # issue 14: endpoint, moved_from

    def _finish_turn(self, answer: str, outcome: Outcome, detail: str) -> None:
        self.session.end_turn(outcome, answer, detail, self.wall_clock)
        self._save()

    def _save(self) -> None:
        self.save_error = self.store.try_save(self.session)
