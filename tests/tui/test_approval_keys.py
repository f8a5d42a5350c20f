"""The approval modal takes no decision from typing: letters go back to the prompt box, and no
key counts within the grace period after the modal appears or after a key taken as typing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from textual.app import App, ComposeResult
from textual.widgets import Static

from fusion_tui.agent.approval import ApprovalRequest, Decision
from fusion_tui.chat.events import ReplyDone, ReplyEvent, TextDelta
from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.tui.app import build_app
from fusion_tui.tui.approver import TuiApprover
from fusion_tui.tui.key_clock import APPROVAL_GRACE_S
from fusion_tui.tui.screens.approval import KEYS_HINT, ApprovalModal
from fusion_tui.tui.screens.main import MainScreen
from fusion_tui.tui.widgets.chat_message import ChatMessage
from fusion_tui.tui.widgets.prompt_input import PromptInput
from tests.fakes.clock import FakeClock
from tests.tui.keys_support import burst
from tests.tui.scripted_backend import ScriptedBackend

SHELL = ApprovalRequest("shell", "run_shell", "git status -s", "git status -s", "git status")


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("host")


async def open_modal(app: App[Any], clock: FakeClock) -> tuple[ApprovalModal, asyncio.Future[Any]]:
    task = asyncio.ensure_future(TuiApprover(app, clock=clock).decide(SHELL))
    for _ in range(50):
        await asyncio.sleep(0)
        if isinstance(app.screen, ApprovalModal):
            return app.screen, task
    raise AssertionError("the approval modal never appeared")


async def test_keys_within_the_grace_period_decide_nothing() -> None:
    app, clock = Host(), FakeClock()
    async with app.run_test(size=(80, 24)) as pilot:
        modal, task = await open_modal(app, clock)
        await pilot.pause()
        clock.advance(0.1)
        await pilot.press("enter", "escape", "ctrl+y")  # still on their way from the prompt
        await pilot.pause()
        assert not task.done() and app.screen is modal
        clock.advance(APPROVAL_GRACE_S - 0.05)  # up long enough, but the keys were not quiet
        await pilot.press("ctrl+y")
        await pilot.pause()
        assert not task.done()
        clock.advance(APPROVAL_GRACE_S)
        await pilot.press("ctrl+y")
        assert await asyncio.wait_for(task, 5) is Decision.ALLOW_ONCE


async def test_letters_are_never_an_answer_and_are_kept() -> None:
    app, clock = Host(), FakeClock()
    async with app.run_test(size=(80, 24)) as pilot:
        modal, task = await open_modal(app, clock)
        clock.advance(5.0)  # long after it appeared: letters still are text
        await pilot.press(*"y and a d", "p", "n", "backspace")
        await pilot.pause()
        assert not task.done()
        assert modal.typed == "y and a dp"
        note = modal.query_one("#approval-typed", Static)
        assert note.display and "“y and a dp”" in str(note.render())
        clock.advance(1.0)
        await pilot.press("escape")
        assert await asyncio.wait_for(task, 5) is Decision.DENY


async def test_a_click_right_as_it_appears_is_ignored() -> None:
    app, clock = Host(), FakeClock()
    async with app.run_test(size=(80, 24)) as pilot:
        _modal, task = await open_modal(app, clock)
        await pilot.pause()
        await pilot.click("#deny")
        await pilot.pause()
        assert not task.done()
        clock.advance(APPROVAL_GRACE_S)
        await pilot.click("#allow-once")
        assert await asyncio.wait_for(task, 5) is Decision.ALLOW_ONCE


async def test_the_modal_shows_its_keys() -> None:
    app, clock = Host(), FakeClock()
    async with app.run_test(size=(80, 24)) as pilot:
        modal, task = await open_modal(app, clock)
        await pilot.pause()
        box = modal.query_one("#approval-box")
        assert box.border_subtitle == KEYS_HINT
        assert "ctrl+y allow once" in KEYS_HINT and "esc deny" in KEYS_HINT
        task.cancel()


class AskingBackend(ScriptedBackend):
    """A turn that asks for an approval halfway, as an agent step does."""

    def __init__(self) -> None:
        super().__init__()
        self.approver: TuiApprover | None = None

    async def reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        self.sent.append(text)
        assert self.approver is not None
        decision = await self.approver.decide(SHELL)
        yield TextDelta(f"decided: {decision.value}")
        yield ReplyDone("completed")


async def test_typing_that_hit_the_modal_lands_back_in_the_prompt_box() -> None:
    backend, clock = AskingBackend(), FakeClock()
    app = build_app(Settings(ui=UISettings(cursor_blink=False)), backend)
    app.approver.clock = clock
    backend.approver = app.approver
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        await pilot.press(*"run it", "enter")
        for _ in range(100):
            if isinstance(app.screen, ApprovalModal):
                break
            await pilot.pause(0.01)
        assert isinstance(app.screen, ApprovalModal)
        burst(app, "and then? y\r")  # the user kept typing the next message
        await pilot.pause()
        assert isinstance(app.screen, ApprovalModal)
        clock.advance(1.0)
        await pilot.press("ctrl+y")
        main = next(s for s in app.screen_stack if isinstance(s, MainScreen))
        await main.workers.wait_for_complete()
        await pilot.pause()
        assert app.screen is main
        assert main.query_one(PromptInput).text == "and then? y"
        answer = [m.text for m in main.query(ChatMessage)][-1]
        assert answer == f"decided: {Decision.ALLOW_ONCE.value}"
        assert backend.sent == ["run it"]
