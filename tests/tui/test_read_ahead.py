"""The first keys of the next message tell the backend (`Backend.read_ahead`), once per message,
so the plain chat reads the next prompt's opening into the session's slot while the user types;
keys typed while an answer streams count once it is done. A message sent at once still goes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from fusion_tui.chat.events import ReplyDone, ReplyEvent
from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.server.types import TextDelta
from fusion_tui.tui.app import build_app
from tests.tui.scripted_backend import ScriptedBackend

SETTINGS = Settings(ui=UISettings(cursor_blink=False))


class HeldAnswer(ScriptedBackend):
    """Each answer waits for `release` before it is done."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        self.sent.append(text)
        yield TextDelta(f"answer to {text}")
        await self.release.wait()
        self.release.clear()
        yield ReplyDone("completed", note="slot 2")


async def test_typing_the_next_message_reads_ahead_once_per_message() -> None:
    backend = HeldAnswer()
    app = build_app(SETTINGS, backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        await pilot.press("h", "i")
        await pilot.pause()
        assert backend.read_aheads == 1  # an empty session: the backend decides it is nothing
        await pilot.press("enter")
        await pilot.pause(0.1)
        await pilot.press("n", "e")  # typed while the answer streams: not yet
        await pilot.pause()
        assert backend.read_aheads == 1
        backend.release.set()
        await pilot.pause(0.1)
        assert backend.read_aheads == 2  # the answer is done; the box holds the next message
        await pilot.press("x", "t")
        await pilot.pause()
        assert backend.read_aheads == 2  # once per message
        await pilot.press("enter")
        await pilot.pause(0.1)
        backend.release.set()
        await pilot.pause(0.1)
        assert backend.sent == ["hi", "next"] and backend.read_aheads == 2  # the box is empty
        await pilot.press("o")
        await pilot.pause()
        assert backend.read_aheads == 3
