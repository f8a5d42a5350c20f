"""The throughput probe waits for a quiet server and does not keep a figure it shared."""

from __future__ import annotations

from typing import Any

import pytest

from fusion_tui.server.process.probe import ProbeResult, measured_alone, wait_quiet
from fusion_tui.server.types import SlotState

pytestmark = pytest.mark.anyio


class Slots:
    """A client whose `/slots` answers from a script: True where a slot is processing."""

    def __init__(self, busy: list[bool], clock: list[float]) -> None:
        self.busy, self.clock, self.calls = busy, clock, 0

    async def slots(self, timeout: float = 3.0) -> list[SlotState]:
        now = self.busy[min(self.calls, len(self.busy) - 1)]
        self.calls += 1
        self.clock[0] += 1.0  # a poll a second
        return [SlotState(id=0, n_ctx=512, is_processing=now), SlotState(1, 512, False)]


class NoSlots:
    async def slots(self, timeout: float = 3.0) -> list[SlotState]:
        raise RuntimeError("501: slots are switched off")


def fast(clock: list[float]) -> dict[str, Any]:
    return {"quiet_s": 3.0, "poll_s": 0.0, "give_up_s": 10.0, "clock": lambda: clock[0]}


async def test_the_probe_waits_until_the_server_has_been_quiet_a_while() -> None:
    clock = [0.0]
    client = Slots([True, True, False, False, False, False, False], clock)
    assert await wait_quiet(client, **fast(clock))  # type: ignore[arg-type]
    assert client.calls == 6  # two busy polls, then quiet from the third to the sixth


async def test_a_server_never_quiet_gives_the_probe_up() -> None:
    clock = [0.0]
    assert not await wait_quiet(Slots([True], clock), **fast(clock))  # type: ignore[arg-type]


async def test_a_server_without_slots_counts_as_quiet() -> None:
    assert await wait_quiet(NoSlots(), **fast([0.0]))  # type: ignore[arg-type]


async def test_a_figure_measured_beside_another_request_is_measured_again() -> None:
    clock = [0.0]
    # quiet for the first try, a slot busy through the settling time after it; quiet again,
    # and alone at the end
    client = Slots([False] * 4 + [True] * 3 + [False] * 4 + [False], clock)
    figures = iter([3.6, 10.4, 3.0, 3.0, 3.0])

    async def measure() -> ProbeResult:
        return ProbeResult(tok_s=next(figures), predicted_n=64, predicted_ms=1.0)

    got = await measured_alone(client, measure, **fast(clock))  # type: ignore[arg-type]
    assert got is not None and got.tok_s == 10.4

    clock = [0.0]
    busy_each_end = Slots(([False] * 4 + [True] * 3) * 3, clock)
    got = await measured_alone(busy_each_end, measure, **fast(clock))  # type: ignore[arg-type]
    assert got is None  # three tries, each shared: no figure rather than a wrong one


async def test_the_probe_s_own_request_winding_down_is_not_a_neighbour() -> None:
    """A probe cut at its bound leaves its slot decoding until the server sees the closed
    connection: busy for a poll or two after the probe, then idle, is the probe alone."""
    clock = [0.0]
    client = Slots([False] * 4 + [True, True, False], clock)

    async def measure() -> ProbeResult:
        return ProbeResult(tok_s=3.3, predicted_n=5, predicted_ms=1.0, partial=True)

    got = await measured_alone(client, measure, **fast(clock))  # type: ignore[arg-type]
    assert got is not None and got.tok_s == 3.3
    assert client.calls == 7  # one try: four quiet polls, then settled at the third
