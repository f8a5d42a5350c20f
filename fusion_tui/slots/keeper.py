"""Provides `SlotKeeper`: which server slot the current session rides and how it comes back.

One object a backend holds (not a mixin): the connection's slot pool, per-slot gate and slot
archive, and the current session's slot story.
- A brand-new session takes an empty slot no known session holds (`fresh_slot`, else `-1`): with
  `-1` a shared system prompt can pass the server's similarity threshold and evict a short session.
- Warm resume: on the same server the first request goes `-1` and lands on the slot still holding
  the prompt; on a new daemon the session's saved slot file is restored into a free slot and pinned
  (refused, with the reason, when the model, context or cache types changed).
- Leaving a session (switch, exit, stop) saves its slot to disk first.
It holds the state and two parts that read it: `keeper_owners.SlotOwners` (who holds which
slot: the slot map's `SlotView`, which the keeper answers for) and `keeper_room.SlotRoom` (more
sessions than slots: room, saves ahead, restores, a shared prefix seeded). Why in `slots/`: the
plain chat, agent mode and `fusion-tui run` all use it, so it sits below all of them.
"""

from __future__ import annotations

import anyio

from fusion_tui.server.connect import Connection
from fusion_tui.server.errors import ServerError
from fusion_tui.server.types import SlotState
from fusion_tui.sessions.model import ServerIdentity, Session
from fusion_tui.sessions.store import SessionStore
from fusion_tui.slots.archive import (
    DEFAULT_MAX_BYTES,
    ArchiveRefused,
    SlotArchive,
    choose_fresh_slot,
)
from fusion_tui.slots.gate import SlotGate
from fusion_tui.slots.keeper_owners import SlotOwners
from fusion_tui.slots.keeper_room import RESTORE_NOT_REUSED, ResumeState, SlotRoom
from fusion_tui.slots.pins import SlotPool
from fusion_tui.slots.process_gate import mark_sent, process_gate, sent_by_this_process
from fusion_tui.slots.room import SlotLedger
from fusion_tui.slots.saving import (
    SAVE_DEADLINE,
    archive_for,
    save_sessions_before_stop,
    server_facts,
)


