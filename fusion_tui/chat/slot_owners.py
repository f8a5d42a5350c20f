"""Provides `SlotOwners`, the base of `SlotKeeper`: who holds which slot, and the slot map's view.

Why a base of its own: the keeper's parts (this, `slot_room.SlotRoom`, the keeper) share one
state — the connection's pool, gate, archive and shared ledger, the current session, the side
slot — and every part asks who holds a slot: the shared ledger (`_holders`), the stored sessions
pinned on this launch (`known_owners`). The slot map reads it as its `SlotView` (the slots, their
owners, the prompt totals in flight, the sessions whose slot lives on disk only).
"""

from __future__ import annotations

from fusion_tui.chat.warm import server_facts
from fusion_tui.server.connect import Connection
from fusion_tui.server.errors import ServerError
from fusion_tui.server.types import SlotState
from fusion_tui.sessions.model import Session
from fusion_tui.sessions.store import SessionStore, SessionStoreError
from fusion_tui.slots.archive import (
    DEFAULT_MAX_BYTES,
    ArchiveRefused,
    ServerFacts,
    SlotArchive,
    owners_by_slot,
)
from fusion_tui.slots.gate import SlotGate
from fusion_tui.slots.pins import SlotPool
from fusion_tui.slots.room import SlotLedger


class SlotOwners:
    def __init__(
        self, store: SessionStore, session: Session, *, archive_max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self.store = store
        self.session = session
        """The session being talked to now (the backend's current one)."""
        self.archive_max_bytes = archive_max_bytes
        self.pool = SlotPool()
        self.conn: Connection | None = None
        self.gate: SlotGate | None = None
        self.archive: SlotArchive | None = None
        self.ledger: SlotLedger | None = None
        """Which session each slot of the launch holds, shared by every process."""
        self.side_slot: int | None = None
        """The slot the last side call (title) used, shown as "side" on the slot map."""
        self.live_totals: dict[int, int] = {}
        """Prompt length of the request in flight per slot."""
        self._titles: dict[str, str] = {}

    def _holders(self) -> dict[int, str]:
        if self.ledger is None or self.conn is None:
            return {}
        return {s: h.session_id for s, h in self.ledger.holders(self.conn.launch_id).items()}

    def known_owners(self, limit: int = 64) -> dict[int, str]:
        """Slot → session id for stored sessions that most likely hold a slot on this launch:
        the shared ledger's word where there is one (every process writes it when a session is
        answered: one small file, where scanning the store parses every session file on a
        turn's first-token path), else the stored sessions' own pins."""
        if self.conn is None:
            return {}
        if self.ledger is not None:
            return self._holders()
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

    def _title(self, session_id: str) -> str:
        title = self._titles.get(session_id)
        if title is None:
            try:
                title = self.store.load(session_id).title or session_id
            except (SessionStoreError, ValueError):
                title = session_id
            self._titles[session_id] = title
        return title

    # --- SlotView ------------------------------------------------------------------------------

    async def slots(self) -> list[SlotState]:
        if self.conn is None:
            raise ServerError("the server is not connected yet")
        return await self.conn.client.slots()

    def slot_owners(self) -> dict[int, str]:
        """Slot id → who holds it, for the slot map: this session's title, another session's
        (the shared ledger), or "side"."""
        holders = self._holders()
        owners = {s: self._title(sid) for s, sid in holders.items() if sid != self.session.id}
        if self.side_slot is not None:
            owners[self.side_slot] = "side"
        slot = self.pool.pins.get(self.session.id)
        if slot is not None and holders.get(slot, self.session.id) == self.session.id:
            owners[slot] = self.session.title or "this session"
        return owners

    def sessions_on_disk(self) -> list[str]:
        """Titles of sessions with a saved slot that no slot holds now and that this server
        could restore, newest first: a slot saved with another model (or slot context, or KV
        types) stays in the folder for when that model serves again, but is not this server's."""
        if self.archive is None or self.conn is None:
            return []
        in_slot = set(self._holders().values()) | {self.session.id}
        facts = server_facts(self.conn)
        ids = [
            sid
            for sid, _t, _b in reversed(self.archive.entries())
            if sid not in in_slot and self._fits(sid, facts)
        ]
        return [self._title(sid) for sid in ids[:8]]

    def _fits(self, session_id: str, facts: ServerFacts) -> bool:
        assert self.archive is not None
        try:
            self.archive.check(session_id, facts)
        except ArchiveRefused:
            return False
        return True

    def prompt_totals(self) -> dict[int, int]:
        return dict(self.live_totals)

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
