"""Provides `SlotOwners`, a part of `SlotKeeper`: who holds which slot, and the slot map's view.

Why a part of its own: every part of the keeper (this, `keeper_room.SlotRoom`, the keeper) asks
who holds a slot: the shared ledger (`holders`), the stored sessions pinned on this launch
(`known_owners`). The slot map reads it, through the keeper, as its `SlotView` (the slots, their
owners, the prompt totals in flight, the sessions whose slot lives on disk only). It reads the
keeper's state (`KeeperState`) and changes none of it.
"""

from __future__ import annotations

from typing import Protocol

from fusion_tui.server.connect import Connection
from fusion_tui.server.errors import ServerError
from fusion_tui.server.types import SlotState
from fusion_tui.sessions.model import Session
from fusion_tui.sessions.store import SessionStore, SessionStoreError
from fusion_tui.slots.archive import (
    ArchiveRefused,
    ServerFacts,
    SlotArchive,
    owners_by_slot,
)
from fusion_tui.slots.gate import SlotGate
from fusion_tui.slots.pins import SlotPool
from fusion_tui.slots.room import SlotLedger
from fusion_tui.slots.saving import server_facts


class KeeperState(Protocol):
    """What the keeper's parts read of it (`SlotKeeper` holds it; `attach` sets most of it)."""

    store: SessionStore
    session: Session
    """The session being talked to now (the backend's current one)."""
    pool: SlotPool
    conn: Connection | None
    gate: SlotGate | None
    archive: SlotArchive | None
    ledger: SlotLedger | None
    """Which session each slot of the launch holds, shared by every process."""
    side_slot: int | None
    """The slot the last side call (title) used, shown as "side" on the slot map."""
    live_totals: dict[int, int]
    """Prompt length of the request in flight per slot."""


class SlotOwners:
    def __init__(self, state: KeeperState) -> None:
        self.state = state
        self._titles: dict[str, str] = {}

    def holders(self) -> dict[int, str]:
        """Slot → session id, as the shared ledger has it for this launch."""
        ledger, conn = self.state.ledger, self.state.conn
        if ledger is None or conn is None:
            return {}
        return {s: h.session_id for s, h in ledger.holders(conn.launch_id).items()}

    def known_owners(self, limit: int = 64) -> dict[int, str]:
        """Slot → session id for stored sessions that most likely hold a slot on this launch:
        the shared ledger's word where there is one (every process writes it when a session is
        answered: one small file, where scanning the store parses every session file on a
        turn's first-token path), else the stored sessions' own pins."""
        state = self.state
        if state.conn is None:
            return {}
        if state.ledger is not None:
            return self.holders()
        rows = []
        entries = [e for e in state.store.list() if e.ok and e.pinned_slot is not None]
        for entry in sorted(entries, key=lambda e: -e.updated)[:limit]:
            try:
                s = state.store.load(entry.id)
            except (SessionStoreError, ValueError):
                continue
            launch = s.server.launch_id if s.server is not None else None
            rows.append((s.id, s.pinned_slot, launch, s.updated))
        return owners_by_slot(rows, state.conn.launch_id, state.pool.total_slots)

    def title(self, session_id: str) -> str:
        """A session's title for the slot map (read once from its file), else its id."""
        title = self._titles.get(session_id)
        if title is None:
            try:
                title = self.state.store.load(session_id).title or session_id
            except (SessionStoreError, ValueError):
                title = session_id
            self._titles[session_id] = title
        return title

    # --- SlotView ------------------------------------------------------------------------------

    async def slots(self) -> list[SlotState]:
        conn = self.state.conn
        if conn is None:
            raise ServerError("the server is not connected yet")
        return await conn.client.slots()

    def slot_owners(self) -> dict[int, str]:
        """Slot id → who holds it, for the slot map: this session's title, another session's
        (the shared ledger), or "side"."""
        state, holders = self.state, self.holders()
        me = state.session
        owners = {s: self.title(sid) for s, sid in holders.items() if sid != me.id}
        if state.side_slot is not None:
            owners[state.side_slot] = "side"
        slot = state.pool.pins.get(me.id)
        if slot is not None and holders.get(slot, me.id) == me.id:
            owners[slot] = me.title or "this session"
        return owners

    def sessions_on_disk(self) -> list[str]:
        """Titles of sessions with a saved slot that no slot holds now and that this server
        could restore, newest first: a slot saved with another model (or slot context, or KV
        types) stays in the folder for when that model serves again, but is not this server's."""
        archive, conn = self.state.archive, self.state.conn
        if archive is None or conn is None:
            return []
        in_slot = set(self.holders().values()) | {self.state.session.id}
        facts = server_facts(conn)
        ids = [
            sid
            for sid, _t, _b in reversed(archive.entries())
            if sid not in in_slot and self._fits(archive, sid, facts)
        ]
        return [self.title(sid) for sid in ids[:8]]

    @staticmethod
    def _fits(archive: SlotArchive, session_id: str, facts: ServerFacts) -> bool:
        try:
            archive.check(session_id, facts)
        except ArchiveRefused:
            return False
        return True

    def prompt_totals(self) -> dict[int, int]:
        return dict(self.state.live_totals)

    def session_on_slot(self, slot: int) -> str | None:
        """The session that most likely holds `slot` on this server (this one first)."""
        state = self.state
        if state.pool.pins.get(state.session.id) == slot:
            return state.session.id
        if state.conn is None:
            return None
        entries = [e for e in state.store.list() if e.ok and e.pinned_slot == slot]
        for entry in sorted(entries, key=lambda e: -e.updated):
            try:
                s = state.store.load(entry.id)
            except (SessionStoreError, ValueError):
                continue
            if s.server is not None and s.server.launch_id == state.conn.launch_id:
                return s.id
        return None
