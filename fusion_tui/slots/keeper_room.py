"""Provides `SlotRoom`, a part of `SlotKeeper`: crowded slots and prompts back from disk.

Why: with more sessions than slots, a session that needs a slot takes the least recently used
other session's, saved to disk first (`room`), or saved ahead between turns (`save_ahead`) so no
first token waits for a save; a returning session whose slot was taken gets its saved slot
restored when that beats reading the prompt again (`restore_returning`); a brand-new session
starts from another session's cached stable prefix (`seed`). None of it where llama-server
cannot reuse a restored slot (`restores_are_reused`). It reads the keeper's state
(`RoomState`) and writes only what the keeper shows next (`notes`, `resume`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import anyio

from fusion_tui.server.errors import ServerError
from fusion_tui.sessions.store import SessionStoreError
from fusion_tui.slots.archive import (
    ArchiveRefused,
    ArchiveTag,
    Restored,
    choose_restore_slot,
)
from fusion_tui.slots.keeper_owners import KeeperState, SlotOwners
from fusion_tui.slots.ram_cache import RamCacheModel, ram_cache_for, rides_ram
from fusion_tui.slots.room import Holder, choose_victim, restore_is_cheaper
from fusion_tui.slots.saving import SAVE_DEADLINE, server_facts

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


class RoomState(KeeperState, Protocol):
    """What `SlotRoom` reads and writes of the keeper."""

    resume: ResumeState | None
    """How the current session came back (the first turn's note says it)."""
    notes: list[str]
    """What the slot policy did for the next request (saved to make room, restored)."""

    def exclusive(self) -> bool:
        """Only this process sends to the server."""
        ...


class SlotRoom:
    def __init__(self, state: RoomState, owners: SlotOwners) -> None:
        self.state = state
        self.owners = owners
        self.restore_rate: float | None = None
        """Measured bytes per second of a slot restore."""
        self.prompt_rate: float | None = None
        """Measured prompt tokens per second (the largest recent prompt's)."""
        self._victim: tuple[str, int] | None = None
        """The session whose slot `room` just gave us, and its state's bytes (from its file)."""
        self._ram_expects = 0
        """Tokens the next answer must reuse: the session rode the server's RAM cache."""

    def _ram(self) -> RamCacheModel | None:
        """The process's model of the server's RAM prompt cache, while only we send to it."""
        st = self.state
        record = st.conn.record if st.conn is not None else None
        if st.conn is None or record is None or not st.exclusive():
            return None
        return ram_cache_for(st.conn.launch_id, record.argv)

    def landed(self, restored: bool) -> None:
        """The session got the slot `room` chose: the server moved that slot's session to its
        RAM cache unless a disk restore overwrote it; ours is in a slot again."""
        ram, victim, self._victim = self._ram(), self._victim, None
        if ram is None:
            return
        if victim is not None and not restored:
            ram.pushed(*victim)
        ram.loaded(self.state.session.id)

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
        st = self.state
        record = st.conn.record if st.conn is not None else None
        fit = record.fit if record is not None else None
        return not isinstance(fit, dict) or fit.get("prefix_reuse", "full") == "full"

    def measured_prompt(self, prompt_n: int, tok_per_s: float) -> None:
        """A prompt's evaluation speed (only prompts long enough to say something count)."""
        if prompt_n >= 64 and tok_per_s > 0:
            self.prompt_rate = tok_per_s

    async def restore_into(self, slot: int) -> str | None:
        """Restore the session's saved slot into `slot` and pin it there; the note, or None
        (then `resume` is cold with the reason)."""
        st = self.state
        assert st.conn is not None and st.gate is not None and st.archive is not None
        session = st.session
        try:
            async with st.gate.hold(slot):
                restored = await st.archive.restore(
                    st.conn.client, slot, session.id, server_facts(st.conn)
                )
        except ArchiveRefused as exc:
            st.resume = ResumeState("cold", reason=str(exc))
            return None
        if restored.restore_ms > 0 and restored.tag.n_bytes > 0:
            self.restore_rate = restored.tag.n_bytes / (restored.restore_ms / 1000)
        st.pool.pin(session.id, slot)
        session.pinned_slot = slot
        if st.ledger is not None:
            st.ledger.claim(slot, session.id, st.conn.launch_id)
        st.resume = ResumeState("restored", restored)
        return (
            f"restored the saved slot into slot {slot} ({restored.n_restored:,} tokens in "
            f"{restored.restore_ms / 1000:.1f} s)"
        )

    async def restore_returning(self) -> int | None:
        """Another session took this session's slot: restore its saved slot into a free one
        (or the least recently used session's, saved first) when that beats a re-read; else
        the prompt is read again there. None: no slot to be had without evicting blindly."""
        slot = await self.room()
        if slot is None:
            return None
        self.landed(restored=await self._back_into(slot))
        return slot

    async def _back_into(self, slot: int) -> bool:
        """Bring the session's prompt back into `slot`: from disk, from the server's RAM
        cache, or not at all (the prompt is read again); whether a disk restore wrote it."""
        st = self.state
        assert st.conn is not None
        if st.archive is None:  # an external server: nothing saved to bring back
            return False
        try:
            tag = st.archive.check(st.session.id, server_facts(st.conn))
        except ArchiveRefused as exc:
            st.notes.append(f"slot {st.session.pinned_slot} now holds another session; {exc}")
            return False
        if not self.restores_are_reused():
            st.notes.append(RESTORE_NOT_REUSED)
            return False
        if not restore_is_cheaper(tag.n_saved, tag.n_bytes, self.restore_rate, self.prompt_rate):
            st.notes.append("reading the prompt again is cheaper than restoring its saved slot")
            return False
        if rides_ram(self._ram(), st.session.id, tag.n_saved, self.prompt_rate):
            st.notes.append(
                f"slot {slot}: the server's RAM prompt cache holds this session's prompt "
                "(no restore from disk)"
            )
            self._ram_expects = tag.n_saved
            return False
        note = await self.restore_into(slot)
        if note is not None:
            st.notes.append(note)
        return note is not None

    async def room(self) -> int | None:
        """A slot for the current session that costs no other session its cache: an idle one
        no session holds, else the least recently used other session's, saved to disk first.
        None when neither exists. An external server keeps no saved slots: there, no eviction,
        and only a brand-new session is given an idle slot (the server's own pick by similarity
        could put it on a short session's slot); a returning one goes `-1`, which finds the slot
        that still caches its prompt (the fewest-cached idle slot never is)."""
        st = self.state
        self._victim = None
        if st.conn is None or st.gate is None:
            return None
        if st.archive is None and not st.session.brand_new:
            return None
        holders = st.ledger.holders(st.conn.launch_id) if st.ledger is not None else {}
        me = st.session.id
        others = {s for s, h in holders.items() if h.session_id != me}
        own_pins = set(st.pool.pins.values())
        taken = (
            own_pins
            | others
            | (set() if st.ledger is not None else set(self.owners.known_owners()))
        )
        if not set(range(st.pool.total_slots)) <= taken | set(st.gate.held):
            # some slot may be free: `/slots` says which is idle (else, every slot taken, the
            # poll is skipped: it could only confirm that, and it sits on a first token)
            try:
                states = await st.conn.client.slots()
            except ServerError:
                states = None
            if states is None and st.archive is None:
                return None  # a blind pick on another client's server: let it choose
            avoid = () if st.side_slot is None else (st.side_slot,)
            slot = choose_restore_slot(
                states,
                st.pool.total_slots,
                pinned=taken,
                held=st.gate.held,
                avoid=avoid,
            )
            if slot is not None:
                return slot
        if st.archive is None:
            return None
        victim = choose_victim(holders, st.pool.total_slots, own_pins | set(st.gate.held), me)
        if victim is None:
            return None
        owner = holders[victim].session_id
        with anyio.move_on_after(SAVE_DEADLINE):
            try:
                tag, saved_now = await self._on_disk(victim, holders[victim])
                self._victim = (owner, tag.n_bytes)
                st.notes.append(
                    f"saved slot {victim} ({tag.n_saved:,} tokens of session {owner}) to disk "
                    "to make room"
                    if saved_now  # else saved ahead, between turns
                    else f"took slot {victim}: session {owner}'s prompt is saved on disk"
                )
            except (ServerError, OSError) as exc:
                st.notes.append(f"could not save slot {victim} before reusing it: {exc}")
        return victim

    async def _on_disk(self, slot: int, holder: Holder) -> tuple[ArchiveTag, bool]:
        """`holder`'s slot on disk: its file when saved on this launch since its last answer
        there, else saved now under the slot's lock; (tag, saved now)."""
        st = self.state
        assert st.conn is not None and st.gate is not None and st.archive is not None
        tag = st.archive.read_tag(holder.session_id)
        if self._saved_since(tag, holder.used):
            assert tag is not None
            return tag, False
        async with st.gate.hold(slot):
            facts = server_facts(st.conn)
            return await st.archive.save(st.conn.client, slot, holder.session_id, facts), True

    def _saved_since(self, tag: ArchiveTag | None, used: float) -> bool:
        """The session's saved slot (`tag`) is on this launch and newer than its last answer."""
        st = self.state
        launch = st.conn.launch_id if st.conn is not None else None
        return tag is not None and tag.launch_id == launch and tag.saved_at >= used

    async def save_ahead(self) -> None:
        """Between turns, when every slot but the side slot holds a session: save the least
        recently used other session's slot now (unless saved since its last answer), so the
        next session that needs a slot takes it without a save on its first token."""
        st = self.state
        conn, gate, archive, ledger = (
            st.conn,
            st.gate,
            st.archive,
            st.ledger,
        )
        if conn is None or gate is None or archive is None or ledger is None:
            return
        holders = ledger.holders(conn.launch_id)
        if len(holders) < st.pool.total_slots - 1:
            return  # a free slot is left for the next newcomer
        blocked = set(st.pool.pins.values()) | set(gate.held)
        victim = choose_victim(holders, st.pool.total_slots, blocked, st.session.id)
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
        st = self.state
        conn, gate, archive, ledger = (
            st.conn,
            st.gate,
            st.archive,
            st.ledger,
        )
        if conn is None or gate is None or archive is None or ledger is None or slot < 0:
            return None
        if not self.restores_are_reused():
            return None
        holders = ledger.holders(conn.launch_id)
        for donor_slot, holder in sorted(holders.items(), key=lambda kv: -kv[1].used):
            sid = holder.session_id
            if donor_slot == slot or gate.is_held(donor_slot) or sid == st.session.id:
                continue
            try:
                donor = st.store.load(sid)
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
                    f"started from {self.owners.title(sid)}'s cached prefix: its slot {donor_slot} "
                    f"copied into slot {slot} ({done.n_restored:,} tokens)"
                )
            return None
        return None
