"""The slot map's arithmetic: phases, live tok/s from successive polls, prompt progress."""

from __future__ import annotations

import pytest

from fusion_tui.server.types import SlotState
from fusion_tui.slots.rates import SlotSample, phase_of, rate_between, readings, summary


def st(
    id: int = 0,
    *,
    processing: bool = True,
    task: int = 7,
    cached: int = 0,
    processed: int = 0,
    reused: int = 0,
    decoded: int = 0,
    n_ctx: int = 4096,
) -> SlotState:
    return SlotState(id, n_ctx, processing, task, cached, processed, reused, decoded)


def test_phase_follows_processing_and_the_first_decoded_token() -> None:
    assert phase_of(st(processing=False)) == "idle"
    assert phase_of(st(processed=100)) == "prompt"
    assert phase_of(st(decoded=1)) == "decode"


def test_decode_rate_is_the_change_of_n_decoded_over_the_poll_interval() -> None:
    assert rate_between(st(decoded=10), st(decoded=40), 2.0) == 15.0


def test_prompt_rate_counts_newly_evaluated_prompt_tokens() -> None:
    before = st(processed=512, reused=1000)
    after = st(processed=1536, reused=1000)
    assert rate_between(before, after, 4.0) == 256.0


@pytest.mark.parametrize(
    ("before", "after", "dt"),
    [
        (None, st(decoded=5), 1.0),  # first poll
        (st(decoded=5, task=1), st(decoded=9, task=2), 1.0),  # another task
        (st(processed=300), st(decoded=3), 1.0),  # first token came between the polls
        (st(decoded=5), st(decoded=9), 0.0),  # no time passed
        (st(decoded=9), st(decoded=5), 1.0),  # counter went back
        (st(decoded=5), st(decoded=9, processing=False), 1.0),  # finished
        (st(processing=False), st(decoded=9), 1.0),  # was idle
    ],
)
def test_no_rate_is_claimed_when_it_cannot_be_known(
    before: SlotState | None, after: SlotState, dt: float
) -> None:
    assert rate_between(before, after, dt) is None


def test_readings_join_polls_by_slot_id_and_take_known_prompt_totals() -> None:
    first = SlotSample(
        10.0, (st(1, processed=1000, reused=500, cached=1536), st(0, processing=False))
    )
    second = SlotSample(
        12.0, (st(0, processing=False, cached=80), st(1, processed=2000, reused=500))
    )
    rows = readings(first, second, {1: 5000, 0: 999})
    assert [r.id for r in rows] == [0, 1]
    idle, busy = rows
    assert idle.phase == "idle" and idle.prompt_total is None and idle.tokens_per_second is None
    assert idle.cached == 80 and idle.cache_fraction == pytest.approx(80 / 4096)
    assert busy.phase == "prompt"
    assert busy.prompt_done == 2500
    assert busy.prompt_total == 5000
    assert busy.prompt_fraction == 0.5
    assert busy.tokens_per_second == 500.0
    assert summary(rows) == (1, 2)


def test_unknown_total_leaves_prompt_fraction_unknown_and_fractions_are_clamped() -> None:
    (row,) = readings(None, SlotSample(0.0, (st(cached=9000, processed=10),)))
    assert row.prompt_total is None and row.prompt_fraction is None
    assert row.cache_fraction == 1.0
    (empty,) = readings(None, SlotSample(0.0, (st(n_ctx=0, processing=False),)))
    assert empty.cache_fraction == 0.0
