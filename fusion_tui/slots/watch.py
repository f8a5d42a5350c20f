"""Provides the first-token progress watch and the prompt-progress tracker.

Why: on a CPU a long prompt can take minutes before its first token. A flat first-token timer
either kills legitimate work or waits forever. The watch polls `GET /slots` while a stream waits
for its first byte and only calls a stall when the server keeps answering with every slot idle and
nothing moving for a whole idle budget. A poll that times out is no verdict; the first-token
timeout stays the backstop. All timing goes through an injected `Clock`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import Enum

import anyio
import httpx

from fusion_tui.clock import REAL_CLOCK, Clock
from fusion_tui.config import Settings
from fusion_tui.server.errors import ServerError, SlotsUnavailable, StreamStalled
from fusion_tui.server.types import SlotState, StreamEvent

SlotsFn = Callable[[], Awaitable[Sequence[SlotState]]]


@dataclass(frozen=True)
class WatchConfig:
    """Seconds. `request_timeout` is the idle budget, `first_token_timeout` the backstop."""

    poll_interval: float = 15.0
    poll_deadline: float = 3.0
    request_timeout: float = 120.0
    first_token_timeout: float = 1800.0
    enabled: bool = True


class Evidence(Enum):
    """What one poll of `/slots` says about the waiting request."""

    PROCESSING = "processing"  # our slot (or, unpinned, some slot) is processing
    QUEUED = "queued"  # another slot is processing: we wait behind it
    MOVED = "moved"  # some slot's state changed since the last answered poll
    IDLE = "idle"  # answered: every slot idle, nothing moved
    NO_ANSWER = "no_answer"  # timed out or failed: no verdict
    UNAVAILABLE = "unavailable"  # /slots is switched off: the watch falls back to the backstop


@dataclass(frozen=True)
class PollResult:
    """Passed to `on_poll` after every poll."""

    time: float
    evidence: Evidence
    slots: tuple[SlotState, ...]
    idle_for: float
    """Seconds since the last evidence of work (or since the watch began)."""


class FirstTokenStall(StreamStalled):
    """The server answered with every slot idle and nothing moving for the whole idle budget."""

    def __init__(self, slot: int, idle_s: float) -> None:
        self.slot = slot
        self.idle_s = idle_s
        retry = (
            f"retry: it is sent to slot {slot} again, where the session's cache is kept"
            if slot >= 0
            else "retry: the server will choose the slot"
        )
        super().__init__(
            f"no first token: llama-server answered with every slot idle and nothing moving "
            f"for {idle_s:.0f} s, so the request seems lost; {retry}"
        )


class FirstTokenTimeout(StreamStalled):
    """No first token within the first-token timeout, progress or not."""

    def __init__(self, slot: int, waited_s: float, last: Evidence | None) -> None:
        self.slot = slot
        self.waited_s = waited_s
        self.last = last
        seen = f" (last seen: {last.value})" if last is not None else ""
        super().__init__(
            f"no first token within {waited_s:.0f} s, the first-token timeout{seen}; "
            "raise firstTokenTimeoutMs for longer prompts on this machine"
        )


@dataclass
class WatchReport:
    polls: int = 0
    answered: int = 0
    last: Evidence | None = None


def _fingerprint(states: Sequence[SlotState]) -> tuple[tuple[int, ...], ...]:
    return tuple(
        (
            s.id,
            int(s.is_processing),
            s.id_task,
            s.n_prompt_tokens,
            s.n_prompt_tokens_processed,
            s.n_decoded,
        )
        for s in sorted(states, key=lambda s: s.id)
    )


def classify(
    states: Sequence[SlotState], previous: Sequence[SlotState] | None, slot: int
) -> Evidence:
    """Evidence of work in one answered poll (pure)."""
    mine = [s for s in states if s.id == slot]
    if slot >= 0 and mine and mine[0].is_processing:
        return Evidence.PROCESSING
    others = [s for s in states if s.is_processing and s.id != slot]
    if others:
        return Evidence.PROCESSING if slot < 0 else Evidence.QUEUED
    if previous is not None and _fingerprint(states) != _fingerprint(previous):
        return Evidence.MOVED
    return Evidence.IDLE


async def _poll(
    slots_fn: SlotsFn, deadline: float, clock: Clock
) -> tuple[Evidence | None, Sequence[SlotState]]:
    """One poll under a deadline on `clock`: (None, states) when answered."""
    outcome: Evidence | None = Evidence.NO_ANSWER
    result: list[Sequence[SlotState]] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            nonlocal outcome
            try:
                result.append(await slots_fn())
                outcome = None
            except SlotsUnavailable:
                outcome = Evidence.UNAVAILABLE
            except (ServerError, OSError, httpx.HTTPError):
                outcome = Evidence.NO_ANSWER
            tg.cancel_scope.cancel()

        async def timer() -> None:
            await clock.sleep(deadline)
            tg.cancel_scope.cancel()

        tg.start_soon(run)
        tg.start_soon(timer)
    return outcome, (result[0] if result else ())


async def _watch(
    slots_fn: SlotsFn,
    slot: int,
    cfg: WatchConfig,
    clock: Clock,
    on_poll: Callable[[PollResult], None] | None,
    report: WatchReport,
) -> None:
    start = clock.now()
    hard = start + cfg.first_token_timeout
    idle_since = start
    next_poll = start + cfg.poll_interval
    previous: Sequence[SlotState] | None = None
    polling = cfg.enabled
    while True:
        now = clock.now()
        if now >= hard:
            raise FirstTokenTimeout(slot, now - start, report.last)
        wake = min(hard, next_poll, idle_since + cfg.request_timeout) if polling else hard
        await clock.sleep(max(0.0, wake - now))
        now = clock.now()
        if now >= hard:
            raise FirstTokenTimeout(slot, now - start, report.last)
        if not polling:
            continue
        failed, states = await _poll(slots_fn, min(cfg.poll_deadline, hard - now), clock)
        next_poll = now + cfg.poll_interval
        now = clock.now()
        report.polls += 1
        if failed is None:
            report.answered += 1
            evidence = classify(states, previous, slot)
            previous = states
            if evidence is not Evidence.IDLE:
                idle_since = now
        else:
            evidence = failed
            polling = failed is not Evidence.UNAVAILABLE
            idle_since = now  # no verdict: the idle budget starts over
        report.last = evidence
        if on_poll is not None:
            on_poll(PollResult(now, evidence, tuple(states), now - idle_since))
        if evidence is Evidence.IDLE and now - idle_since >= cfg.request_timeout:
            raise FirstTokenStall(slot, now - idle_since)


async def watch_first_token(
    slots_fn: SlotsFn,
    slot: int,
    first_byte: anyio.Event,
    *,
    config: WatchConfig | None = None,
    clock: Clock = REAL_CLOCK,
    on_poll: Callable[[PollResult], None] | None = None,
) -> WatchReport:
    """Watch a request on `slot` (-1 when unpinned) until `first_byte` is set.

    Run it next to the stream (e.g. in the same task group; cancel the stream when it raises).
    Returns at the first byte. Raises `FirstTokenStall` when the server keeps answering idle for
    `request_timeout`, `FirstTokenTimeout` at `first_token_timeout`. With `enabled=False` only
    the first-token timeout applies.
    """
    cfg = config or WatchConfig()
    report = WatchReport()
    if first_byte.is_set():
        return report
    failure: StreamStalled | None = None
    async with anyio.create_task_group() as tg:

        async def stop_at_first_byte() -> None:
            await first_byte.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(stop_at_first_byte)
        try:
            await _watch(slots_fn, slot, cfg, clock, on_poll, report)
        except (FirstTokenStall, FirstTokenTimeout) as exc:
            failure = exc
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return report


def watch_config(settings: Settings) -> WatchConfig:
    lm = settings.local_models
    return WatchConfig(
        poll_interval=lm.progress_poll_ms / 1000,
        request_timeout=lm.request_timeout_ms / 1000,
        first_token_timeout=lm.first_token_timeout_ms / 1000,
        enabled=lm.progress_watch,
    )


async def first_event(
    it: AsyncIterator[StreamEvent],
    slots_fn: SlotsFn,
    slot: int,
    config: WatchConfig,
    clock: Clock,
) -> StreamEvent | None:
    """The stream's first event (None: it ended empty), with `watch_first_token` polling
    `/slots` meanwhile; the watch's stall or timeout cancels the read and is raised."""
    first_byte = anyio.Event()
    got: list[StreamEvent | None] = []
    failed: list[Exception] = []
    async with anyio.create_task_group() as tg:

        async def read() -> None:
            try:
                got.append(await anext(it, None))
            except Exception as exc:
                failed.append(exc)
            first_byte.set()

        async def watch() -> None:
            try:
                await watch_first_token(slots_fn, slot, first_byte, config=config, clock=clock)
            except StreamStalled as exc:
                failed.append(exc)
                tg.cancel_scope.cancel()

        tg.start_soon(read)
        tg.start_soon(watch)
    if failed:
        raise failed[0]
    return got[0] if got else None
