"""Provides `SessionHooks`: what the main screen asks a local backend besides turns: leaving and
switching sessions (saving the slot first), the slot map's owners and totals, stopping the daemon.

A mixin of `LocalBackend`, kept apart so each file stays small; it only reads the backend's state.
"""

from __future__ import annotations

import anyio

from fusion_tui.chat.warm import SAVE_DEADLINE, save_sessions_before_stop, server_facts
from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.runtime import Connection, make_daemon
from fusion_tui.server.errors import ServerError
from fusion_tui.server.types import SlotState
from fusion_tui.sessions.model import Session
from fusion_tui.sessions.store import SessionStore, SessionStoreError
from fusion_tui.slots.archive import SlotArchive, owners_by_slot
from fusion_tui.slots.gate import SlotGate
from fusion_tui.slots.pins import SlotPool


class SessionHooks:
    settings: Settings
    paths: AppPaths
    conn: Connection | None
    gate: SlotGate | None
    archive: SlotArchive | None
    pool: SlotPool
    store: SessionStore
    session: Session
    _side_slot: int | None
    _live_totals: dict[int, int]

    def _open_session(self, resume: str | None) -> Session:
        raise NotImplementedError

    def _reset_resume(self) -> None:
        raise NotImplementedError

    async def leave(self) -> str | None:
        """Save the session's slot to disk (it is being left); a note on what happened."""
        conn, slot = self.conn, self.pool.pins.get(self.session.id)
        if conn is None or self.archive is None or self.gate is None or slot is None:
            return None
        note = f"could not save slot {slot} in time"
        with anyio.move_on_after(SAVE_DEADLINE):
            try:
                async with self.gate.hold(slot):
                    tag = await self.archive.save(
                        conn.client, slot, self.session.id, server_facts(conn)
                    )
                note = f"saved slot {slot} ({tag.n_saved:,} tokens) for a warm resume"
            except (ServerError, OSError) as exc:
                note = f"could not save slot {slot}: {exc}"
        return note

    async def switch_session(self, resume: str | None) -> str | None:
        """Leave the current session (saving its slot) and open another (None: a new one)."""
        note = await self.leave()
        self.pool.unpin(self.session.id)
        self.session = self._open_session(resume)
        self._reset_resume()
        return note

    # --- what the main screen asks (all optional on a Backend) ---------------------------------

    async def slots(self) -> list[SlotState]:
        if self.conn is None:
            raise ServerError("the server is not connected yet")
        return await self.conn.client.slots()

    def slot_owners(self) -> dict[int, str]:
        """Slot id → who holds it, for the slot map: this session's title, or "side"."""
        owners = {} if self._side_slot is None else {self._side_slot: "side"}
        slot = self.pool.pins.get(self.session.id)
        if slot is not None:
            owners[slot] = self.session.title or "this session"
        return owners

    def prompt_totals(self) -> dict[int, int]:
        """Prompt length of the request in flight per slot (the slot map's progress total)."""
        return dict(self._live_totals)

    def session_on_slot(self, slot: int) -> str | None:
        """The session that most likely holds `slot` on this server (this one first)."""
        if self.pool.pins.get(self.session.id) == slot:
            return self.session.id
        if self.conn is None:
            return None
        entries = [e for e in self.store.list() if e.ok and e.pinned_slot == slot]
        for entry in sorted(entries, key=lambda e: -e.updated):
            try:
                s = self.store.load(entry.id)
            except (SessionStoreError, ValueError):
                continue
            if s.server is not None and s.server.launch_id == self.conn.launch_id:
                return s.id
        return None

    def known_owners(self, limit: int = 64) -> dict[int, str]:
        """Slot → session id for stored sessions that most likely hold a slot on this launch."""
        if self.conn is None:
            return {}
        rows = []
        entries = [e for e in self.store.list() if e.ok and e.pinned_slot is not None]
        for entry in sorted(entries, key=lambda e: -e.updated)[:limit]:
            try:
                s = self.store.load(entry.id)
            except (SessionStoreError, ValueError):
                continue
            launch = s.server.launch_id if s.server is not None else None
            rows.append((s.id, s.pinned_slot, launch, s.updated))
        return owners_by_slot(rows, self.conn.launch_id, self.pool.total_slots)

    async def new_session(self) -> str | None:
        return await self.switch_session(None)

    async def open_session(self, session_id: str) -> str | None:
        return await self.switch_session(session_id)

    async def stop_server(self) -> None:
        """Save every session's slot, then stop the managed daemon (never an external one)."""
        conn = self.conn
        if conn is None or conn.record is None:
            raise ServerError("this server was not launched by fusion-tui; it is not ours to stop")
        await self.leave()
        if self.archive is not None:
            facts = server_facts(conn)
            await save_sessions_before_stop(
                conn.client,
                self.archive,
                self.store,
                facts,
                self.pool.total_slots,
                skip=frozenset({self.session.id}),
            )
        self.conn = None
        await conn.client.aclose()
        await make_daemon(self.settings, self.paths).stop()
