"""Pilot tests: the live step block updates in place, sits above the answer, goes at the end;
the loop guard's refused calls and the `stuck` outcome are shown."""

from __future__ import annotations

from fusion_tui.chat.events import LiveStep, ReplyDone
from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.tui.app import build_app
from fusion_tui.tui.widgets.chat_message import ChatMessage
from fusion_tui.tui.widgets.live_step import LiveStepBlock, render_step
from fusion_tui.tui.widgets.tool_call import ToolCallBlock
from tests.tui.live_step_backend import GUARD_TURN, HOLD, LIVE_TURN, LiveStepBackend

SETTINGS = Settings(ui=UISettings(cursor_blink=False))


async def test_one_live_block_updates_in_place_and_is_removed_when_the_turn_ends() -> None:
    backend = LiveStepBackend([[*LIVE_TURN, ReplyDone("completed", note="completed · 2 steps")]])
    app = build_app(SETTINGS, backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press(*"add mul", "enter")
        for _ in range(5):
            await pilot.pause(0.15)  # past the throttle window: the newest snapshot is drawn
        chat = app.screen.query_one("#chat")
        kinds = [type(w).__name__ for w in chat.children]
        assert kinds == ["ChatMessage", "ToolCallBlock", "LiveStepBlock", "ChatMessage"]
        (block,) = chat.query(LiveStepBlock)
        assert block.state.step == 2 and block.state.phase == "writing"
        shown = str(block.render())
        assert "step 2/30 · writing util.py · 31 tokens · 12.4 tok/s" in shown
        assert "def mul(a, b):" in shown
        backend.release.set()
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        assert not list(chat.query(LiveStepBlock))
        assert [type(w).__name__ for w in chat.children] == [
            "ChatMessage", "ToolCallBlock", "ChatMessage",
        ]  # fmt: skip


async def test_updates_inside_the_throttle_window_keep_the_newest() -> None:
    states = [LiveStep(1, 5, "reading", processed=n, total=900) for n in range(100, 1000, 100)]
    backend = LiveStepBackend([[*states, HOLD]])
    app = build_app(SETTINGS, backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press(*"go", "enter")
        await pilot.pause(0.4)
        (block,) = app.screen.query(LiveStepBlock)
        assert block.state.processed == 900
        assert "reading 900 of 900 tokens" in str(block.render())
        assert str(render_step(states[-1])) in str(block.render())
        backend.release.set()


async def test_refused_calls_and_the_stuck_outcome_are_shown() -> None:
    app = build_app(SETTINGS, LiveStepBackend([GUARD_TURN]))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press(*"list it", "enter")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        blocks = list(app.screen.query(ToolCallBlock))
        titles = [str(b.title) for b in blocks]
        assert titles[3].endswith("· same error 3× · not run again")
        assert titles[4].endswith("· stuck")
        assert all(b.has_class("-failed") for b in blocks)
        answer = list(app.screen.query(ChatMessage))[-1]
        assert answer.has_class("-partial")
        assert "stuck · 5 steps" in str(answer.query_one(".footnote").render())
