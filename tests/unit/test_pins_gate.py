"""The per-slot gate: one request of this app per slot; busy slots on the server are waited for."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from fusion_tui.server.errors import SlotsUnavailable
from fusion_tui.server.types import SlotState
from fusion_tui.slots.gate import SlotGate, wait_until_idle

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_second_request_on_a_slot_waits_and_is_told_once() -> None:
    gate = SlotGate()
    log: list[str] = []
    messages: list[str] = []
    release = anyio.Event()

    async def first() -> None:
        async with gate.hold(2):
            log.append("first in")
            await release.wait()
            log.append("first out")

    async def second() -> None:
        async with gate.hold(2, on_wait=messages.append):
            log.append("second in")

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await anyio.sleep(0.01)
        tg.start_soon(second)
        await anyio.sleep(0.01)
        assert gate.held == {2}
        assert log == ["first in"]
        assert messages == ["waiting for slot 2"]
        release.set()
    assert log == ["first in", "first out", "second in"]
    assert messages == ["waiting for slot 2"]
    assert gate.held == frozenset()


async def test_other_slots_and_unpinned_requests_do_not_wait() -> None:
    gate = SlotGate(total_slots=lambda: 4)
    async with gate.hold(0), gate.hold(1) as lease1:
        assert lease1.slot == 1
        with anyio.fail_after(1):
            async with gate.hold(-1) as anon:
                assert anon.slot == -1
                assert gate.anonymous_in_flight == 1
    assert gate.anonymous_in_flight == 0


async def test_unpinned_request_in_a_one_slot_pool_is_slot_zero() -> None:
    gate = SlotGate(total_slots=lambda: 1)
    order: list[str] = []
    release = anyio.Event()

    async def holder() -> None:
        async with gate.hold(0):
            order.append("a")
            await release.wait()

    async def anon() -> None:
        async with gate.hold(-1) as lease:
            order.append(f"b{lease.slot}")

    async with anyio.create_task_group() as tg:
        tg.start_soon(holder)
        await anyio.sleep(0.01)
        tg.start_soon(anon)
        await anyio.sleep(0.01)
        assert order == ["a"]
        release.set()
    assert order == ["a", "b0"]


async def test_gate_waits_while_the_server_reports_the_slot_busy() -> None:
    answers = iter([True, True, False])
    messages: list[str] = []

    async def probe(slot: int) -> bool | None:
        assert slot == 3
        return next(answers)

    sleeps: list[float] = []

    async def fake_sleep(s: float) -> None:
        sleeps.append(s)

    gate = SlotGate(busy_probe=probe, poll_interval=0.5, sleep=fake_sleep)
    async with gate.hold(3, on_wait=messages.append) as lease:
        assert lease.slot == 3
    assert sleeps == [0.5, 0.5]
    assert messages == ["waiting for slot 3"]


def _slot(i: int, processing: bool) -> SlotState:
    return SlotState(id=i, n_ctx=2048, is_processing=processing)


async def test_wait_until_idle_polls_slots() -> None:
    seq = iter([[_slot(0, True), _slot(1, True)], [_slot(0, False), _slot(1, True)]])
    calls = {"n": 0}

    async def slots() -> Sequence[SlotState]:
        calls["n"] += 1
        return next(seq)

    async def no_sleep(_: float) -> None:
        return None

    messages: list[str] = []
    assert await wait_until_idle(slots, 0, on_wait=messages.append, sleep=no_sleep) is True
    assert calls["n"] == 2 and messages == ["waiting for slot 0"]


async def test_wait_until_idle_cannot_tell_without_slots_endpoint() -> None:
    async def off() -> Sequence[SlotState]:
        raise SlotsUnavailable(501, "This server does not support slots endpoint")

    assert await wait_until_idle(off, 0) is False

    async def unknown() -> Sequence[SlotState]:
        return [_slot(0, False)]

    assert await wait_until_idle(unknown, 5) is False


async def test_bad_slot_is_refused() -> None:
    gate = SlotGate()
    with pytest.raises(ValueError, match="slot"):
        async with gate.hold(-3):
            pass


async def test_exclusive_gate_skips_the_probe_unless_a_minus_one_is_out() -> None:
    calls: list[int] = []
    exclusive = {"on": True}

    async def probe(slot: int) -> bool | None:
        calls.append(slot)
        return False

    gate = SlotGate(busy_probe=probe, exclusive=lambda: exclusive["on"])
    async with gate.hold(2):
        pass
    assert calls == [] and gate.probes_skipped == 1
    async with gate.hold(-1), gate.hold(2):  # a -1 of ours may land on slot 2: probe again
        pass
    assert calls == [2]
    exclusive["on"] = False  # another client appeared: always probe
    async with gate.hold(1):
        pass
    assert calls == [2, 1] and gate.probes_skipped == 1
