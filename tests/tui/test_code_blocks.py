"""Long code lines wrap inside the chat pane instead of being cut at its edge."""

from __future__ import annotations

from textual.widgets import Label
from textual.widgets.markdown import MarkdownFence

from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.tui.app import build_app
from tests.tui.scripted_backend import ScriptedBackend

LONG = "result = compute_the_total(first_argument, second_argument, third_argument) + END_MARK"
ANSWER = ["Here:\n\n", "```python\n", f"{LONG}\n", "```\n"]


async def test_a_long_code_line_wraps_and_its_end_is_on_screen() -> None:
    app = build_app(Settings(ui=UISettings(cursor_blink=False)), ScriptedBackend([ANSWER]))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        await pilot.press("x", "enter")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        fence = app.screen.query_one(MarkdownFence)
        label = fence.query_one(Label)
        assert label.outer_size.width <= fence.size.width  # no part of it beyond the pane
        assert fence.max_scroll_x == 0
        shown = "".join(strip.text for strip in label.render_lines(label.region.reset_offset))
        assert "END_MARK" in shown
        assert label.outer_size.height >= 4  # wrapped onto two lines (plus the padding)
