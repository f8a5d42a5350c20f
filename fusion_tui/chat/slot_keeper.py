"""Provides `SlotKeeper`: which server slot the current session rides and how it comes back.

One object a backend holds (not a mixin): the connection's slot pool, per-slot gate and slot
archive, and the current session's slot story.
- A brand-new session takes an empty slot no known session holds (`fresh_slot`, else `-1`): with
  `-1` a shared system prompt can pass the server's similarity threshold and evict a short session.
- Warm resume: on the same server the first request goes `-1` and lands on the slot still holding
  the prompt; on a new daemon the session's saved slot file is restored into a free slot and pinned
  (refused, with the reason, when the model, context or cache types changed).
- Leaving a session (switch, exit, stop) saves its slot to disk first.
It is also the slot map's `SlotView`: the slots, their owners and the prompt totals in flight.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import anyio

from fusion_tui.chat.warm import (
    SAVE_DEADLINE,
    archive_for,
    save_sessions_before_stop,
    server_facts,
)
from fusion_tui.runtime import Connection
from fusion_tui.server.errors import ServerError
from fusion_tui.server.types import SlotState
from fusion_tui.sessions.model import ServerIdentity, Session
from fusion_tui.sessions.store import SessionStore, SessionStoreError
from fusion_tui.slots.archive import (
    DEFAULT_MAX_BYTES,
    ArchiveRefused,
    Restored,
    SlotArchive,
    choose_fresh_slot,
    choose_restore_slot,
    owners_by_slot,
)
from fusion_tui.slots.gate import SlotGate, slots_busy_probe
from fusion_tui.slots.pins import SlotPool
from fusion_tui.slots.room import SlotLedger, choose_victim, restore_is_cheaper

_SENT_BY_THIS_PROCESS: dict[str, set[str]] = {}
"""Launch id → sessions this process has been answered for (every keeper of the process: the
TUI's sessions, the bench's, an agent beside a chat); the `exclusive` check's "ours"."""
_GATES: weakref.WeakValueDictionary[str, SlotGate] = weakref.WeakValueDictionary()
"""One gate per server for the whole process: every keeper's requests to a server (chat, agent,
side calls, saves) queue on the same per-slot locks, so a held lock proves the slot idle."""


def _process_gate(
    conn: Connection, total: Callable[[], int], exclusive: Callable[[], bool]
) -> SlotGate:
    """The process's gate for `conn`'s server, its probe and exclusivity check bound to the
    newest connection (an earlier keeper's client may be closed by now)."""
    try:  # a gate's locks belong to one event loop (tests run many)
        loop = id(asyncio.get_running_loop())
    except RuntimeError:
        loop = 0
    key = f"{loop}:{conn.launch_id or conn.client.base_url}"
    gate = _GATES.get(key)
    if gate is None:
        gate = _GATES[key] = SlotGate(total)
    gate.rebind(total, slots_busy_probe(conn.client.slots), exclusive)
    return gate


RESTORE_NOT_REUSED = (
    "this model has sliding-window (or recurrent) layers and the server runs without --swa-full: "
    "llama-server cannot reuse a restored slot there, so the prompt is read again"
)


@dataclass
class ResumeState:
    """How the current session came back: `same` server, `restored` from disk, or `cold`."""

    kind: str
    restored: Restored | None = None
    reason: str = ""


