"""A message sent while the model loads waits in the box and goes once the server is ready:
typed during a load of a minute, it would otherwise wait for the user to notice and press Enter
again. Esc keeps it in the box; a failed start leaves it there."""

from __future__ import annotations

import asyncio

import pytest

from fusion_tui.chat.backend import StatusCallback
from fusion_tui.config import Settings
from fusion_tui.status import ServerStatus
from fusion_tui.tui.app import build_app
from fusion_tui.tui.widgets.chat_message import ChatMessage
from fusion_tui.tui.widgets.prompt_input import PromptInput
from tests.tui.scripted_backend import ScriptedBackend


class SlowStart(ScriptedBackend):
    """A backend whose server is loading until `loaded` is set."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.loaded = asyncio.Event()

    async def start(self, report: StatusCallback) -> ServerStatus:
        report(ServerStatus(state="loading", model=self.status.model))
        await self.loaded.wait()
        if self.start_error:
            raise RuntimeError(self.start_error)
        return self.status


async def test_a_message_sent_while_loading_goes_once_the_server_is_ready() -> None:
    backend = SlowStart([["Hello"]])
    app = build_app(Settings(), backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press(*"fix it", "enter")
        await pilot.pause()
        prompt = app.screen.query_one(PromptInput)
        assert prompt.text == "fix it" and backend.sent == []
        assert "queued" in str(prompt.border_subtitle)
        await pilot.press(*" now")  # still the user's to change
        backend.loaded.set()
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        assert backend.sent == ["fix it now"]
        assert prompt.text == "" and not prompt.border_subtitle
        assert [m.role for m in app.screen.query(ChatMessage)] == ["user", "assistant"]


async def test_escape_keeps_a_queued_message_in_the_box() -> None:
    backend = SlowStart([["Hello"]])
    app = build_app(Settings(), backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press(*"fix it", "enter", "escape")
        backend.loaded.set()
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        assert backend.sent == []
        assert app.screen.query_one(PromptInput).text == "fix it"


async def test_a_failed_start_leaves_the_queued_message_in_the_box() -> None:
    backend = SlowStart(start_error="model file is not a GGUF")
    app = build_app(Settings(), backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press(*"fix it", "enter")
        backend.loaded.set()
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        assert backend.sent == []
        prompt = app.screen.query_one(PromptInput)
        assert prompt.text == "fix it" and not prompt.border_subtitle


async def test_a_message_sent_during_a_reply_goes_when_it_ends() -> None:
    backend = ScriptedBackend([["one ", "two"], ["three"]], hold_after=1)
    app = build_app(Settings(), backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("a", "enter")
        await pilot.pause(0.1)
        await pilot.press("b", "enter")
        await pilot.pause()
        prompt = app.screen.query_one(PromptInput)
        assert backend.sent == ["a"] and prompt.text == "b"
        assert "when this reply ends" in str(prompt.border_subtitle)
        backend.release()
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        assert backend.sent == ["a", "b"]
        assert prompt.text == ""


@pytest.mark.parametrize(
    "keys",
    [("escape", "escape"), ("ctrl+c",)],
    ids=["esc takes the queued message back, the next esc cancels", "ctrl+c does both"],
)
async def test_a_cancelled_reply_keeps_the_queued_message_unsent(keys: tuple[str, ...]) -> None:
    backend = ScriptedBackend([["one ", "two"]], hold_after=1)
    app = build_app(Settings(), backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("a", "enter")
        await pilot.pause(0.1)
        await pilot.press("b", "enter", keys[0])
        await pilot.pause()
        assert app.screen.reply_running is (len(keys) > 1)
        await pilot.press(*keys[1:])
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        await app.screen.workers.wait_for_complete()
        assert backend.sent == ["a"] and backend.cancelled
        prompt = app.screen.query_one(PromptInput)
        assert prompt.text == "b" and not prompt.border_subtitle
