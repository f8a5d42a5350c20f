"""The prompt-progress bar: shown while the prompt is read, gone at the first token."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from fusion_tui.chat.events import Progress, ReplyDone, ReplyEvent, TextDelta
from fusion_tui.config import Settings
from fusion_tui.tui.app import build_app
from fusion_tui.tui.widgets.prompt_progress import PromptProgressBar, bar_text
from tests.tui.scripted_backend import ScriptedBackend


def test_bar_text_shows_share_counts_rate_and_eta() -> None:
    p = Progress(processed=1500, total=3000, cache=500, tokens_per_second=250.0, eta_s=6.0)
    assert bar_text(p, width=10) == (
        "▕█████░░░░░▏ 50% · reading prompt 1,500 / 3,000 · 500 cached · 250 tok/s · ETA 0:06"
    )
    assert bar_text(Progress(0, 0, 0), width=4) == "▕░░░░▏ 0% · reading prompt 0 / 0"


class SlowPrompt(ScriptedBackend):
    def __init__(self) -> None:
        super().__init__()
        self.go = asyncio.Event()

    async def reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        yield Progress(processed=1000, total=4000, cache=0, tokens_per_second=100.0, eta_s=30.0)
        await self.go.wait()
        yield TextDelta("done")
        yield ReplyDone("completed")


async def test_the_bar_follows_the_prompt_and_hides_at_the_first_token() -> None:
    backend = SlowPrompt()
    app = build_app(Settings(), backend)
    async with app.run_test(size=(100, 24)) as pilot:
        await pilot.pause()
        await pilot.press("x", "enter")
        await pilot.pause(0.1)
        bar = app.screen.query_one(PromptProgressBar)
        assert bar.display and bar.has_class("-active")
        assert "1,000 / 4,000" in str(bar.render()) and "ETA 0:30" in str(bar.render())
        backend.go.set()
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        assert not bar.has_class("-active")
