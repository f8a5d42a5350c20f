"""Snapshots of the chat view at 80×24: the welcome block, a wrapped code line, cancelled answers
of a resumed session. Scripted backend: no server, no clock, no blink."""

from __future__ import annotations

from typing import Any

from fusion_tui.chat.backend import Said
from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.tui.app import build_app
from tests.tui.scripted_backend import ScriptedBackend

SETTINGS = Settings(ui=UISettings(cursor_blink=False))
LONG = "total = compute_the_total(first_argument, second_argument, third_argument) + END_MARK"


async def _settle(pilot: Any) -> None:
    await pilot.app.screen.workers.wait_for_complete()
    await pilot.pause()
    pilot.app.clear_notifications()
    await pilot.pause()


def test_welcome_block(snap_compare: Any) -> None:
    """You should see, in the empty chat, "Welcome to fusion-tui", the line "Model
    SmolLM2-135M-Instruct · 4 slots × 4,096 ctx", how to send (Enter, Ctrl+J a new line), and
    six keys: ^r resume a saved session, ^n new session, ^b slot map, f2 the wizard, f1 help,
    ^p the command palette; the prompt box focused below."""
    assert snap_compare(build_app(SETTINGS, ScriptedBackend()), terminal_size=(80, 24),
                        run_before=_settle)  # fmt: skip


def test_long_code_line_wraps(snap_compare: Any) -> None:
    """You should see a Python code block whose one long line wraps onto a second line inside
    the pane, ending in `END_MARK`, nothing cut at the right edge."""
    answer = ["Here:\n\n", "```python\n", f"{LONG}\n", "```\n"]

    async def run_before(pilot: Any) -> None:
        await _settle(pilot)
        await pilot.press(*"total?", "enter")
        await _settle(pilot)

    assert snap_compare(build_app(SETTINGS, ScriptedBackend([answer])), terminal_size=(80, 24),
                        run_before=run_before)  # fmt: skip


def test_resumed_cancelled_answers(snap_compare: Any) -> None:
    """You should see a resumed session: "explain slots" answered "Slots are" with the warning
    footnote "cancelled · partial answer kept", then "and again" with an empty answer marked
    "cancelled · nothing was generated"; no welcome block."""
    history = [
        Said("user", "explain slots"),
        Said("assistant", "Slots are", "cancelled"),
        Said("user", "and again"),
        Said("assistant", "", "cancelled"),
    ]
    app = build_app(SETTINGS, ScriptedBackend(history=history))
    assert snap_compare(app, terminal_size=(80, 24), run_before=_settle)
