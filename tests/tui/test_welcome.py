"""The first screen says what to do, and the block goes with the first message."""

from __future__ import annotations

from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.tui.app import build_app
from fusion_tui.tui.widgets.welcome import Welcome
from tests.tui.scripted_backend import ScriptedBackend

SETTINGS = Settings(ui=UISettings(cursor_blink=False))


async def test_an_empty_chat_welcomes_with_the_model_and_the_keys_until_the_first_message() -> None:
    app = build_app(SETTINGS, ScriptedBackend([["hi"]]))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        text = str(app.screen.query_one(Welcome).render())
        assert "SmolLM2-135M-Instruct · 4 slots × 4,096 ctx" in text
        for key, what in [
            ("^r", "resume a saved session"),
            ("^b", "slot map"),
            ("f2", "wizard"),
            ("f1", "every key"),
        ]:
            line = next(line for line in text.splitlines() if what in line)
            assert line.split()[0] == key
        await pilot.press("h", "enter")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        assert not app.screen.query(Welcome)
        await app.run_action("new_session")
        await pilot.pause()
        assert app.screen.query(Welcome)


async def test_a_resumed_session_has_no_welcome_block() -> None:
    backend = ScriptedBackend(history=[("user", "earlier"), ("assistant", "words")])
    app = build_app(SETTINGS, backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        assert not app.screen.query(Welcome)
