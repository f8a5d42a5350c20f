"""Provides what the slot map shows per slot, derived from two successive `/slots` polls.

`/slots` carries counters, not speeds: `n_decoded` of the running task and
`n_prompt_tokens_processed` (prompt tokens newly evaluated so far). A live tok/s is the change of
the counter over the time between two polls, and only within one task: the counters reset when a
task ends, and a new `id_task` starts from an unknown moment between polls, so no rate is claimed
then. `/slots` has no prompt length (its `n_prompt_tokens` is what the cache holds so far), so the
caller passes the totals it knows from its own requests.

Pure arithmetic: no clock (the caller stamps each poll), no Textual.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from fusion_tui.server.types import SlotState

Phase = Literal["idle", "prompt", "decode"]


@dataclass(frozen=True)
class SlotSample:
    """One answered poll: the slots as the server reported them, and when (monotonic seconds)."""

    at: float
    slots: tuple[SlotState, ...]

    def by_id(self) -> dict[int, SlotState]:
        return {s.id: s for s in self.slots}


@dataclass(frozen=True)
class SlotReading:
    """One slot as the map draws it."""

    id: int
    n_ctx: int
    phase: Phase
    cached: int
    """Tokens held in the slot's cache (`n_prompt_tokens`)."""
    prompt_done: int
    """Prompt tokens in the slot for the running task: reused from cache plus evaluated."""
    prompt_total: int | None
    """Prompt length of the running task, when the caller knows it."""
    decoded: int
    tokens_per_second: float | None
    """Live rate of the current phase (prompt tokens or decoded tokens), None when unknown."""

    @property
    def processing(self) -> bool:
        return self.phase != "idle"

    @property
    def cache_fraction(self) -> float:
        return _fraction(self.cached, self.n_ctx)

    @property
    def prompt_fraction(self) -> float | None:
        if not self.prompt_total:
            return None
        return _fraction(self.prompt_done, self.prompt_total)


def _fraction(part: int, whole: int) -> float:
    if whole <= 0:
        return 0.0
    return max(0.0, min(1.0, part / whole))


def phase_of(state: SlotState) -> Phase:
    """A processing slot reads its prompt until the first token is decoded."""
    if not state.is_processing:
        return "idle"
    return "decode" if state.n_decoded > 0 else "prompt"


def rate_between(before: SlotState | None, after: SlotState, dt: float) -> float | None:
    """Tokens per second of `after`'s current phase since `before`, or None if unknowable."""
    if before is None or dt <= 0 or not after.is_processing or not before.is_processing:
        return None
    if before.id_task != after.id_task:
        return None
    phase = phase_of(after)
    if phase == "decode":
        if phase_of(before) != "decode":
            return None  # the first token came somewhere between the polls
        delta = after.n_decoded - before.n_decoded
    else:
        delta = after.n_prompt_tokens_processed - before.n_prompt_tokens_processed
    if delta < 0:
        return None
    return delta / dt


def readings(
    previous: SlotSample | None,
    current: SlotSample,
    prompt_totals: Mapping[int, int] | None = None,
) -> tuple[SlotReading, ...]:
    """The map's rows for `current`, rates measured against `previous`, ordered by slot id."""
    before = previous.by_id() if previous is not None else {}
    dt = current.at - previous.at if previous is not None else 0.0
    totals = prompt_totals or {}
    rows: list[SlotReading] = []
    for state in sorted(current.slots, key=lambda s: s.id):
        phase = phase_of(state)
        total = totals.get(state.id) if phase != "idle" else None
        rows.append(
            SlotReading(
                id=state.id,
                n_ctx=state.n_ctx,
                phase=phase,
                cached=max(0, state.n_prompt_tokens),
                prompt_done=max(0, state.n_prompt_tokens_cache + state.n_prompt_tokens_processed),
                prompt_total=total if total and total > 0 else None,
                decoded=max(0, state.n_decoded),
                tokens_per_second=rate_between(before.get(state.id), state, dt),
            )
        )
    return tuple(rows)


def summary(rows: Sequence[SlotReading]) -> tuple[int, int]:
    """(processing, total) slot counts."""
    return sum(1 for r in rows if r.processing), len(rows)
