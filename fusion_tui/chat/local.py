"""Provides `LocalBackend`: the TUI's plain chat, turns of one session against a (managed or
external) server. (`fusion-tui run` and agent mode run turns through `agent.session_run`.)

Each turn rides the session's slot, one request in flight per slot; which slot, and how a resumed
session gets its prompt back, is the `SlotKeeper`'s business. The session is saved atomically after
every turn, also a cancelled or failed one.

Until the first byte, `watch_first_token` polls `/slots` next to the stream; a request that got
no data at all (lost, stalled, connection dropped) is retried once on the same slot. One request
(the stream, its watch, its record) is the base `local_requests.LocalRequests`' part; what it asks
(compacted when it would not fit) and the title side call, `local_side_calls.LocalSideCalls`'.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import Any

import anyio

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
from fusion_tui.chat.local_requests import NO_DATA, GotData
from fusion_tui.chat.local_side_calls import LocalSideCalls
from fusion_tui.chat.notes import context_full_message, cost_note, stall_message
from fusion_tui.chat.slot_keeper import SlotKeeper
from fusion_tui.clock import REAL_CLOCK, Clock
from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection, connect, release, stops_on_exit
from fusion_tui.server.errors import ContextExceeded, ServerError, StreamStalled
from fusion_tui.server.sigill_recovery import sigill_after_serving
from fusion_tui.server.types import StreamEnd, TextDelta
from fusion_tui.sessions.model import Outcome, Session, WallClock
from fusion_tui.sessions.store import SessionStore
from fusion_tui.slots.archive import DEFAULT_MAX_BYTES
from fusion_tui.slots.side_calls import SideCallQueue
from fusion_tui.status import ServerStatus

Connector = Callable[..., Awaitable[Connection]]


class LocalBackend(LocalSideCalls):
    """The real backend of the TUI's plain chat (its requests: `LocalRequests`; what it asks and
    its side calls: `LocalSideCalls`)."""

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
        self.save_error = None
        """The last save failure, shown to the user; the session stays in memory."""
        # several endpoints (None with one: the single-server app, unchanged)
        self.endpoints = endpoint_turns.endpoint_pins_for(settings)
        self.endpoint_turn = None
        self.ask_failover = None
        """Asked before a session moves to another endpoint (the TUI); None: move."""
        self._primary: Connection | None = None
        self._turn_lock = anyio.Lock()
        self._ahead_key = None
        self._ahead_notes = []
        self._ahead_scope = None

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
        content, compacted = await self._content()
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
            if self._ahead_scope is not None:  # reading ahead: the turn takes over from it
                self._ahead_scope.cancel()
            async with self._turn_lock:  # a read-ahead (the first keystroke) finishes first
                notes, self._ahead_notes = [*self._ahead_notes, *await keeper.warm_resume()], []
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
                    async with aclosing(self._attempt(slot, got, content)) as events:
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
