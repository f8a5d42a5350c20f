"""Ctrl+C cancels a running reply first and quits only when idle; cancel marks are kept."""

from __future__ import annotations

from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.tui.app import build_app
from fusion_tui.tui.widgets.chat_message import ChatMessage
from tests.tui.scripted_backend import ScriptedBackend

SETTINGS = Settings(ui=UISettings(cursor_blink=False))


async def test_ctrl_c_cancels_the_reply_keeps_the_partial_and_does_not_quit() -> None:
    backend = ScriptedBackend([["one ", "two ", "three"]], hold_after=2)
    app = build_app(SETTINGS, backend)
    exits: list[int] = []
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        app.exit = lambda *a, **k: exits.append(1)  # type: ignore[method-assign]
        await pilot.press("x", "enter")
        await pilot.pause(0.1)
        await pilot.press("ctrl+c")
        await pilot.pause(0.3)  # no wait_for_complete: on a reply that ignores Ctrl+C it hangs
        answer = list(app.screen.query(ChatMessage))[-1]
        assert answer.text == "one two " and answer.has_class("-partial")
        assert backend.cancelled
        assert exits == []
        assert not app.screen.reply_running  # type: ignore[attr-defined]


async def test_ctrl_c_twice_when_idle_quits_once_asks() -> None:
    app = build_app(SETTINGS, ScriptedBackend())
    exits: list[int] = []
    said: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        app.exit = lambda *a, **k: exits.append(1)  # type: ignore[method-assign]
        app.notify = lambda message, **_: said.append(message)  # type: ignore[method-assign]
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert exits == [] and any("Ctrl+C again" in m for m in said)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert exits == [1]
