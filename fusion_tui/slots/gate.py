"""Provides the per-slot gate: at most one request of this app in flight per slot.

Why: a request that names a slot the server is busy with is not refused; it runs the RAM
prompt-cache swap on the busy slot first, which can corrupt the generation running there
(reference §3 "Explicit id_slot", §10). So the client serializes its own requests per slot and,
when it can, checks `/slots` before naming a slot.

What this can and cannot guarantee:
- Two requests of this process never name the same slot at the same time (`hold(n)` is a fair
  per-slot lock; the waiter is told "waiting for slot n" once).
- With a `busy_probe` (e.g. `/slots`), a named slot that the server reports processing (another
  app, or one of our `-1` requests that landed there) is waited for before the request is sent.
  A race of a few milliseconds between that poll and the send remains; nothing client-side can
  close it.
- A `-1` request takes no lock: the server picks an idle slot, never one it is processing. It
  can land on a slot we hold whose request has not reached the server yet, or that just finished;
  the probe above then makes our next named request wait for it. In a one-slot pool `-1` is the
  same as slot 0 and is locked as such.
- With `exclusive` (a callable saying "only this gate sends requests to this server", e.g. a
  daemon this process launched and shares with no other client), the probe is skipped while no
  `-1` request of ours is in flight: then the held lock alone proves the slot idle, and the
  `/slots` round trip (~20 ms idle, more on a loaded box) leaves the first-token path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

from fusion_tui.server.errors import ServerError
from fusion_tui.server.types import SlotState

BusyProbe = Callable[[int], Awaitable[bool | None]]
"""`True` the server is processing that slot, `False` idle, `None` cannot tell."""
SlotsFn = Callable[[], Awaitable[Sequence[SlotState]]]
Sleep = Callable[[float], Awaitable[None]]
OnWait = Callable[[str], None]
Exclusive = Callable[[], bool]
"""True while this gate is the only sender to the server (nobody else can make a slot busy)."""


def waiting_message(slot: int) -> str:
    return f"waiting for slot {slot}"


@dataclass(frozen=True)
class SlotLease:
    """What `hold` yields: the slot to put in `id_slot` (-1 lets the server choose)."""

    slot: int


class _Notifier:
    """Calls `on_wait` at most once per hold."""

    def __init__(self, on_wait: OnWait | None, slot: int) -> None:
        self._on_wait = on_wait
        self._slot = slot
        self.fired = False

    def __call__(self) -> None:
        if not self.fired and self._on_wait is not None:
            self._on_wait(waiting_message(self._slot))
        self.fired = True


class SlotGate:
    """One in-flight request per slot for this process (see the module docstring)."""

    def __init__(
        self,
        total_slots: Callable[[], int] | None = None,
        *,
        busy_probe: BusyProbe | None = None,
        poll_interval: float = 0.25,
        sleep: Sleep = anyio.sleep,
        exclusive: Exclusive | None = None,
    ) -> None:
        self._total = total_slots
        self._probe = busy_probe
        self._exclusive = exclusive
        self.probes_skipped = 0
        self._poll_interval = poll_interval
        self._sleep = sleep
        self._locks: dict[int, anyio.Lock] = {}
        self._held: set[int] = set()
        self.anonymous_in_flight = 0

    def rebind(
        self,
        total_slots: Callable[[], int] | None,
        busy_probe: BusyProbe | None,
        exclusive: Exclusive | None,
    ) -> None:
        """A new client of the same server takes over the probe (the locks stay)."""
        self._total, self._probe, self._exclusive = total_slots, busy_probe, exclusive

    @property
    def held(self) -> frozenset[int]:
        return frozenset(self._held)

    def is_held(self, slot: int) -> bool:
        return slot in self._held

    def _lock(self, slot: int) -> anyio.Lock:
        lock = self._locks.get(slot)
        if lock is None:
            lock = self._locks[slot] = anyio.Lock()
        return lock

    async def _wait_server_idle(self, slot: int, notify: _Notifier) -> None:
        if self._probe is None:
            return
        if self._exclusive is not None and self.anonymous_in_flight == 0 and self._exclusive():
            self.probes_skipped += 1  # only we send, we hold the slot, no -1 of ours is out
            return
        while await self._probe(slot):
            notify()
            await self._sleep(self._poll_interval)

    @asynccontextmanager
    async def hold(self, slot: int, on_wait: OnWait | None = None) -> AsyncIterator[SlotLease]:
        """Hold `slot` for one request (or `-1`: no slot of ours, the server chooses)."""
        if slot < -1:
            raise ValueError(f"slot must be -1 or a slot id, got {slot}")
        if slot == -1 and self._total is not None and self._total() == 1:
            slot = 0  # one slot: the server can only pick slot 0
        if slot == -1:
            self.anonymous_in_flight += 1
            try:
                yield SlotLease(-1)
            finally:
                self.anonymous_in_flight -= 1
            return
        notify = _Notifier(on_wait, slot)
        lock = self._lock(slot)
        if lock.locked():
            notify()
        async with lock:
            self._held.add(slot)
            try:
                await self._wait_server_idle(slot, notify)
                yield SlotLease(slot)
            finally:
                self._held.discard(slot)


def slots_busy_probe(slots_fn: SlotsFn, *, poll_deadline: float = 3.0) -> BusyProbe:
    """A `BusyProbe` over `GET /slots`: unknown (None) when it errs or exceeds its deadline."""

    async def probe(slot: int) -> bool | None:
        states: Sequence[SlotState] | None = None
        with anyio.move_on_after(poll_deadline):
            try:
                states = await slots_fn()
            except ServerError:
                return None
        if states is None:
            return True  # no answer in time: a busy server; ask again rather than barge in
        for state in states:
            if state.id == slot:
                return state.is_processing
        return None

    return probe


async def wait_until_idle(
    slots_fn: SlotsFn,
    slot: int,
    *,
    poll_interval: float = 0.25,
    poll_deadline: float = 3.0,
    on_wait: OnWait | None = None,
    sleep: Sleep = anyio.sleep,
) -> bool:
    """Poll `/slots` until `slot` is idle. True when seen idle; False when `/slots` cannot tell
    (switched off, error, unknown slot), in which case only the in-process gate protects."""
    probe = slots_busy_probe(slots_fn, poll_deadline=poll_deadline)
    notify = _Notifier(on_wait, slot)
    while True:
        busy = await probe(slot)
        if busy is None:
            return False
        if not busy:
            return True
        notify()
        await sleep(poll_interval)
