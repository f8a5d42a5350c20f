"""Provides `SlotPolicy`, the slot policy a `SessionRunner` is given, and `PolicySlots`, the
loop's `SlotChooser` under it.

Why a protocol here: the policy is `slots.keeper.SlotKeeper`, and the runner of `fusion-tui run`,
the TUI's agent mode and the bench must all place their requests by it; the agent names only
the calls it makes, so a test can hand it a scripted policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from fusion_tui.slots.pins import SlotPool


class SlotPolicy(Protocol):
    """The one slot policy of every path (`slots.keeper.SlotKeeper` implements it): a fresh
    slot for a brand-new session, `-1` then the pin for a resumed one, its saved slot restored
    on a new daemon, another session's slot saved to disk before it is taken."""

    async def warm_resume(self) -> list[str]: ...

    async def next_slot(self) -> int: ...

    def take_notes(self) -> list[str]: ...

    async def seed(self, slot: int, prefix_hash: str, prefix_tokens: int) -> str | None: ...

    def pin_answer(self, id_slot: int) -> None: ...

    def answered_reusing(self, cache_n: int) -> None: ...

    def side_slot_for(self, *, free_only: bool = False) -> int | None: ...


@dataclass
class PolicySlots:
    """The loop's `SlotChooser` under a `SlotPolicy`: pins from the pool, side calls (the
    compaction summary) on a slot no session of any process holds."""

    pool: SlotPool
    policy: SlotPolicy

    def slot_for(self, session_id: str) -> int:
        return self.pool.slot_for(session_id)

    def pin(self, session_id: str, slot: int) -> object:
        return self.pool.pin(session_id, slot)

    def side_call_slot(self) -> int:
        slot = self.policy.side_slot_for()
        return -1 if slot is None else slot
