"""The prompt box owns every key while focused: no typed or pasted character is a command."""

from __future__ import annotations

import os
import signal
from typing import Any

from textual import events

from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.tui.app import build_app
from fusion_tui.tui.key_clock import KeyClock
from fusion_tui.tui.screens.help import HelpScreen
from fusion_tui.tui.screens.main import MainScreen
from fusion_tui.tui.widgets.chat_message import ChatMessage
from fusion_tui.tui.widgets.chat_view import ChatView
from fusion_tui.tui.widgets.prompt_input import PromptInput
from tests.fakes.clock import FakeClock
from tests.tui.keys_support import burst
from tests.tui.scripted_backend import ScriptedBackend

SETTINGS = Settings(ui=UISettings(cursor_blink=False))


def _main(app: object) -> MainScreen:
    return next(s for s in app.screen_stack if isinstance(s, MainScreen))  # type: ignore[attr-defined]


async def test_a_fast_burst_with_a_question_mark_is_sent_whole() -> None:
    """Typed fast, then Enter after a pause (an Enter inside the burst is a pasted new line)."""
    backend = ScriptedBackend([["because."]])
    app = build_app(SETTINGS, backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        clock = FakeClock()
        app.screen.query_one(PromptInput).key_clock = KeyClock(clock)
        burst(app, "why? because it is")
        await pilot.pause()
        clock.advance(0.2)
        burst(app, "\r")
        await pilot.pause()
        await _main(app).workers.wait_for_complete()
        await pilot.pause()
        assert not any(isinstance(s, HelpScreen) for s in app.screen_stack)
        assert backend.sent == ["why? because it is"]
        assert [m.text for m in app.screen.query(ChatMessage)] == ["why? because it is", "because."]


async def test_a_paste_without_brackets_keeps_every_bound_character_in_the_box() -> None:
    app = build_app(SETTINGS, ScriptedBackend())
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        text = "?? what (a/b): yes! no, maybe? ok."
        burst(app, text)  # starts with `?` in an empty box
        await pilot.pause(0.3)
        assert isinstance(app.screen, MainScreen)
        assert app.screen.query_one(PromptInput).text == text


async def test_pilot_keys_with_question_marks_stay_text_even_in_an_empty_box() -> None:
    backend = ScriptedBackend([["ok"]])
    app = build_app(SETTINGS, backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        await pilot.press(*"? why? because it is", "enter")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        assert backend.sent == ["? why? because it is"]
        await pilot.press("f1")  # help stays one key away
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)


async def test_a_burst_with_new_lines_keeps_their_order_and_sends_it_all() -> None:
    backend = ScriptedBackend([["ok"]])
    app = build_app(SETTINGS, backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        clock = FakeClock()
        app.screen.query_one(PromptInput).key_clock = KeyClock(clock)
        burst(app, "def f():", "ctrl+j", "    return 1", "ctrl+j", "done?")
        await pilot.pause()
        clock.advance(0.2)
        burst(app, "\r")
        await pilot.pause()
        await _main(app).workers.wait_for_complete()
        await pilot.pause()
        assert backend.sent == ["def f():\n    return 1\ndone?"]
        assert app.screen.query_one(PromptInput).text == ""


async def test_page_keys_scroll_the_chat_while_the_prompt_box_has_the_focus() -> None:
    """A long answer is read back while the next message is typed: PgUp and PgDn scroll the
    chat, and the half-typed message stays in the box, the focus with it."""
    answer = "\n\n".join(f"Paragraph {n} of a long answer." for n in range(60))
    backend = ScriptedBackend([[answer]])
    app = build_app(SETTINGS, backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        await pilot.press(*"tell me a lot", "enter")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        view = app.screen.query_one(ChatView)
        box = app.screen.query_one(PromptInput)
        assert view.max_scroll_y > 0 and view.scroll_y == view.max_scroll_y
        await pilot.press(*"next q")
        await pilot.press("pageup")
        await pilot.pause(0.3)
        assert view.scroll_y < view.max_scroll_y
        assert app.focused is box and box.text == "next q"
        await pilot.press("pagedown")
        await pilot.pause(0.3)
        assert view.scroll_y == view.max_scroll_y


async def test_a_hangup_of_the_terminal_quits_as_ctrl_q_does() -> None:
    """Closing the terminal window sends SIGHUP: the app quits through its own path, so the
    backend closes (the server it started stops, its slots saved) instead of dying on the spot."""
    backend = ScriptedBackend()
    app = build_app(SETTINGS, backend)
    asked: list[bool] = []
    quit_app = app.exit

    def exit_and_say(*args: Any, **kwargs: Any) -> None:
        asked.append(True)
        quit_app(*args, **kwargs)

    app.exit = exit_and_say  # type: ignore[method-assign]
    swallow = signal.signal(signal.SIGHUP, lambda *_: None)  # without the app's handler: no kill
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await app.screen.workers.wait_for_complete()
            os.kill(os.getpid(), signal.SIGHUP)
            for _ in range(100):
                if asked:
                    break
                await pilot.pause(0.02)
            assert asked, "the hangup did not quit the app"
    finally:
        signal.signal(signal.SIGHUP, swallow)
    assert backend.closed


async def test_keys_that_reach_the_screen_before_the_box_has_focus_go_into_it() -> None:
    """Typed while the app starts, Textual sends keys on before anything has focus: they reach
    the screen. They belong in the box, and an Enter among them sends."""
    backend = ScriptedBackend([["fine."]])
    app = build_app(SETTINGS, backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        screen = _main(app)
        prompt = screen.query_one(PromptInput)
        screen.set_focus(None)
        for key in ("h", "i", "space"):
            screen.post_message(events.Key(key, " " if key == "space" else key))
        await pilot.pause()
        assert (prompt.text, app.focused) == ("hi ", prompt)
        screen.set_focus(None)
        screen.post_message(events.Key("enter", "\r"))
        await pilot.pause()
        await screen.workers.wait_for_complete()
        await pilot.pause()
        assert backend.sent == ["hi"]
