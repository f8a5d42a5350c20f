"""Provides `LocalBackend`: the TUI's plain chat, turns of one session against a (managed or
external) server. (`fusion-tui run` and agent mode run turns through `agent.session_run`.)

Each turn rides the session's slot, one request in flight per slot; which slot, and how a resumed
session gets its prompt back, is the `SlotKeeper`'s business. The session is saved atomically after
every turn, also a cancelled or failed one.

Until the first byte, `watch_first_token` polls `/slots` next to the stream; a request that got
no data at all (lost, stalled, connection dropped) is retried once on the same slot. The backend
is built from collaborators, each with one job: one request (the stream, its watch, its record)
is the `RequestRunner`'s (`request_runner.py`); what a turn asks, compacted when it would not
fit, is the `TurnContent`'s, the read-ahead at the first keystroke the `ReadAhead`'s
(`turn_content.py`); the title side call is the `Titler`'s (`titles.py`). The turn itself, its
retry and its bookkeeping stay here.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import Any

from fusion_tui.chat import endpoint_turns, server_stop
from fusion_tui.chat.backend import (
    Said,
    SessionCatalog,
    SlotView,
    StatusCallback,
    said,
)
from fusion_tui.chat.chat_prompt import answer_as_held
from fusion_tui.chat.events import AnswerRestarted, Compacted, Notice, ReplyDone, ReplyEvent
from fusion_tui.chat.notes import context_full_message, cost_note, stall_message
from fusion_tui.chat.request_runner import NO_DATA, GotData, RequestRunner
from fusion_tui.chat.titles import Titler
from fusion_tui.chat.turn_content import SYSTEM_PROMPT, ReadAhead, TurnContent
from fusion_tui.clock import REAL_CLOCK, Clock
from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection, connect, release, stops_on_exit
from fusion_tui.server.errors import ContextExceeded, ServerError, StreamStalled
from fusion_tui.server.sigill_recovery import sigill_after_serving
from fusion_tui.server.types import StreamEnd, StreamEvent, TextDelta
from fusion_tui.sessions.model import Outcome, Session, WallClock
from fusion_tui.sessions.store import SessionStore
from fusion_tui.slots.archive import DEFAULT_MAX_BYTES
from fusion_tui.slots.keeper import SlotKeeper
from fusion_tui.slots.pins import SlotPool
from fusion_tui.slots.side_calls import SideCallQueue
from fusion_tui.status import ServerStatus

Connector = Callable[..., Awaitable[Connection]]


class LocalBackend:
    """The real backend of the TUI's plain chat (its requests: `RequestRunner`; what it asks:
    `TurnContent`; the read-ahead: `ReadAhead`; the title: `Titler`)."""

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
        # several endpoints (None with one: the single-server app, unchanged)
        self.endpoints = endpoint_turns.endpoint_pins_for(settings)
        self.endpoint_turn: endpoint_turns.TurnRoute | None = None
        self.ask_failover: endpoint_turns.FailoverAsk | None = None
        """Asked before a session moves to another endpoint (the TUI); None: move."""
        self._primary: Connection | None = None
        self.requests = RequestRunner(
            settings, self.keeper, self._open_stream,
            lambda end, side: endpoint_turns.after_request(self, end, side=side),
            clock=clock, wall_clock=wall_clock,
        )  # fmt: skip
        self.content = TurnContent(settings, self.store, self.keeper, self.requests.side_call)
        self.ahead = ReadAhead(self.store, self.keeper, self.content, self.requests.side_call)
        self.titler = Titler(
            self.store, self.keeper, self.side_calls,
            frame=self.content.frame, own_slot=self.content.own_slot,
            side_call=self.requests.side_call, save=self._save, system=SYSTEM_PROMPT,
        )  # fmt: skip

    @property
    def session(self) -> Session:
        return self.keeper.session

    @property
    def conn(self) -> Connection | None:
        return self.keeper.conn

    @property
    def pool(self) -> SlotPool:
        return self.keeper.pool

    def _open_stream(self, body: dict[str, Any]) -> AsyncGenerator[StreamEvent, None]:
        """The HTTP stream of one request: native `/completion` for a `prompt`, else the chat
        endpoint (tests swap the endpoint)."""
        assert self.conn is not None
        idle = self.settings.local_models.request_timeout_ms / 1000
        if "prompt" in body:
            return self.conn.client.stream_completion(body, idle_timeout=idle)
        return self.conn.client.stream_chat(body, idle_timeout=idle)

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
        connector = endpoint_turns.connector(self)  # several endpoints
        conn = await connector(self.settings, self.paths, report, model=self.model)
        return await self.adopt(conn)

    async def adopt(self, conn: Connection) -> ServerStatus:
        """Take over a connection made elsewhere (the launch wizard) instead of connecting."""
        self.keeper.attach(conn)
        if self.endpoints is not None and conn is not self._primary:  # F2's launch
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
            finally:  # the first connection and the endpoints' clients
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
        if self.endpoints is not None:  # every endpoint's slots, grouped
            return endpoint_turns.slot_view(self)
        return self.keeper

    async def died_of_sigill(self) -> bool:
        primary, conn = self._primary, self.conn  # the managed one is the first
        found = await sigill_after_serving(self.settings, self.paths, primary)
        if not found and conn is not primary:
            found = await sigill_after_serving(self.settings, self.paths, conn)
        return found

    async def stop_server(self) -> str | None:
        """Save every session's slot, then stop the managed daemon (never an external one).
        With several endpoints and the session on a remote one: only the managed server here
        is stopped, and the sentence says so (the session keeps its endpoint)."""
        said = await endpoint_turns.stop_managed(self)  # several endpoints
        if said is not None:
            return said
        await server_stop.stop_own_daemon(self.keeper, self.settings, self.paths)
        return None

    # --- what a turn asks, the read-ahead, the title ---------------------------------------------

    def chat_messages(self) -> list[dict[str, str]]:
        return self.content.chat_messages()

    async def compact(self) -> str | None:
        return await self.content.compact()

    def compact_ahead(self) -> AsyncGenerator[Notice, None]:
        return self.content.compact_ahead()

    async def read_ahead(self) -> None:
        await self.ahead.read_ahead(several_endpoints=self.endpoints is not None)

    async def make_title(self) -> str | None:
        return await self.titler.make_title()

    # --- turns ---------------------------------------------------------------------------------

    async def reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        """The turn, with side calls held off (`SideCallQueue`): a running title is cut short
        and rerun after it, so it never competes with the turn's first token. After a completed
        turn (its `ReplyDone`), the session compacts ahead when the next turn would not fit
        (`compact_ahead`); closing the events there cuts that short, and the next turn
        compacts before its request instead."""
        completed = False
        async with self.side_calls.turn(), aclosing(self._reply(text)) as events:
            async for event in events:
                completed = isinstance(event, ReplyDone) and event.outcome == "completed"
                yield event
        if completed:
            async with aclosing(self.compact_ahead()) as after:
                async for notice in after:
                    yield notice

    async def _fitted_content(self) -> tuple[dict[str, Any], Compacted | None]:
        """The request's content (`_content`), and with several endpoints, on an endpoint the
        session moved to, measured against its slot (`MovedTooLarge` when it cannot fit)."""
        content, compacted = await self.content.content()
        if self.endpoints is not None:  # several endpoints
            await endpoint_turns.check_fit(self, content)
        return content, compacted

    async def _reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        keeper = self.keeper
        if keeper.conn is None or keeper.gate is None:
            raise ServerError("the server is not connected yet")
        session = self.session
        session.begin_turn(text, clock=self.wall_clock)
        answer: list[TextDelta] = []
        stop_type = ""  # how the answer's request ended (`answer_as_held`)
        outcome: Outcome = "cancelled"
        detail = "cancelled"
        slot, got = -1, GotData()
        try:
            placed: tuple[int, list[ReplyEvent]] | None = None
            if self.endpoints is not None:  # the session's endpoint, and why
                placed = await endpoint_turns.before_turn(self)
                for shown in placed[1]:
                    yield shown
            self.ahead.take_over()  # reading ahead: the turn takes over from it
            async with self.ahead.lock:  # a read-ahead (the first keystroke) finishes first
                notes = [*self.ahead.take_notes(), *await keeper.warm_resume()]
                slot = await keeper.next_slot() if placed is None else placed[0]
            for note in [*notes, *keeper.take_notes()]:
                yield Notice(note)
            content, compacted = await self._fitted_content()
            if compacted is not None:
                yield compacted
            retried = moved_once = False
            while True:
                got = GotData()
                try:
                    # aclosing: a cancelled turn must release the slot's lock in this task
                    async with aclosing(self.requests.attempt(slot, got, content)) as events:
                        async for event in events:
                            if isinstance(event, TextDelta):
                                answer.append(event)
                            elif isinstance(event, StreamEnd):
                                stop_type = event.stop_type
                            yield event
                    break
                except (*NO_DATA, StreamStalled) as exc:
                    # several endpoints: no answer, or the stream broke mid-answer: its endpoint
                    # may be gone; then the turn is sent again elsewhere (once), the partial answer
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
                            # the prompt again for the new endpoint's slot (it may be smaller)
                            content, compacted = await self._fitted_content()
                            if compacted is not None:
                                yield compacted
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
            if outcome == "cancelled" and got.data:
                keeper.pin_cut_turn(slot)
            self._finish_turn(answer_as_held(answer, stop_type), outcome, detail)
        yield ReplyDone("completed", note=detail)
        await keeper.save_ahead()  # after the answer, off every first token (crowded slots)

    def _finish_turn(self, answer: str, outcome: Outcome, detail: str) -> None:
        self.session.end_turn(outcome, answer, detail, self.wall_clock)
        self._save()

    def _save(self) -> None:
        self.save_error = self.store.try_save(self.session)
