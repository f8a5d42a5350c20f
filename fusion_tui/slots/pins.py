"""Provides the slot pool: which session's prompt lives in which llama-server slot.

Pure policy, no I/O. The pool learns the slot count and server identity from `/props`. A session
is unpinned (`slot_for` = -1, let the server pick by prompt similarity) on its first request and
after a resize or a server change; the slot reported by that request's final event is pinned and
used for every later request of the session. Pins are validated against `total_slots` because
llama-server silently wraps an out-of-range `id_slot` onto another slot (reference §3).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

UNPINNED = -1


class PoolChange(Enum):
    """What an `update` did to the pool."""

    NONE = "none"
    FIRST = "first"
    RESIZED = "resized"
    SERVER_CHANGED = "server_changed"


@dataclass(frozen=True)
class ServerKey:
    """The identity pins are valid for: same model file, same launch."""

    model_path: str
    launch_id: str | None = None


class SlotPool:
    """Session→slot pins for one server, and the per-call choice of the side-call slot."""

    def __init__(self, total_slots: int = 0, server: ServerKey | None = None) -> None:
        if total_slots < 0:
            raise ValueError("total_slots must be >= 0")
        self._total = total_slots
        self._server = server
        self._pins: dict[str, int] = {}
        self._last_use: dict[str, int] = {}
        self._tick = 0
        self._last_side: int | None = None

    # --- pool identity -----------------------------------------------------------------------

    @property
    def total_slots(self) -> int:
        return self._total

    @property
    def server(self) -> ServerKey | None:
        return self._server

    def update(self, total_slots: int, model_path: str, launch_id: str | None = None) -> PoolChange:
        """Refresh from `/props` (call it every time `/props` is read). Clears pins on change."""
        if total_slots < 1:
            raise ValueError(f"total_slots must be >= 1, got {total_slots}")
        key = ServerKey(model_path, launch_id)
        if self._server is None and self._total == 0:
            change = PoolChange.FIRST
        elif self._server is not None and self._server != key:
            change = PoolChange.SERVER_CHANGED
        elif total_slots != self._total:
            change = PoolChange.RESIZED
        else:
            change = PoolChange.NONE
        if change in (PoolChange.SERVER_CHANGED, PoolChange.RESIZED):
            self.clear()
        self._server = key
        self._total = total_slots
        return change

    def clear(self) -> None:
        self._pins.clear()
        self._last_use.clear()
        self._last_side = None

    # --- pins --------------------------------------------------------------------------------

    def _touch(self, session_id: str) -> None:
        self._tick += 1
        self._last_use[session_id] = self._tick

    def pin(self, session_id: str, slot: int) -> str | None:
        """Pin the session to `slot` (the final event's `id_slot`).

        Returns the id of a session that was pinned there before and lost its slot (the server
        put this prompt over its cache), or None. An id outside the pool is not pinned.
        """
        if not 0 <= slot < self._total:
            self.unpin(session_id)
            return None
        displaced = self.owner_of(slot)
        if displaced == session_id:
            displaced = None
        elif displaced is not None:
            self.unpin(displaced)
        self._pins[session_id] = slot
        self._touch(session_id)
        if self._last_side == slot:
            self._last_side = None
        return displaced

    def unpin(self, session_id: str) -> None:
        self._pins.pop(session_id, None)
        self._last_use.pop(session_id, None)

    def slot_for(self, session_id: str) -> int:
        """The slot to name in the session's next request, or -1 (let the server choose)."""
        slot = self._pins.get(session_id)
        if slot is None:
            return UNPINNED
        if slot >= self._total:  # defensive: pins are cleared on resize, never wrap
            self.unpin(session_id)
            return UNPINNED
        self._touch(session_id)
        return slot

    def owner_of(self, slot: int) -> str | None:
        for sid, s in self._pins.items():
            if s == slot:
                return sid
        return None

    @property
    def pins(self) -> dict[str, int]:
        return dict(self._pins)

    # --- side calls --------------------------------------------------------------------------

    def side_call_slot(self, busy: Iterable[int] = (), avoid: Iterable[int] = ()) -> int:
        """The slot for a side call (title, summary, compaction), or -1 in a one-slot pool.

        Chosen per call. Preference: a slot no session is pinned to (the one used for the last
        side call first, its cache holds the side prompts), then not busy, then the pinned slot
        whose session was used longest ago. `avoid` (e.g. the caller's own slot) and `busy`
        (slots with a request in flight) are taken only when nothing else exists.
        """
        if self._total < 2:
            return UNPINNED
        busy_set, avoid_set = set(busy), set(avoid)
        pinned = {s: sid for sid, s in self._pins.items()}

        def rank(slot: int) -> tuple[int, int, int, int, int]:
            owner = pinned.get(slot)
            age = self._last_use.get(owner, 0) if owner is not None else 0
            return (
                slot in avoid_set,
                owner is not None,
                slot in busy_set,
                age,
                0 if slot == self._last_side else 1,  # stick to the previous side slot
            )

        # ascending: a fresh server's LRU sends unpinned requests to the highest ids first
        best = min(range(self._total), key=rank)
        self._last_side = best
        return best
