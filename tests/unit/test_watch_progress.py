"""Prompt progress from `return_progress` events and from `/slots`."""

from __future__ import annotations

import pytest

from fusion_tui.server.types import PromptProgress, SlotState
from fusion_tui.slots.progress import ProgressTracker


def test_progress_events_give_fraction_rate_and_eta() -> None:
    t = ProgressTracker()
    p = t.on_event(PromptProgress(total=10_000, cache=2_000, processed=2_000, time_ms=0))
    assert p.fraction == pytest.approx(0.2)
    assert p.tokens_per_second is None and p.eta_s is None
    p = t.on_event(PromptProgress(total=10_000, cache=2_000, processed=6_000, time_ms=8_000))
    assert p.evaluated == 4_000
    assert p.tokens_per_second == pytest.approx(500.0)  # 4,000 new tokens in 8 s
    assert p.eta_s == pytest.approx(8.0)  # 4,000 left at 500 tok/s
    assert p.remaining == 4_000
    assert p.label() == "6,000 / 10,000 tokens · 500 tok/s · ETA 0:08"


def test_progress_from_slots_uses_successive_polls() -> None:
    t = ProgressTracker(total=3_000)

    def state(processed: int, task: int = 7) -> SlotState:
        return SlotState(
            id=0,
            n_ctx=4096,
            is_processing=True,
            id_task=task,
            n_prompt_tokens=processed + 100,
            n_prompt_tokens_processed=processed,
            n_prompt_tokens_cache=100,
        )

    p = t.on_slot(state(0), now=10.0)
    assert p.processed == 100 and p.tokens_per_second is None
    p = t.on_slot(state(1_000), now=12.0)
    assert p.processed == 1_100
    assert p.tokens_per_second == pytest.approx(500.0)
    assert p.eta_s == pytest.approx(3.8)
    assert p.fraction == pytest.approx(1_100 / 3_000)
    p = t.on_slot(state(50, task=8), now=13.0)  # a new task: the rate starts over
    assert p.tokens_per_second is None


def test_unknown_total_has_no_fraction() -> None:
    t = ProgressTracker()
    p = t.on_slot(SlotState(id=0, n_ctx=1, is_processing=True, n_prompt_tokens_processed=5), 0.0)
    assert p.fraction is None and p.eta_s is None and p.label() == "5 tokens"