class SlotKeeper:
    """The slot story of the current session (see the module's docstring); its `crowd`
    (`SlotRoom`) makes room in crowded slots, its `owners` (`SlotOwners`) say who holds which
    slot (the slot map's view)."""

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
        self.resume: ResumeState | None = None
        self.notes: list[str] = []
        """What the slot policy did for the next request (saved to make room, restored)."""
        self._resume_checked = False
        self.owners = SlotOwners(self)
        self.crowd = SlotRoom(self, self.owners)

    # --- the connection ------------------------------------------------------------------------

    def attach(self, conn: Connection) -> None:
        """Keep slots on `conn` from now on (pins survive only on the same server)."""
        self.conn = conn
        props = conn.props
        self.pool.update(props.total_slots, props.model_path, conn.launch_id)
        server = conn.launch_id or conn.client.base_url
        self.gate = process_gate(
            server, conn.client.slots, lambda: self.pool.total_slots, self.exclusive
        )
        self.archive = archive_for(conn, self.archive_max_bytes)
        self.ledger = SlotLedger(self.archive.folder) if self.archive is not None else None

    def exclusive(self) -> bool:
        """Only this process sends to the server: it launched the daemon, and the shared ledger
        names no session this keeper has not had (then the gate skips its `/slots` busy probe:
        a held lock proves the slot idle, and the round trip leaves the first-token path)."""
        conn = self.conn
        if conn is None or not conn.launched or self.ledger is None:
            return False
        local = sent_by_this_process(conn.launch_id or "")
        return set(self.owners.holders().values()) <= local | {self.session.id}

    def detach(self) -> Connection | None:
        conn, self.conn = self.conn, None
        return conn

    def identity(self) -> ServerIdentity:
        assert self.conn is not None
        props = self.conn.props
        return ServerIdentity(props.model_path, self.conn.launch_id, props.total_slots)

    # --- leaving and switching -----------------------------------------------------------------

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

    async def switch(self, session: Session) -> str | None:
        """Leave the current session (saving its slot) for `session`; the leave note."""
        note = await self.leave()
        self.pool.unpin(self.session.id)
        self.session = session
        self.resume, self._resume_checked = None, False
        return note

    async def save_others(self) -> None:
        """Before the daemon stops: every other stored session's slot still on this launch."""
        conn = self.conn
        if conn is None or self.archive is None:
            return
        await save_sessions_before_stop(
            conn.client,
            self.archive,
            self.store,
            server_facts(conn),
            self.pool.total_slots,
            skip=frozenset({self.session.id}),
        )

    # --- the parts: crowded slots (`crowd`) and the slot map's view (`owners`) -----------------

    def take_notes(self) -> list[str]:
        notes, self.notes = self.notes, []
        return notes

    def answered_reusing(self, cache_n: int) -> None:
        self.crowd.answered_reusing(cache_n)

    def measured_prompt(self, prompt_n: int, tok_per_s: float) -> None:
        self.crowd.measured_prompt(prompt_n, tok_per_s)

    async def room(self) -> int | None:
        return await self.crowd.room()

    async def save_ahead(self) -> None:
        await self.crowd.save_ahead()

    async def seed(self, slot: int, prefix_hash: str, prefix_tokens: int) -> str | None:
        return await self.crowd.seed(slot, prefix_hash, prefix_tokens)

    async def slots(self) -> list[SlotState]:
        return await self.owners.slots()

    def slot_owners(self) -> dict[int, str]:
        return self.owners.slot_owners()

    def sessions_on_disk(self) -> list[str]:
        return self.owners.sessions_on_disk()

    def prompt_totals(self) -> dict[int, int]:
        return self.owners.prompt_totals()

    def session_on_slot(self, slot: int) -> str | None:
        return self.owners.session_on_slot(slot)

    # --- where the next request goes -----------------------------------------------------------

    async def warm_resume(self) -> list[str]:
        """Before the first request of a resumed session: on a new daemon, restore its saved
        slot into a free slot and pin it. Runs once per session; returns notes for the user."""
        if self._resume_checked or self.conn is None or self.gate is None:
            return []
        self._resume_checked = True
        session = self.session
        if session.server is None or not session.requests:
            return []
        if session.server.same_server(self.identity()):
            self.resume = ResumeState("same")
            return []
        if self.archive is None:
            return self._cold("this server keeps no saved slots (not a managed launch)")
        try:
            self.archive.check(session.id, server_facts(self.conn))
        except ArchiveRefused as exc:
            return self._cold(str(exc))
        if not self.crowd.restores_are_reused():
            return self._cold(RESTORE_NOT_REUSED)
        slot = await self.crowd.room()
        notes, self.notes = self.notes, []
        if slot is None:
            return notes + self._cold("no free slot to restore the saved one into")
        note = await self.crowd.restore_into(slot)
        return notes + (self._cold(self.resume.reason) if note is None else [note])  # type: ignore[union-attr]

    def _cold(self, reason: str) -> list[str]:
        self.resume = ResumeState("cold", reason=reason)
        return [f"cold start: {reason}"]

    def take_resume(self) -> ResumeState | None:
        """How the session came back, once (the first turn's note says it)."""
        resume, self.resume = self.resume, None
        return resume

    async def next_slot(self) -> int:
        """The slot for the session's next request: its pin (while no other session took it);
        for its first, a fresh one, else the least recently used session's slot saved to disk
        first; for a returning session whose slot was taken, its saved slot restored (when
        cheaper than reading the prompt again); else -1."""
        session = self.session
        slot = self.pool.slot_for(session.id)
        if slot >= 0 and not self._taken(slot):
            return slot
        if slot >= 0:
            self.pool.unpin(session.id)
        if session.brand_new:
            slot = await self.fresh_slot()
            room = await self.crowd.room() if slot < 0 else slot
            if room is not None:
                self.crowd.landed(restored=False)  # a slot another session held: the server's RAM
            return -1 if room is None else room
        mine = session.pinned_slot
        if mine is not None and self._taken(mine):
            restored = await self.crowd.restore_returning()
            if restored is not None:
                return restored
        elif (
            mine is not None
            and self.owners.holders().get(mine) == session.id
            and self._same_launch()
        ):
            self.pool.pin(session.id, mine)  # the shared ledger says it is still there
            return mine
        return -1

    async def room_to_read_into(self) -> int:
        """A slot for a returning session that has none on this launch (resumed cold), as a new
        session gets one (`room`): its prompt is read into it ahead of the turn; -1: none."""
        room = await self.crowd.room()
        if room is None:
            return -1
        self.crowd.landed(restored=False)
        return room

    def _same_launch(self) -> bool:
        return self.session.server is not None and self.session.server.same_server(self.identity())

    def _taken(self, slot: int) -> bool:
        """Another session was answered on `slot` after this one (the shared ledger says)."""
        holder = self.owners.holders().get(slot)
        return holder is not None and holder != self.session.id

    async def fresh_slot(self) -> int:
        """An empty slot no known session holds, for a brand-new session; else -1."""
        assert self.conn is not None and self.gate is not None
        try:
            states = await self.conn.client.slots()
        except ServerError:
            return -1
        taken = set(self.pool.pins.values()) | set(self.gate.held)
        taken |= set(self.owners.known_owners())  # the shared ledger's word, where there is one
        if self.side_slot is not None:
            taken.add(self.side_slot)
        slot = choose_fresh_slot(states, self.pool.total_slots, taken)
        return -1 if slot is None else slot

    def side_slot_for(self, *, free_only: bool = False) -> int | None:
        """The slot for a side call (title, summary): one no known session holds (pins of this
        process, sessions stored for this launch, requests in flight), the previous side slot
        first; else (unless `free_only`: then None) the pool's choice, never the session's own
        while another exists."""
        assert self.gate is not None
        own = self.pool.pins.get(self.session.id)
        taken = set(self.pool.pins.values()) | set(self.owners.known_owners()) | set(self.gate.held)
        free = [s for s in range(self.pool.total_slots) if s not in taken]
        if free:
            slot = self.side_slot if self.side_slot in free else max(free)
        elif free_only:
            return None
        else:
            avoid = () if own is None else (own,)
            slot = self.pool.side_call_slot(busy=self.gate.held, avoid=avoid)
        self.side_slot = slot if slot >= 0 and slot != own else None
        return slot

    def pin_cut_turn(self, slot: int) -> None:
        """A turn cut short after the server had started on `slot` (named, not `-1`): the slot
        holds its prompt and partial answer, so a session not pinned yet is pinned there (its
        first answer never ended, so `pin_answer` never ran)."""
        if slot >= 0 and self.pool.slot_for(self.session.id) < 0:
            self.pin_answer(slot)

    def pin_answer(self, id_slot: int) -> None:
        """The server answered the session on `id_slot`: pin it there."""
        session = self.session
        self.pool.pin(session.id, id_slot)
        session.pinned_slot = self.pool.pins.get(session.id)
        session.server = self.identity()
        if self.conn is not None and self.conn.launch_id:
            mark_sent(self.conn.launch_id, session.id)
        if self.ledger is not None and session.pinned_slot is not None and self.conn is not None:
            self.ledger.claim(session.pinned_slot, session.id, self.conn.launch_id)
