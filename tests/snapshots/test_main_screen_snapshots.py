"""Snapshots of the main screen, fed by a scripted backend (no server, no clock, no blink)."""

from __future__ import annotations

from typing import Any

import pytest

from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.tui.app import build_app
from tests.tui.scripted_backend import ScriptedBackend

SIZES = [(80, 24), (160, 48), (200, 60)]
SETTINGS = Settings(ui=UISettings(cursor_blink=False))


async def _settle(pilot: Any) -> None:
    await pilot.app.screen.workers.wait_for_complete()
    pilot.app.clear_notifications()  # the "ready" toast is tested in Pilot tests, not pictures
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_empty_session_ready(snap_compare: Any, size: tuple[int, int]) -> None:
    """You should see the welcome block in the empty chat (model, slots, keys), the prompt box
    focused, and the status line reading
    `ready · SmolLM2-135M-Instruct · 4 slots × 4096 ctx · ~95 tok/s single stream`."""
    app = build_app(SETTINGS, ScriptedBackend())
    assert snap_compare(app, terminal_size=size, run_before=_settle)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_finished_turn_with_telemetry(snap_compare: Any, size: tuple[int, int]) -> None:
    """You should see the user's question, the model's Markdown answer with a code block, the
    footnote `slot 2 · 30 of 42 prompt tokens cached` under it, and the same telemetry on the
    status line, whose speed is now the turn's (`~88 tok/s recent turns`), not the probe's."""
    answer = ["Use `sorted`:\n\n", "```python\n", "sorted(xs, key=len)\n", "```\n"]
    backend = ScriptedBackend([answer])

    async def run_before(pilot: Any) -> None:
        await _settle(pilot)
        await pilot.press(*"sort by length?", "enter")
        await _settle(pilot)

    assert snap_compare(build_app(SETTINGS, backend), terminal_size=size, run_before=run_before)


def test_server_failed_to_start(snap_compare: Any) -> None:
    """You should see a notice in the chat explaining that the server did not start (with the
    reason), the status line in the error colour, and the prompt box still usable."""
    backend = ScriptedBackend(start_error="no model file at /models/missing.gguf")
    assert snap_compare(build_app(SETTINGS, backend), terminal_size=(80, 24), run_before=_settle)


def test_resumed_history_is_drawn(snap_compare: Any) -> None:
    """You should see two earlier messages of a resumed session drawn in the chat."""
    history = [("user", "What is a KV cache?"), ("assistant", "The attention keys and values.")]
    backend = ScriptedBackend(history=history)
    assert snap_compare(build_app(SETTINGS, backend), terminal_size=(80, 24), run_before=_settle)
