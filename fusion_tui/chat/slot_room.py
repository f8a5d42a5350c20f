"""Provides `SlotRoom`, the base of `SlotKeeper` for crowded slots and prompts back from disk.

Why: with more sessions than slots, a session that needs a slot takes the least recently used
other session's, saved to disk first (`room`), or saved ahead between turns (`save_ahead`) so no
first token waits for a save; a returning session whose slot was taken gets its saved slot
restored when that beats reading the prompt again (`_restore_returning`); a brand-new session
starts from another session's cached stable prefix (`seed`). None of it where llama-server
cannot reuse a restored slot (`restores_are_reused`).
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from fusion_tui.chat.slot_owners import SlotOwners
from fusion_tui.chat.warm import SAVE_DEADLINE, server_facts
from fusion_tui.server.errors import ServerError
from fusion_tui.sessions.model import Session
from fusion_tui.sessions.store import SessionStore, SessionStoreError
from fusion_tui.slots.archive import (
    DEFAULT_MAX_BYTES,
    ArchiveRefused,
    ArchiveTag,
    Restored,
    choose_restore_slot,
)
from fusion_tui.slots.ram_cache import RamCacheModel, ram_cache_for, rides_ram
from fusion_tui.slots.room import Holder, choose_victim, restore_is_cheaper

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


class SlotRoom(SlotOwners):
    def __init__(
        self, store: SessionStore, session: Session, *, archive_max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        super().__init__(store, session, archive_max_bytes=archive_max_bytes)
        self.resume: ResumeState | None = None
        self.notes: list[str] = []
        """What the slot policy did for the next request (saved to make room, restored)."""
        self.restore_rate: float | None = None
        """Measured bytes per second of a slot restore."""
        self.prompt_rate: float | None = None
        """Measured prompt tokens per second (the largest recent prompt's)."""
        self._victim: tuple[str, int] | None = None
        """The session whose slot `room` just gave us, and its state's bytes (from its file)."""
        self._ram_expects = 0
        """Tokens the next answer must reuse: the session rode the server's RAM cache."""

    def exclusive(self) -> bool:
        """Only this process sends to the server (`SlotKeeper`'s check)."""
        return False

    def _ram(self) -> RamCacheModel | None:
        """The process's model of the server's RAM prompt cache, while only we send to it."""
        record = self.conn.record if self.conn is not None else None
        if self.conn is None or record is None or not self.exclusive():
            return None
        return ram_cache_for(self.conn.launch_id, record.argv)

    def _landed(self, restored: bool) -> None:
        """The session got the slot `room` chose: the server moved that slot's session to its
        RAM cache unless a disk restore overwrote it; ours is in a slot again."""
        ram, victim, self._victim = self._ram(), self._victim, None
        if ram is None:
            return
        if victim is not None and not restored:
            ram.pushed(*victim)
        ram.loaded(self.session.id)

    def answered_reusing(self, cache_n: int) -> None:
        """The session's answer reused `cache_n` tokens: after a ride on the server's RAM cache,
        less than its saved prompt means the model was wrong; disk restores from then on."""
        expected, self._ram_expects = self._ram_expects, 0
        ram = self._ram()
        if expected and ram is not None and cache_n + 16 < 0.9 * expected:
            ram.missed()

    def restores_are_reused(self) -> bool:
        """Whether this server can reuse a restored slot: not on a sliding-window model without
        `--swa-full`, nor on a recurrent one (the launch's fit says prefix reuse `none`). There
        llama-server saves only the last window of the sliding layers and no context checkpoints,
        and its reuse test then rejects the restored window, so a restore would cost a file read
        and the prompt be read again anyway (docs/benchmarks.md, "Cache economy")."""
        record = self.conn.record if self.conn is not None else None
        fit = record.fit if record is not None else None
        return not isinstance(fit, dict) or fit.get("prefix_reuse", "full") == "full"

    def take_notes(self) -> list[str]:
        notes, self.notes = self.notes, []
        return notes

    def measured_prompt(self, prompt_n: int, tok_per_s: float) -> None:
        """A prompt's evaluation speed (only prompts long enough to say something count)."""
        if prompt_n >= 64 and tok_per_s > 0:
            self.prompt_rate = tok_per_s

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

    async def _restore_returning(self) -> int | None:
        """Another session took this session's slot: restore its saved slot into a free one
        (or the least recently used session's, saved first) when that beats a re-read; else
        the prompt is read again there. None: no slot to be had without evicting blindly."""
        slot = await self.room()
        if slot is None:
            return None
        self._landed(restored=await self._back_into(slot))
        return slot

    async def _back_into(self, slot: int) -> bool:
        """Bring the session's prompt back into `slot`: from disk, from the server's RAM
        cache, or not at all (the prompt is read again); whether a disk restore wrote it."""
        assert self.conn is not None
        if self.archive is None:  # an external server: nothing saved to bring back
            return False
        try:
            tag = self.archive.check(self.session.id, server_facts(self.conn))
        except ArchiveRefused as exc:
            self.notes.append(f"slot {self.session.pinned_slot} now holds another session; {exc}")
            return False
        if not self.restores_are_reused():
            self.notes.append(RESTORE_NOT_REUSED)
            return False
        if not restore_is_cheaper(tag.n_saved, tag.n_bytes, self.restore_rate, self.prompt_rate):
            self.notes.append("reading the prompt again is cheaper than restoring its saved slot")
            return False
        if rides_ram(self._ram(), self.session.id, tag.n_saved, self.prompt_rate):
            self.notes.append(
                f"slot {slot}: the server's RAM prompt cache holds this session's prompt "
                "(no restore from disk)"
            )
            self._ram_expects = tag.n_saved
            return False
        note = await self._restore_into(slot)
        if note is not None:
            self.notes.append(note)
        return note is not None

    async def room(self) -> int | None:
        """A slot for the current session that costs no other session its cache: an idle one
        no session holds, else the least recently used other session's, saved to disk first.
        None when neither exists. An external server keeps no saved slots: there, no eviction,
        and only a brand-new session is given an idle slot (the server's own pick by similarity
        could put it on a short session's slot); a returning one goes `-1`, which finds the slot
        that still caches its prompt (the fewest-cached idle slot never is)."""
        self._victim = None
        if self.conn is None or self.gate is None:
            return None
        if self.archive is None and not self.session.brand_new:
            return None
        holders = self.ledger.holders(self.conn.launch_id) if self.ledger is not None else {}
        me = self.session.id
        others = {s for s, h in holders.items() if h.session_id != me}
        own_pins = set(self.pool.pins.values())
        taken = own_pins | others | (set() if self.ledger is not None else set(self.known_owners()))
        if not set(range(self.pool.total_slots)) <= taken | set(self.gate.held):
            # some slot may be free: `/slots` says which is idle (else, every slot taken, the
            # poll is skipped: it could only confirm that, and it sits on a first token)
            try:
                states = await self.conn.client.slots()
            except ServerError:
                states = None
            if states is None and self.archive is None:
                return None  # a blind pick on another client's server: let it choose
            avoid = () if self.side_slot is None else (self.side_slot,)
            slot = choose_restore_slot(
                states, self.pool.total_slots, pinned=taken, held=self.gate.held, avoid=avoid
            )
            if slot is not None:
                return slot
        if self.archive is None:
            return None
        victim = choose_victim(holders, self.pool.total_slots, own_pins | set(self.gate.held), me)
        if victim is None:
            return None
        owner = holders[victim].session_id
        with anyio.move_on_after(SAVE_DEADLINE):
            try:
                tag, saved_now = await self._on_disk(victim, holders[victim])
                self._victim = (owner, tag.n_bytes)
                self.notes.append(
                    f"saved slot {victim} ({tag.n_saved:,} tokens of session {owner}) to disk "
                    "to make room"
                    if saved_now  # else saved ahead, between turns
                    else f"took slot {victim}: session {owner}'s prompt is saved on disk"
                )
            except (ServerError, OSError) as exc:
                self.notes.append(f"could not save slot {victim} before reusing it: {exc}")
        return victim

    async def _on_disk(self, slot: int, holder: Holder) -> tuple[ArchiveTag, bool]:
        """`holder`'s slot on disk: its file when saved on this launch since its last answer
        there, else saved now under the slot's lock; (tag, saved now)."""
        assert self.conn is not None and self.gate is not None and self.archive is not None
        tag = self.archive.read_tag(holder.session_id)
        if self._saved_since(tag, holder.used):
            assert tag is not None
            return tag, False
        async with self.gate.hold(slot):
            facts = server_facts(self.conn)
            return await self.archive.save(self.conn.client, slot, holder.session_id, facts), True

    def _saved_since(self, tag: ArchiveTag | None, used: float) -> bool:
        """The session's saved slot (`tag`) is on this launch and newer than its last answer."""
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
        if self._saved_since(archive.read_tag(owner.session_id), owner.used):
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
                    tag, _saved_now = await self._on_disk(donor_slot, holder)
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