class SlotKeeper:
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
        self.side_slot: int | None = None
        """The slot the last side call (title) used, shown as "side" on the slot map."""
        self.live_totals: dict[int, int] = {}
        """Prompt length of the request in flight per slot."""
        self.resume: ResumeState | None = None
        self._resume_checked = False
        self.ledger: SlotLedger | None = None
        """Which session each slot of the launch holds, shared by every process."""
        self.notes: list[str] = []
        """What the slot policy did for the next request (saved to make room, restored)."""
        self.restore_rate: float | None = None
        """Measured bytes per second of a slot restore."""
        self._titles: dict[str, str] = {}
        self.prompt_rate: float | None = None
        """Measured prompt tokens per second (the largest recent prompt's)."""

    # --- the connection ------------------------------------------------------------------------

    def attach(self, conn: Connection) -> None:
        """Keep slots on `conn` from now on (pins survive only on the same server)."""
        self.conn = conn
        props = conn.props
        self.pool.update(props.total_slots, props.model_path, conn.launch_id)
        self.gate = _process_gate(conn, lambda: self.pool.total_slots, self.exclusive)
        self.archive = archive_for(conn, self.archive_max_bytes)
        self.ledger = SlotLedger(self.archive.folder) if self.archive is not None else None

    def exclusive(self) -> bool:
        """Only this process sends to the server: it launched the daemon, and the shared ledger
        names no session this keeper has not had (then the gate skips its `/slots` busy probe:
        a held lock proves the slot idle, and the round trip leaves the first-token path)."""
        conn = self.conn
        if conn is None or not conn.launched or self.ledger is None:
            return False
        local = _SENT_BY_THIS_PROCESS.get(conn.launch_id or "", set())
        return set(self._holders().values()) <= local | {self.session.id}

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
        if not self.restores_are_reused():
            return self._cold(RESTORE_NOT_REUSED)
        slot = await self.room()
        notes, self.notes = self.notes, []
        if slot is None:
            return notes + self._cold("no free slot to restore the saved one into")
        note = await self._restore_into(slot)
        return notes + (self._cold(self.resume.reason) if note is None else [note])  # type: ignore[union-attr]

    async def _restore_into(self, slot: int) -> str | None:
        """Restore the session's saved slot into `slot` and pin it there; the note, or None
        (then `resume` is cold with the reason)."""
        assert self.conn is not None and self.gate is not None and self.archive is not None
        session = self.session
        try:
            async with self.gate.hold(slot):
                restored = await self.archive.restore(
                    self.conn.client, slot, session.id, server_facts(self.conn)
                )
        except ArchiveRefused as exc:
            self.resume = ResumeState("cold", reason=str(exc))
            return None
        if restored.restore_ms > 0 and restored.tag.n_bytes > 0:
            self.restore_rate = restored.tag.n_bytes / (restored.restore_ms / 1000)
        self.pool.pin(session.id, slot)
        session.pinned_slot = slot
        if self.ledger is not None:
            self.ledger.claim(slot, session.id, self.conn.launch_id)
        self.resume = ResumeState("restored", restored)
        return (
            f"restored the saved slot into slot {slot} ({restored.n_restored:,} tokens in "
            f"{restored.restore_ms / 1000:.1f} s)"
        )

    def _cold(self, reason: str) -> list[str]:
        self.resume = ResumeState("cold", reason=reason)
        return [f"cold start: {reason}"]

    def restores_are_reused(self) -> bool:
        """Whether this server can reuse a restored slot: not on a sliding-window model without
        `--swa-full`, nor on a recurrent one (the launch's fit says prefix reuse `none`). There
        llama-server saves only the last window of the sliding layers and no context checkpoints,
        and its reuse test then rejects the restored window, so a restore would cost a file read
        and the prompt be read again anyway (README, "Cache economy")."""
        record = self.conn.record if self.conn is not None else None
        fit = record.fit if record is not None else None
        return not isinstance(fit, dict) or fit.get("prefix_reuse", "full") == "full"

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
        if not any(not r.side_call for r in session.requests):
            slot = await self.fresh_slot()
            room = await self.room() if slot < 0 else slot
            return -1 if room is None else room
        mine = session.pinned_slot
        if mine is not None and self._taken(mine):
            restored = await self._restore_returning()
            if restored is not None:
                return restored
        elif mine is not None and self._holders().get(mine) == session.id and self._same_launch():
            self.pool.pin(session.id, mine)  # the shared ledger says it is still there
            return mine
        return -1

    def _same_launch(self) -> bool:
        return self.session.server is not None and self.session.server.same_server(self.identity())

    def _holders(self) -> dict[int, str]:
        if self.ledger is None or self.conn is None:
            return {}
        return {s: h.session_id for s, h in self.ledger.holders(self.conn.launch_id).items()}

    def _taken(self, slot: int) -> bool:
        """Another session was answered on `slot` after this one (the shared ledger says)."""
        holder = self._holders().get(slot)
        return holder is not None and holder != self.session.id

    async def _restore_returning(self) -> int | None:
        """Another session took this session's slot: restore its saved slot into a free one
        (or the least recently used session's, saved first) when that beats a re-read; else
        the prompt is read again there. None: no slot to be had without evicting blindly."""
        assert self.conn is not None and self.archive is not None
        slot = await self.room()
        if slot is None:
            return None
        try:
            tag = self.archive.check(self.session.id, server_facts(self.conn))
        except ArchiveRefused as exc:
            self.notes.append(f"slot {self.session.pinned_slot} now holds another session; {exc}")
            return slot
        if not self.restores_are_reused():
            self.notes.append(RESTORE_NOT_REUSED)
            return slot
        if not restore_is_cheaper(tag.n_saved, tag.n_bytes, self.restore_rate, self.prompt_rate):
            self.notes.append("reading the prompt again is cheaper than restoring its saved slot")
            return slot
        note = await self._restore_into(slot)
        if note is not None:
            self.notes.append(note)
        return slot

    async def room(self) -> int | None:
        """A slot for the current session that costs no other session its cache: an idle one
        no session holds, else the least recently used other session's, saved to disk first.
        None when neither exists (an external server has no saved slots: no eviction)."""
        if self.conn is None or self.gate is None or self.archive is None:
            return None
        try:
            states = await self.conn.client.slots()
        except ServerError:
            states = None
        holders = self.ledger.holders(self.conn.launch_id) if self.ledger is not None else {}
        me = self.session.id
        others = {s for s, h in holders.items() if h.session_id != me}
        own_pins = set(self.pool.pins.values())
        taken = own_pins | others | set(self.known_owners())
        avoid = () if self.side_slot is None else (self.side_slot,)
        slot = choose_restore_slot(
            states, self.pool.total_slots, pinned=taken, held=self.gate.held, avoid=avoid
        )
        if slot is not None:
            return slot
        victim = choose_victim(holders, self.pool.total_slots, own_pins | set(self.gate.held), me)
        if victim is None:
            return None
        owner = holders[victim].session_id
        if self._saved_since(owner, holders[victim].used):  # saved ahead, between turns
            self.notes.append(f"took slot {victim}: session {owner}'s prompt is saved on disk")
            return victim
        with anyio.move_on_after(SAVE_DEADLINE):
            try:
                async with self.gate.hold(victim):
                    tag = await self.archive.save(
                        self.conn.client, victim, owner, server_facts(self.conn)
                    )
                self.notes.append(
                    f"saved slot {victim} ({tag.n_saved:,} tokens of session {owner}) to disk "
                    "to make room"
                )
            except (ServerError, OSError) as exc:
                self.notes.append(f"could not save slot {victim} before reusing it: {exc}")
        return victim

    def _saved_since(self, session_id: str, used: float) -> bool:
        """The session's saved slot on this launch is newer than its last answer there."""
        tag = self.archive.read_tag(session_id) if self.archive is not None else None
        launch = self.conn.launch_id if self.conn is not None else None
        return tag is not None and tag.launch_id == launch and tag.saved_at >= used

    async def save_ahead(self) -> None:
        """Between turns, when every slot but the side slot holds a session: save the least
        recently used other session's slot now (unless saved since its last answer), so the
        next session that needs a slot takes it without a save on its first token."""
        conn, gate, archive, ledger = self.conn, self.gate, self.archive, self.ledger
        if conn is None or gate is None or archive is None or ledger is None:
            return
        holders = ledger.holders(conn.launch_id)
        if len(holders) < self.pool.total_slots - 1:
            return  # a free slot is left for the next newcomer
        blocked = set(self.pool.pins.values()) | set(gate.held)
        victim = choose_victim(holders, self.pool.total_slots, blocked, self.session.id)
        if victim is None:
            return
        owner = holders[victim]
        if self._saved_since(owner.session_id, owner.used):
            return
        with anyio.move_on_after(SAVE_DEADLINE):
            try:
                async with gate.hold(victim):
                    if ledger.holders(conn.launch_id).get(victim) == owner:  # still there
                        facts = server_facts(conn)
                        await archive.save(conn.client, victim, owner.session_id, facts)
            except (ServerError, OSError):
                pass  # only a head start: the save before taking the slot still happens

    async def seed(self, slot: int, prefix_hash: str, prefix_tokens: int) -> str | None:
        """A brand-new session about to start on the empty `slot`: when another session of this
        launch starts with the same stable prefix (an agent's system prompt and tools), save its
        slot and restore that file into `slot`, so the new session reads only what follows the
        shared prefix; only where that beats reading `prefix_tokens` (measured rates) and the
        server reuses restored slots. The note, or None."""
        conn, gate, archive, ledger = self.conn, self.gate, self.archive, self.ledger
        if conn is None or gate is None or archive is None or ledger is None or slot < 0:
            return None
        if not self.restores_are_reused():
            return None
        holders = ledger.holders(conn.launch_id)
        for donor_slot, holder in sorted(holders.items(), key=lambda kv: -kv[1].used):
            sid = holder.session_id
            if donor_slot == slot or gate.is_held(donor_slot) or sid == self.session.id:
                continue
            try:
                donor = self.store.load(sid)
            except (SessionStoreError, ValueError):
                continue
            if donor.prefix_hash != prefix_hash:
                continue
            facts = server_facts(conn)
            with anyio.move_on_after(SAVE_DEADLINE):
                try:
                    tag = archive.read_tag(sid)
                    if tag is None or not self._saved_since(sid, holder.used):
                        async with gate.hold(donor_slot):
                            tag = await archive.save(conn.client, donor_slot, sid, facts)
                    if not restore_is_cheaper(
                        prefix_tokens, tag.n_bytes, self.restore_rate, self.prompt_rate
                    ):
                        return None
                    async with gate.hold(slot):
                        done = await archive.restore(conn.client, slot, sid, facts)
                except (ServerError, OSError, ArchiveRefused):
                    return None
                return (
                    f"started from {self._title(sid)}'s cached prefix: its slot {donor_slot} "
                    f"copied into slot {slot} ({done.n_restored:,} tokens)"
                )
            return None
        return None

    def take_notes(self) -> list[str]:
        notes, self.notes = self.notes, []
        return notes

    def measured_prompt(self, prompt_n: int, tok_per_s: float) -> None:
        """A prompt's evaluation speed (only prompts long enough to say something count)."""
        if prompt_n >= 64 and tok_per_s > 0:
            self.prompt_rate = tok_per_s

    async def fresh_slot(self) -> int:
        """An empty slot no known session holds, for a brand-new session; else -1."""
        assert self.conn is not None and self.gate is not None
        try:
            states = await self.conn.client.slots()
        except ServerError:
            return -1
        taken = set(self.pool.pins.values()) | set(self.gate.held)
        taken |= set(self.known_owners()) | set(self._holders())
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
        taken = set(self.pool.pins.values()) | set(self.known_owners()) | set(self.gate.held)
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

    def pin_answer(self, id_slot: int) -> None:
        """The server answered the session on `id_slot`: pin it there."""
        session = self.session
        self.pool.pin(session.id, id_slot)
        session.pinned_slot = self.pool.pins.get(session.id)
        session.server = self.identity()
        if self.conn is not None and self.conn.launch_id:
            _SENT_BY_THIS_PROCESS.setdefault(self.conn.launch_id, set()).add(session.id)
        if self.ledger is not None and session.pinned_slot is not None and self.conn is not None:
            self.ledger.claim(session.pinned_slot, session.id, self.conn.launch_id)

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
        """Titles of sessions with a saved slot that no slot holds now, newest first."""
        if self.archive is None:
            return []
        in_slot = set(self._holders().values()) | {self.session.id}
        ids = [sid for sid, _t, _b in reversed(self.archive.entries()) if sid not in in_slot]
        return [self._title(sid) for sid in ids[:8]]

    def _title(self, session_id: str) -> str:
        title = self._titles.get(session_id)
        if title is None:
            try:
                title = self.store.load(session_id).title or session_id
            except (SessionStoreError, ValueError):
                title = session_id
            self._titles[session_id] = title
        return title

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
