"""A paste without bracketed paste (a burst of keys with Enter between the lines) lands in the
prompt box as one message that the user sends with Enter; typing by hand still sends on Enter;
a bracketed paste is inserted as it is. The key times come from an injected clock."""

from __future__ import annotations

from typing import Any

from textual import events

from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.tui.app import build_app
from fusion_tui.tui.key_clock import PASTE_GAP_S, KeyClock
from fusion_tui.tui.screens.main import MainScreen
from fusion_tui.tui.widgets.prompt_input import PromptInput
from tests.fakes.clock import FakeClock
from tests.tui.keys_support import burst
from tests.tui.scripted_backend import ScriptedBackend

SETTINGS = Settings(ui=UISettings(cursor_blink=False))
PASTE = "def add(a, b):\r    return a + b\r\rprint(add(1, 2))"
PASTED = "def add(a, b):\n    return a + b\n\nprint(add(1, 2))"


async def started(app: Any, pilot: Any) -> tuple[MainScreen, PromptInput, FakeClock]:
    await app.screen.workers.wait_for_complete()
    await pilot.pause()
    main = app.screen
    assert isinstance(main, MainScreen)
    prompt = main.query_one(PromptInput)
    clock = FakeClock(100.0)
    prompt.key_clock = KeyClock(clock)
    return main, prompt, clock


async def send_enter_later(app: Any, pilot: Any, clock: FakeClock, main: MainScreen) -> None:
    """Enter pressed by hand, a moment after the last key."""
    clock.advance(0.3)
    burst(app, "\r")
    await pilot.pause()
    await main.workers.wait_for_complete()
    await pilot.pause()


async def test_a_paste_without_brackets_is_one_message_sent_with_enter() -> None:
    backend = ScriptedBackend([["ok"]])
    app = build_app(SETTINGS, backend)
    async with app.run_test(size=(80, 24)) as pilot:
        main, prompt, clock = await started(app, pilot)
        burst(app, PASTE)  # every key at once, as the terminal delivers it
        await pilot.pause()
        assert backend.sent == []  # no line was sent on its own
        assert prompt.text == PASTED
        await send_enter_later(app, pilot, clock, main)
        assert backend.sent == [PASTED]
        assert prompt.text == ""


async def test_a_paste_ending_in_a_new_line_waits_for_enter() -> None:
    backend = ScriptedBackend([["ok"]])
    app = build_app(SETTINGS, backend)
    async with app.run_test(size=(80, 24)) as pilot:
        main, prompt, clock = await started(app, pilot)
        burst(app, "one\rtwo\r")
        await pilot.pause()
        assert backend.sent == [] and prompt.text == "one\ntwo\n"
        await send_enter_later(app, pilot, clock, main)
        assert backend.sent == ["one\ntwo"]


async def test_a_tab_in_a_paste_is_text_and_the_box_keeps_the_focus() -> None:
    app = build_app(SETTINGS, ScriptedBackend())
    async with app.run_test(size=(80, 24)) as pilot:
        _main, prompt, _clock = await started(app, pilot)
        burst(app, "if x:")
        driver = app._driver
        assert driver is not None
        for key, char in (("enter", "\r"), ("tab", "\t")):
            event = events.Key(key, char)
            event.set_sender(app)
            driver.send_message(event)
        burst(app, "pass")
        await pilot.pause()
        assert prompt.text == "if x:\n\tpass"
        assert app.focused is prompt


async def test_typing_by_hand_sends_on_enter() -> None:
    """A person's keys: 60 ms apart, and the Enter as quick as the letters before it."""
    backend = ScriptedBackend([["because."], ["ok"]])
    app = build_app(SETTINGS, backend)
    async with app.run_test(size=(80, 24)) as pilot:
        main, prompt, clock = await started(app, pilot)
        for key in [*"why? because it is", "enter"]:
            clock.advance(0.06)
            await pilot.press(key)
        await main.workers.wait_for_complete()
        await pilot.pause()
        assert backend.sent == ["why? because it is"]
        assert prompt.text == ""
        for key in [*"ok", "enter"]:  # just past the burst gap still counts as a person
            clock.advance(PASTE_GAP_S * 1.5)
            await pilot.press(key)
        await main.workers.wait_for_complete()
        assert backend.sent == ["why? because it is", "ok"]


async def test_an_enter_right_on_the_last_letter_is_a_new_line() -> None:
    backend = ScriptedBackend([["ok"]])
    app = build_app(SETTINGS, backend)
    async with app.run_test(size=(80, 24)) as pilot:
        _main, prompt, clock = await started(app, pilot)
        await pilot.press("x")
        clock.advance(PASTE_GAP_S / 2)
        await pilot.press("enter")
        assert backend.sent == [] and prompt.text == "x\n"


async def test_a_bracketed_paste_is_inserted_whole_and_enter_sends_it() -> None:
    backend = ScriptedBackend([["ok"]])
    app = build_app(SETTINGS, backend)
    async with app.run_test(size=(80, 24)) as pilot:
        main, prompt, clock = await started(app, pilot)
        await pilot.press(*"see: ")
        paste = events.Paste("line 1\nline 2")  # what the driver makes of a bracketed paste
        paste.set_sender(app)
        assert app._driver is not None
        app._driver.send_message(paste)
        await pilot.pause()
        assert backend.sent == [] and prompt.text == "see: line 1\nline 2"
        await send_enter_later(app, pilot, clock, main)
        assert backend.sent == ["see: line 1\nline 2"]
