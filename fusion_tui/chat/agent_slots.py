"""Provides `AgentSlots`: the slot map's `SlotView` in agent mode.

Agent mode has no `SlotKeeper` (the agent loop picks its slots), so this view reads the
server's `/slots` through the backend's connection and names the slot the session's latest
request ran on (the session records every agent request) as the session's own.
"""

from __future__ import annotations

from typing import Protocol

from fusion_tui.runtime import Connection
from fusion_tui.server.errors import ServerError
from fusion_tui.server.types import SlotState
from fusion_tui.sessions.model import Session


class _Host(Protocol):
    """What the view reads of the agent backend, always the current values."""

    conn: Connection | None
    session: Session


class AgentSlots:
    """The slots of the agent backend's server and which of them this session rides."""

    def __init__(self, host: _Host) -> None:
        self.host = host

    async def slots(self) -> list[SlotState]:
        conn = self.host.conn
        if conn is None:
            raise ServerError("the server is not connected yet")
        return await conn.client.slots()

    def _own_slot(self) -> int | None:
        own = [r for r in self.host.session.requests if not r.side_call and r.id_slot >= 0]
        return own[-1].id_slot if own else None

    def slot_owners(self) -> dict[int, str]:
        slot = self._own_slot()
        if slot is None:
            return {}
        return {slot: self.host.session.title or "this session"}

    def prompt_totals(self) -> dict[int, int]:
        return {}  # the map falls back on what `/slots` says of the prompt

    def session_on_slot(self, slot: int) -> str | None:
        return self.host.session.id if self._own_slot() == slot else None
