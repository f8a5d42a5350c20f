"""The first-token watch under a virtual clock: every scenario runs in milliseconds."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import anyio
import pytest

from fusion_tui.server.errors import SlotsUnavailable, StreamStalled
from fusion_tui.server.types import SlotState
from fusion_tui.slots.watch import (
    Evidence,
    FirstTokenStall,
    FirstTokenTimeout,
    PollResult,
    WatchConfig,
    WatchReport,
    classify,
    watch_first_token,
)
from tests.fakes.clock import FakeClock

CFG = WatchConfig(poll_interval=15, poll_deadline=3, request_timeout=30, first_token_timeout=600)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def idle(i: int, cached: int = 0, task: int = 5) -> SlotState:
    return SlotState(id=i, n_ctx=4096, is_processing=False, id_task=task, n_prompt_tokens=cached)


def busy(i: int, processed: int = 0, task: int = 9) -> SlotState:
    return SlotState(
        id=i,
        n_ctx=4096,
        is_processing=True,
        id_task=task,
        n_prompt_tokens=processed,
        n_prompt_tokens_processed=processed,
    )


class Scenario:
    """Runs the watch against a scripted `/slots` (a function of virtual time)."""

    def __init__(self, script: Callable[[float], Sequence[SlotState]] | None) -> None:
        self.clock = FakeClock()
        self.script = script
        self.polls: list[PollResult] = []
        self.calls = 0

    async def slots(self) -> Sequence[SlotState]:
        self.calls += 1
        if self.script is None:  # a /slots that never answers
            await anyio.Event().wait()
        assert self.script is not None
        return self.script(self.clock.now())

    def run(
        self, first_byte_at: float | None, slot: int = 0, cfg: WatchConfig = CFG
    ) -> WatchReport | StreamStalled:
        async def body() -> WatchReport | StreamStalled:
            event = anyio.Event()
            outcome: WatchReport | StreamStalled
            async with anyio.create_task_group() as tg:
                if first_byte_at is not None:

                    async def first_byte() -> None:
                        await self.clock.sleep(first_byte_at)
                        event.set()

                    tg.start_soon(first_byte)
                try:
                    outcome = await watch_first_token(
                        self.slots,
                        slot,
                        event,
                        config=cfg,
                        clock=self.clock,
                        on_poll=self.polls.append,
                    )
                except StreamStalled as exc:
                    outcome = exc
                tg.cancel_scope.cancel()
            return outcome

        return body  # type: ignore[return-value]

    async def go(
        self, first_byte_at: float | None, slot: int = 0, cfg: WatchConfig = CFG
    ) -> WatchReport | StreamStalled:
        return await self.clock.run(self.run(first_byte_at, slot, cfg))  # type: ignore[arg-type]


async def test_slow_prompt_with_progress_waits_past_the_idle_budget_until_first_byte() -> None:
    s = Scenario(lambda t: [busy(0, processed=int(t * 100)), idle(1)])
    out = await s.go(first_byte_at=200)
    assert isinstance(out, WatchReport)
    assert s.clock.now() == 200  # ended at the first byte, far past request_timeout (30)
    assert out.polls == 13  # 15, 30, ..., 195
    assert {p.evidence for p in s.polls} == {Evidence.PROCESSING}


async def test_all_idle_is_a_stall_exactly_at_the_idle_budget() -> None:
    s = Scenario(lambda t: [idle(0), idle(1)])
    out = await s.go(first_byte_at=None, slot=1)
    assert isinstance(out, FirstTokenStall)
    assert s.clock.now() == 30
    assert out.slot == 1
    assert "slot 1" in str(out) and "retry" in str(out)


async def test_stall_lands_on_the_budget_even_when_it_is_not_a_multiple_of_the_interval() -> None:
    cfg = WatchConfig(
        poll_interval=15, poll_deadline=3, request_timeout=20, first_token_timeout=600
    )
    s = Scenario(lambda t: [idle(0)])
    out = await s.go(first_byte_at=None, cfg=cfg)
    assert isinstance(out, FirstTokenStall)
    assert s.clock.now() == 20
    assert [p.time for p in s.polls] == [15, 20]


async def test_idle_budget_counts_from_the_last_evidence() -> None:
    s = Scenario(lambda t: [busy(0, processed=int(t))] if t < 40 else [idle(0, cached=40)])
    out = await s.go(first_byte_at=None)
    assert isinstance(out, FirstTokenStall)
    # work seen at 15 and 30; at 45 the slot went idle (state moved), then idle at 60 and 75
    assert [p.evidence for p in s.polls] == [
        Evidence.PROCESSING,
        Evidence.PROCESSING,
        Evidence.MOVED,
        Evidence.IDLE,
        Evidence.IDLE,
    ]
    assert s.clock.now() == 75


async def test_hanging_slots_gives_no_early_verdict() -> None:
    s = Scenario(None)
    out = await s.go(first_byte_at=500)
    assert isinstance(out, WatchReport)
    assert s.clock.now() == 500
    assert out.answered == 0 and out.polls > 10
    assert {p.evidence for p in s.polls} == {Evidence.NO_ANSWER}


async def test_hanging_slots_ends_at_the_first_token_timeout() -> None:
    s = Scenario(None)
    out = await s.go(first_byte_at=None)
    assert isinstance(out, FirstTokenTimeout)
    assert s.clock.now() == 600
    assert "600 s" in str(out)


async def test_a_timed_out_poll_restarts_the_idle_budget() -> None:
    calls = {"n": 0}

    def script(t: float) -> Sequence[SlotState]:
        return [idle(0)]

    s = Scenario(script)
    original = s.slots

    async def flaky() -> Sequence[SlotState]:
        calls["n"] += 1
        if calls["n"] == 2:  # the poll at 30 never answers
            await anyio.Event().wait()
        return await original()

    s.slots = flaky  # type: ignore[method-assign]
    out = await s.go(first_byte_at=None)
    assert isinstance(out, FirstTokenStall)
    # poll 15 idle, poll 30 times out at 33 (budget restarts), idle polls at 45, 60 → stall at 63
    assert s.clock.now() == 63
    assert s.polls[1].evidence is Evidence.NO_ANSWER


async def test_queued_behind_another_slot_extends_the_wait() -> None:
    s = Scenario(lambda t: [idle(0), busy(1, processed=7)])
    out = await s.go(first_byte_at=300, slot=0)
    assert isinstance(out, WatchReport)
    assert s.clock.now() == 300
    assert {p.evidence for p in s.polls} == {Evidence.QUEUED}


async def test_state_change_on_idle_slots_counts_as_movement() -> None:
    s = Scenario(lambda t: [idle(0, cached=int(t // 15)), idle(1)])
    out = await s.go(first_byte_at=100)
    assert isinstance(out, WatchReport)
    assert [p.evidence for p in s.polls][1:] == [Evidence.MOVED] * 5


async def test_evidence_never_outlasts_the_first_token_timeout() -> None:
    s = Scenario(lambda t: [busy(0, processed=int(t))])
    out = await s.go(first_byte_at=None)
    assert isinstance(out, FirstTokenTimeout)
    assert s.clock.now() == 600
    assert out.last is Evidence.PROCESSING


async def test_disabled_watch_does_not_poll_and_keeps_the_backstop() -> None:
    cfg = WatchConfig(request_timeout=30, first_token_timeout=90, enabled=False)
    s = Scenario(lambda t: [idle(0)])
    out = await s.go(first_byte_at=None, cfg=cfg)
    assert isinstance(out, FirstTokenTimeout)
    assert s.clock.now() == 90 and s.calls == 0


async def test_slots_switched_off_falls_back_to_the_backstop() -> None:
    s = Scenario(lambda t: [idle(0)])

    async def off() -> Sequence[SlotState]:
        s.calls += 1
        raise SlotsUnavailable(501, "This server does not support slots endpoint")

    s.slots = off  # type: ignore[method-assign]
    out = await s.go(first_byte_at=None)
    assert isinstance(out, FirstTokenTimeout)
    assert s.calls == 1 and s.clock.now() == 600


async def test_first_byte_already_there_returns_at_once() -> None:
    s = Scenario(lambda t: [idle(0)])
    out = await s.go(first_byte_at=0)
    assert isinstance(out, WatchReport)
    assert out.polls == 0 and s.clock.now() == 0


def test_classify_unpinned_request_counts_any_processing_slot() -> None:
    assert classify([idle(0), busy(1)], None, -1) is Evidence.PROCESSING
    assert classify([idle(0), busy(1)], None, 0) is Evidence.QUEUED
    assert classify([busy(0), idle(1)], None, 0) is Evidence.PROCESSING
    assert classify([idle(0), idle(1)], [idle(0), idle(1)], 0) is Evidence.IDLE
    assert classify([idle(0, task=6)], [idle(0, task=5)], 0) is Evidence.MOVED
