"""Scaffolding shared by the tests of the guarded modals (approval, failover): they take no
answer from typing, and no key counts within the grace period after they appear or after a key
taken as typing. Each helper holds the assertions of one such check."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from textual.app import App
from textual.pilot import Pilot
from textual.screen import ModalScreen
from textual.widgets import Static

from fusion_tui.chat.events import ReplyDone, ReplyEvent, TextDelta
from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.tui.app import build_app
from fusion_tui.tui.approver import TuiApprover
from fusion_tui.tui.key_clock import APPROVAL_GRACE_S
from fusion_tui.tui.screens.main import MainScreen
from fusion_tui.tui.widgets.chat_message import ChatMessage
from fusion_tui.tui.widgets.prompt_input import PromptInput
from tests.fakes.clock import FakeClock
from tests.tui.keys_support import burst
from tests.tui.scripted_backend import ScriptedBackend

M = TypeVar("M", bound=ModalScreen[Any])
T = TypeVar("T")
A = TypeVar("A", bound=App[Any])


async def open_guarded(
    app: App[Any],
    question: Coroutine[Any, Any, T],
    modal_type: type[M],
    name: str,
) -> tuple[M, asyncio.Task[T]]:
    """Ask `question` (a `TuiApprover` call) and wait for its modal (`name` it in the error)."""
    task = asyncio.create_task(question)
    for _ in range(50):
        await asyncio.sleep(0)
        if isinstance(app.screen, modal_type):
            return app.screen, task
    raise AssertionError(f"the {name} never appeared")


@asynccontextmanager
async def modal_up(
    app: A,
    size: tuple[int, int],
    open_modal: Callable[[A, FakeClock], Awaitable[tuple[M, asyncio.Task[T]]]],
) -> AsyncIterator[tuple[Pilot[Any], M, asyncio.Task[T], FakeClock]]:
    """`app` running at `size` with the modal `open_modal` opens up, on a fake clock: the pilot,
    the modal, the task that gets its answer, the clock."""
    clock = FakeClock()
    async with app.run_test(size=size) as pilot:
        modal, task = await open_modal(app, clock)
        yield pilot, modal, task, clock


async def check_grace_period(
    pilot: Pilot[Any],
    app: App[Any],
    modal: ModalScreen[Any],
    task: asyncio.Task[Any],
    clock: FakeClock,
    early_keys: tuple[str, ...],
    answer_keys: tuple[str, ...],
) -> Any:
    """Keys within the grace period decide nothing; `answer_keys` after it do: their answer."""
    await pilot.pause()
    clock.advance(0.1)
    await pilot.press(*early_keys)  # still on their way from the prompt
    await pilot.pause()
    assert not task.done() and app.screen is modal
    clock.advance(APPROVAL_GRACE_S - 0.05)  # up long enough, but the keys were not quiet
    await pilot.press("ctrl+y")
    await pilot.pause()
    assert not task.done()
    clock.advance(APPROVAL_GRACE_S)
    await pilot.press(*answer_keys)
    return await asyncio.wait_for(task, 5)


async def check_early_click(
    pilot: Pilot[Any], task: asyncio.Task[Any], clock: FakeClock, early: str, late: str
) -> Any:
    """A click on `early` right as the modal appears is ignored; one on `late` after the grace
    period answers: its answer."""
    await pilot.pause()
    await pilot.click(early)
    await pilot.pause()
    assert not task.done()
    clock.advance(APPROVAL_GRACE_S)
    await pilot.click(late)
    return await asyncio.wait_for(task, 5)


class AskingBackend(ScriptedBackend):
    """A turn that asks the TUI a guarded question halfway (`ask`, given the approver) and answers
    with `said(answer)`, as an agent step or a failing-over chat does."""

    def __init__(
        self,
        ask: Callable[[TuiApprover], Awaitable[Any]],
        said: Callable[[Any], str],
    ) -> None:
        super().__init__()
        self.approver: TuiApprover | None = None
        self.ask = ask
        self.said = said

    async def reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        self.sent.append(text)
        assert self.approver is not None
        answer = await self.ask(self.approver)
        yield TextDelta(self.said(answer))
        yield ReplyDone("completed")


async def check_typing_lands_back(
    backend: AskingBackend,
    modal_type: type[ModalScreen[Any]],
    size: tuple[int, int],
    message: str,
    typed: str,
    answer: str,
) -> None:
    """Send `message`; while the modal is up the user types `typed` (a burst, no Enter): the
    modal stays, ctrl+y answers after the grace period, the prompt box holds `typed` and the
    chat's last message is `answer`."""
    async with _modal_from_a_turn(backend, modal_type, size, message) as (pilot, app, clock):
        burst(app, typed)  # the user kept typing the next message
        await pilot.pause()
        assert isinstance(app.screen, modal_type)
        main = await _answer_and_settle(pilot, app, clock, 1.0)
        assert app.screen is main
        assert main.query_one(PromptInput).text == typed
        assert [m.text for m in main.query(ChatMessage)][-1] == answer
        assert backend.sent == [message]


async def check_typed_and_entered_goes_next(
    backend: AskingBackend,
    modal_type: type[ModalScreen[Any]],
    size: tuple[int, int],
    message: str,
    typed: str,
) -> None:
    """Send `message`; while the modal is up the user types `typed` and Enter (a burst, then
    Enter again long after): no Enter answers the modal; ctrl+y does, and `typed` goes as the
    next message once the turn ends (its own turn asks again: ctrl+y)."""
    async with _modal_from_a_turn(backend, modal_type, size, message) as (pilot, app, clock):
        burst(app, typed + "\r")  # the user kept typing the next message, Enter and all
        await pilot.pause()
        clock.advance(5.0)
        await pilot.press("enter")  # long after: still the end of the message, no answer
        await pilot.pause()
        assert isinstance(app.screen, modal_type)
        note = app.screen.query_one(f"#{app.screen.TYPED_ID}", Static)
        assert "sent as your next message" in str(note.render())
        clock.advance(1.0)
        await pilot.press("ctrl+y")
        for _ in range(100):  # the typed message's turn asks too
            if isinstance(app.screen, modal_type) and backend.sent[-1:] == [typed]:
                break
            await pilot.pause(0.01)
        assert backend.sent == [message, typed]
        main = await _answer_and_settle(pilot, app, clock, 5.0)
        assert main.query_one(PromptInput).text == ""


async def _answer_and_settle(
    pilot: Pilot[Any], app: App[Any], clock: FakeClock, after_s: float
) -> MainScreen:
    """Ctrl+Y `after_s` on, then the main screen once its turns are over."""
    clock.advance(after_s)
    await pilot.press("ctrl+y")
    main = next(s for s in app.screen_stack if isinstance(s, MainScreen))
    await main.workers.wait_for_complete()
    await pilot.pause()
    return main


@asynccontextmanager
async def _modal_from_a_turn(
    backend: AskingBackend, modal_type: type[ModalScreen[Any]], size: tuple[int, int], message: str
) -> AsyncIterator[tuple[Pilot[Any], App[Any], FakeClock]]:
    """The app on a fake clock, `message` sent, and the modal its turn asks up."""
    clock = FakeClock()
    app = build_app(Settings(ui=UISettings(cursor_blink=False)), backend)
    app.approver.clock = clock
    backend.approver = app.approver
    async with app.run_test(size=size) as pilot:
        await app.screen.workers.wait_for_complete()
        await pilot.press(*message, "enter")
        for _ in range(100):
            if isinstance(app.screen, modal_type):
                break
            await pilot.pause(0.01)
        assert isinstance(app.screen, modal_type)
        yield pilot, app, clock
