"""Snapshots of the slot map beside a stand-in chat column (fixed data, no timer, no clock)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tui.test_slot_map import Answers, SlotMapHost, slot

SIZES = [(80, 24), (160, 48)]
IDLE = [slot(0, cached=1200), slot(1), slot(2, cached=3900), slot(3, cached=40)]
BEFORE = [
    slot(0, processing=True, task=3, processed=512, reused=1000, cached=1536),
    slot(1, processing=True, task=4, decoded=10, cached=300),
    slot(2),
    slot(3, cached=40),
]
AFTER = [
    slot(0, processing=True, task=3, processed=1536, reused=1000, cached=2560),
    slot(1, processing=True, task=4, decoded=30, cached=320),
    slot(2),
    slot(3, processing=True, task=9, processed=200, cached=200),
]
OWNERS = {0: "Fix the parser bug", 1: "Write the README", 3: "side"}


def _host(*answers: list[Any], owners: dict[int, str] | None = None) -> SlotMapHost:
    host = SlotMapHost(Answers(*answers), owners, {0: 4000}, clock_times=[100.0, 102.0])

    async def polls(pilot: Any) -> None:
        for _ in answers:
            await host.slot_map.refresh_now()
        await pilot.pause()

    host.run_before = polls  # type: ignore[attr-defined]
    return host


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_idle_slots(snap_compare: Any, size: tuple[int, int]) -> None:
    """160×48: on the right, "Slots · 0/4 busy" and four idle slots (○ idle), slot 0 owned by
    "Fix the parser bug", slot 3 by "side" (italic), cache bars for 1,200, 0, 3,900 and 40 of
    4,096 tokens. 80×24: the map collapses to one top line "slots 0/4 busy"."""
    host = _host(IDLE, owners={0: "Fix the parser bug", 3: "side"})
    assert snap_compare(host, terminal_size=size, run_before=host.run_before)  # type: ignore[attr-defined]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_processing_with_progress(snap_compare: Any, size: tuple[int, int]) -> None:
    """160×48: "Slots · 3/4 busy"; slot 0 (Fix the parser bug) ● prompt with a prompt bar at
    2,536/4,000 · 512 tok/s; slot 1 (Write the README) ● decoding 30 tok · 10.0 tok/s; slot 2
    idle; slot 3 (side) ● prompt 200 read, no rate (a new task). 80×24: one top line
    "slots 3/4 busy │ #0 Fix the parser … prompt 63% · 512 tok/s │ #1 Write the RE…" (cut with an
    ellipsis at the edge)."""
    host = _host(BEFORE, AFTER, owners=OWNERS)
    assert snap_compare(host, terminal_size=size, run_before=host.run_before)  # type: ignore[attr-defined]


def test_side_slot_busy_and_poll_timed_out(snap_compare: Any) -> None:
    """120×30: the side slot (3) is decoding a side call; the header is in the warning colour
    and reads "Slots · 1/4 busy · busy: no answer within 0.01 s" (the last map stays drawn)."""
    side = [slot(0, cached=1200), slot(1), slot(2), slot(3, processing=True, task=2, decoded=7)]

    async def hang() -> list[Any]:
        import asyncio

        await asyncio.Event().wait()
        return []

    answers = Answers(side)
    host = SlotMapHost(answers, {3: "side"}, deadline=0.01, clock_times=[1.0])

    async def run_before(pilot: Any) -> None:
        await host.slot_map.refresh_now()
        host.slot_map._slots_fn = hang
        await host.slot_map.refresh_now()
        await pilot.pause()

    assert snap_compare(host, terminal_size=(120, 30), run_before=run_before)


def test_slots_endpoint_disabled(snap_compare: Any) -> None:
    """120×30: the map shows only the one-line explanation in the error colour:
    "/slots is switched off on this server (start it with --slots): no slot map." (wrapped)."""
    from fusion_tui.server.errors import SlotsUnavailable

    host = SlotMapHost(Answers(SlotsUnavailable(501, "not supported")))

    async def run_before(pilot: Any) -> None:
        await host.slot_map.refresh_now()
        await pilot.pause()

    assert snap_compare(host, terminal_size=(120, 30), run_before=run_before)
