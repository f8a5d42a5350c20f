"""Provides `WarmResume`: how a resumed session gets its prompt back without a re-read.

Same server: the first request goes `-1` and the server finds the slot that still holds it. New
server: the slot saved on disk is restored into a free slot (refused, with the reason, when the
model, context or cache types changed) and pinned before the first request. A brand-new session
takes a never-used slot while one is free. A mixin of `LocalBackend`, kept apart for size.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_tui.chat.session_hooks import SessionHooks
from fusion_tui.chat.warm import server_facts
from fusion_tui.server.errors import ServerError
from fusion_tui.sessions.model import ServerIdentity
from fusion_tui.slots.archive import (
    ArchiveRefused,
    Restored,
    choose_fresh_slot,
    choose_restore_slot,
)


@dataclass
class ResumeState:
    """How the current session came back: `same` server, `restored` from disk, or `cold`."""

    kind: str
    restored: Restored | None = None
    reason: str = ""


class WarmResume(SessionHooks):
    _resume: ResumeState | None
    _resume_checked: bool

    def _reset_resume(self) -> None:
        self._resume, self._resume_checked = None, False

    def identity(self) -> ServerIdentity:
        assert self.conn is not None
        props = self.conn.props
        return ServerIdentity(props.model_path, self.conn.launch_id, props.total_slots)

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
            self._resume = ResumeState("same")
            return []
        if self.archive is None:
            return self._cold("this server keeps no saved slots (not a managed launch)")
        try:
            states = await self.conn.client.slots()
        except ServerError:
            states = None
        slot = choose_restore_slot(
            states,
            self.pool.total_slots,
            pinned=self.pool.pins.values(),
            held=self.gate.held,
        )
        if slot is None:
            return self._cold("no free slot to restore the saved one into")
        try:
            async with self.gate.hold(slot):
                restored = await self.archive.restore(
                    self.conn.client, slot, session.id, server_facts(self.conn)
                )
        except ArchiveRefused as exc:
            return self._cold(str(exc))
        self.pool.pin(session.id, slot)
        session.pinned_slot = slot
        self._resume = ResumeState("restored", restored)
        return [
            f"restored the saved slot into slot {slot} ({restored.n_restored:,} tokens in "
            f"{restored.restore_ms / 1000:.1f} s)"
        ]

    async def _fresh_slot(self) -> int:
        """An empty slot no known session holds, for a brand-new session; else -1."""
        assert self.conn is not None and self.gate is not None
        try:
            states = await self.conn.client.slots()
        except ServerError:
            return -1
        taken = set(self.pool.pins.values()) | set(self.gate.held)
        taken |= set(self.known_owners())
        if self._side_slot is not None:
            taken.add(self._side_slot)
        slot = choose_fresh_slot(states, self.pool.total_slots, taken)
        return -1 if slot is None else slot

    def _cold(self, reason: str) -> list[str]:
        self._resume = ResumeState("cold", reason=reason)
        return [f"cold start: {reason}"]
