"""Provides `EndpointSlotMap`: the slot map grouped by endpoint (several servers).

The same widget as `SlotMap` (poll timer, deadline, narrow mode, selection), fed by
`GroupedSlotView.endpoint_groups()` instead of one server's `/slots`: each endpoint gets a
header line (label, model, measured tok/s, health; `◆` marks this session's endpoint) and its
slots under it. Only mounted when more than one endpoint is configured, so the one-server map and
its snapshots are untouched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
from textual import on
from textual.content import Content
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from fusion_tui.endpoints.slot_groups import EndpointSlots, header_text
from fusion_tui.slots.rates import SlotSample, readings
from fusion_tui.tui.widgets.slot_map import (
    PollStatus,
    SlotMap,
    SlotRow,
    compact_error,
    row_content,
    status_line,
    summary_line,
)

GroupsFn = Callable[[], Awaitable[list[EndpointSlots]]]


class EndpointSlotMap(SlotMap):
    """Slots under one header per endpoint."""

    DEFAULT_CSS = """
    EndpointSlotMap > #slot-list > .option-list--option-disabled { color: $accent; }
    """

    def __init__(self, groups_fn: GroupsFn, *args: Any, **kwargs: Any) -> None:
        super().__init__(self._no_slots, *args, **kwargs)
        self._groups_fn = groups_fn
        self.groups: tuple[EndpointSlots, ...] = ()
        self._row_ids: list[str] = []
        self._samples: dict[str, SlotSample] = {}

    @staticmethod
    async def _no_slots() -> list[Any]:
        return []

    async def refresh_now(self) -> None:
        """Poll every endpoint once with the deadline and redraw."""
        self._polling = True
        try:
            with anyio.fail_after(self.deadline):
                groups = await self._groups_fn()
        except TimeoutError:
            self.status = PollStatus("busy", f"no answer within {self.deadline:g} s")
        except Exception as exc:
            self.status = PollStatus("error", compact_error(exc))
        else:
            self.feed_groups(groups)
        finally:
            self._polling = False

    def feed_groups(self, groups: Sequence[EndpointSlots], at: float | None = None) -> None:
        """Show one answered poll of every endpoint (`at`: monotonic seconds)."""
        now = self._clock() if at is None else at
        totals = self._totals_fn() if self._totals_fn is not None else None
        rows: list[SlotRow] = []
        for group in groups:
            sample = SlotSample(now, tuple(group.slots))
            got = readings(
                self._samples.get(group.label), sample, totals if group.current else None
            )
            rows += [SlotRow(r, group.owners.get(r.id, "")) for r in got]
            self._samples[group.label] = sample
        self.groups = tuple(groups)
        self.rows = tuple(rows)
        self.status = PollStatus("ok")
        self._draw()

    def _draw(self) -> None:
        if not self.is_mounted:
            return
        self.query_one("#slot-head", Static).update(status_line(self.rows, self.status))
        heads = " │ ".join(g.label + ("" if g.healthy else " down") for g in self.groups)
        summary = summary_line(self.rows, self.status)
        self.query_one("#slot-summary", Static).update(f"{heads} · {summary}" if heads else summary)
        options: list[Option] = []
        ids: list[str] = []
        index = 0
        for group in self.groups:
            options.append(
                Option(Content(header_text(group)), id=f"ep-{group.label}", disabled=True)
            )
            ids.append("")
            for _ in group.slots:
                row = self.rows[index]
                index += 1
                oid = f"{group.label}-slot-{row.reading.id}"
                options.append(Option(row_content(row), id=oid))
                ids.append(oid)
        listing = self.query_one("#slot-list", OptionList)
        highlighted = listing.highlighted
        listing.set_options(options)
        self._row_ids = ids
        if options:
            first = next((i for i, oid in enumerate(ids) if oid), None)
            if first is not None:
                listing.highlighted = max(first, min(highlighted or first, len(options) - 1))

    @on(OptionList.OptionSelected, "#slot-list")
    def _selected_grouped(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        event.prevent_default()  # the one-server handler (SlotMap's) indexes rows, not options
        oid = self._row_ids[event.option_index] if event.option_index < len(self._row_ids) else ""
        if not oid:
            return
        label, _, slot = oid.rpartition("-slot-")
        group = next((g for g in self.groups if g.label == label), None)
        owner = group.owners.get(int(slot), "") if group is not None else ""
        if group is not None and group.current:
            self.post_message(self.SlotSelected(self, int(slot), owner))
