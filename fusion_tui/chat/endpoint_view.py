"""Provides `EndpointSlotView`: the slot map over several endpoints, and `follow`.

With several endpoints `LocalBackend.slot_view()` and `AgentBackend.slot_view()` answer with this
instead of their `SlotKeeper`: the same `SlotView` (the current endpoint's slots and owners,
through the keeper), plus `endpoint_groups()`, every endpoint's slots under its label, model,
speed and health, which the TUI recognises by the `GroupedSlotView` protocol. Both backends keep
their keeper attached to the endpoint the session runs on (`follow`), so the keeper's slots,
pins, gate and owners are that server's, and the current group is its label.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from fusion_tui.endpoints.session_pins import EndpointPins, slot_groups
from fusion_tui.endpoints.slot_groups import EndpointSlots
from fusion_tui.server.connect import Connection
from fusion_tui.server.types import SlotState
from fusion_tui.slots.keeper import SlotKeeper


def follow(keeper: SlotKeeper, conn: Connection) -> None:
    """Keep the session's slots on `conn` from now on: the endpoint its requests go to (a new
    placement, a move). Nothing changes when the keeper is there already."""
    if keeper.conn is not conn:
        keeper.attach(conn)


@runtime_checkable
class GroupedSlotView(Protocol):
    """A slot view that can also group every endpoint's slots."""

    async def endpoint_groups(self) -> list[EndpointSlots]: ...


class EndpointSlotView:
    """The keeper's `SlotView` of the current endpoint, and every endpoint's group."""

    def __init__(
        self, keeper: SlotKeeper, pins: EndpointPins, current: Callable[[], str | None]
    ) -> None:
        self.keeper = keeper
        self.pins = pins
        self.current = current

    async def slots(self) -> list[SlotState]:
        return await self.keeper.slots()

    def slot_owners(self) -> dict[int, str]:
        return self.keeper.slot_owners()

    def prompt_totals(self) -> dict[int, int]:
        return self.keeper.prompt_totals()

    def session_on_slot(self, slot: int) -> str | None:
        return self.keeper.session_on_slot(slot)

    def sessions_on_disk(self) -> list[str]:
        return self.keeper.sessions_on_disk()

    async def endpoint_groups(self) -> list[EndpointSlots]:
        """Probe every endpoint (bounded) and group its slots."""
        await self.pins.watcher.poll_once()
        return slot_groups(self.pins, self.current(), self.keeper.slot_owners())


def grouped_view(
    keeper: SlotKeeper, pins: EndpointPins, current: Callable[[], str | None] | None = None
) -> EndpointSlotView:
    """The slot map's view over `pins`; the current endpoint is `current()`'s label, else the
    one the keeper is attached to (`follow`)."""
    return EndpointSlotView(keeper, pins, current or (lambda: pins.label_of(keeper.conn)))
