"""After an answer, the chat compacts ahead of the next turn (`LocalBackend.reply` goes on past
`ReplyDone`): the turn counts as over, so the user's next message is taken at once and cuts that
work short (the next turn compacts before its request if it must); the answer stays whole."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from fusion_tui.chat.events import Compacted, Notice, ReplyDone, ReplyEvent
from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.server.types import TextDelta
from fusion_tui.tui.app import build_app
from fusion_tui.tui.widgets.chat_message import ChatMessage
from fusion_tui.tui.widgets.status_line import StatusLine
from tests.tui.scripted_backend import ScriptedBackend

SETTINGS = Settings(ui=UISettings(cursor_blink=False))


class CompactingAhead(ScriptedBackend):
    """Answers, then compacts ahead: held until `release` (forever unless released)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.ahead_cut_short = 0
        self.turns: list[str] = []

    async def reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        self.turns.append(text)
        yield TextDelta(f"answer to {text}")
        yield ReplyDone("completed", note="slot 2 · 30 of 42 prompt tokens cached")
        yield Notice("compacting the session ahead of the next turn…")
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.ahead_cut_short += 1
            raise
        yield Compacted(
            "compacted 3 turns into a summary · 1,900 → 300 tokens", turns=3, before=1900,
            after=300,
        )  # fmt: skip


async def test_the_next_message_is_taken_while_the_last_turn_compacts_ahead() -> None:
    backend = CompactingAhead()
    app = build_app(SETTINGS, backend)
    said: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        app.notify = lambda message, **_: said.append(message)  # type: ignore[method-assign]
        await pilot.press("a", "enter")
        await pilot.pause(0.2)
        status = app.screen.query_one(StatusLine)
        assert status.activity.startswith("compacting the session ahead")
        assert not app.screen.reply_running  # type: ignore[attr-defined]
        await pilot.press("b", "enter")  # not refused as "a reply is still streaming"
        await pilot.pause(0.2)
        assert backend.turns == ["a", "b"] and backend.ahead_cut_short == 1
        assert not any("streaming" in m for m in said), said
        first = list(app.screen.query(ChatMessage))[1]
        assert first.text == "answer to a" and not first.has_class("-partial")
        assert "cancelled" not in status.last_turn
        backend.release.set()  # the second turn's compaction ends: the notice, activity cleared
        await pilot.pause(0.2)
        assert any(m.startswith("compacted 3 turns") for m in said), said
        assert status.activity == ""
        answers = [m.text for m in app.screen.query(ChatMessage)]
        assert answers == ["a", "answer to a", "b", "answer to b"]
