"""Snapshots of a turn in flight: the answer streaming, and the prompt-reading progress bar."""

from __future__ import annotations

from typing import Any

from fusion_tui.chat.events import Progress
from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.tui.app import build_app
from tests.tui.scripted_backend import ScriptedBackend

SETTINGS = Settings(ui=UISettings(cursor_blink=False))


def _sending(text: str) -> Any:
    async def run_before(pilot: Any) -> None:
        await pilot.app.screen.workers.wait_for_complete()  # the server start
        await pilot.press(*text, "enter")
        await pilot.pause(0.3)  # the reply worker is held mid-turn on purpose
        pilot.app.clear_notifications()
        await pilot.pause()

    return run_before


def test_answer_streaming(snap_compare: Any) -> None:
    """You should see the question, the first two fragments of the answer ("Caching keeps the
    prompt"), no footnote yet (the turn is still running), and Esc/Cancel offered in the footer."""
    backend = ScriptedBackend([["Caching keeps ", "the prompt", " warm."]], hold_after=2)
    app = build_app(SETTINGS, backend)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_sending("why cache?"))


def test_prompt_progress_bar(snap_compare: Any) -> None:
    """You should see a progress bar under the question reading `reading prompt 12,000 /
    40,000 · 2,000 cached · 310 tok/s · ETA` with about 30% filled, while no answer has
    started yet."""
    progress = Progress(processed=12_000, total=40_000, cache=2_000, tokens_per_second=310.0, eta_s=90.0)
    backend = ScriptedBackend([[]], prelude=[progress])
    app = build_app(SETTINGS, backend)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_sending("read the repo"))
