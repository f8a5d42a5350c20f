"""The failover question: move the session with its stated cold cost, or wait."""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Static

from fusion_tui.chat.events import TextDelta
from fusion_tui.chat.factory import make_backend
from fusion_tui.chat.local import LocalBackend
from fusion_tui.config import Settings
from fusion_tui.endpoints.placement import Placement
from fusion_tui.paths import AppPaths
from fusion_tui.tui.app import build_app
from fusion_tui.tui.approver import TuiApprover
from fusion_tui.tui.key_clock import APPROVAL_GRACE_S
from fusion_tui.tui.screens.failover import KEYS_HINT, FailoverModal
from fusion_tui.tui.widgets.chat_message import ChatMessage
from tests.fakes.clock import FakeClock
from tests.tui import guarded_modal_support as guarded
from tests.tui.scripted_backend import ScriptedBackend

MOVE = Placement(
    "move", "gpu-box", 1, "here is unreachable; moving to gpu-box slot 1", moved_from="here",
    cold_tokens=1834, repinned=True,
)  # fmt: skip


async def open_dialog(app: App[Any], clock: FakeClock) -> tuple[FailoverModal, asyncio.Task[bool]]:
    approver = TuiApprover(app, clock=clock)
    return await guarded.open_guarded(
        app, approver.ask_failover(MOVE), FailoverModal, "failover dialog"
    )


def dialog_up(
    app: App[None],
) -> AbstractAsyncContextManager[tuple[Pilot[Any], FailoverModal, asyncio.Task[bool], FakeClock]]:
    """`app` at 100×30 with the failover dialog up (see `guarded.modal_up`)."""
    return guarded.modal_up(app, (100, 30), open_dialog)


async def test_ctrl_y_moves_and_the_cost_and_keys_are_stated() -> None:
    async with dialog_up(App[None]()) as (pilot, modal, task, clock):
        await pilot.pause()
        text = str(modal.query_one("#failover-cost", Static).render())
        assert "1,834 prompt tokens" in text and "gpu-box" in text
        assert modal.query_one("#failover-box").border_subtitle == KEYS_HINT
        assert "ctrl+y move" in KEYS_HINT and "esc wait" in KEYS_HINT
        clock.advance(APPROVAL_GRACE_S)
        await pilot.press("ctrl+y")
        assert await asyncio.wait_for(task, 5) is True


async def test_escape_waits() -> None:
    async with dialog_up(App[None]()) as (
        pilot,
        _modal,
        task,
        clock,
    ):
        await pilot.pause()
        clock.advance(APPROVAL_GRACE_S)
        await pilot.press("escape")
        assert await asyncio.wait_for(task, 5) is False


async def test_letters_never_answer_it_and_are_kept() -> None:
    """The old keys (m moved, w waited) are text now, as every letter is."""
    app = App[None]()
    async with dialog_up(app) as (pilot, modal, task, clock):
        await pilot.pause()
        clock.advance(5.0)  # long after it appeared: letters still are text
        await pilot.press(*"mwy more", "x", "backspace")
        await pilot.pause()
        assert not task.done() and app.screen is modal
        assert modal.typed == "mwy more"
        note = modal.query_one("#failover-typed", Static)
        assert note.display and "“mwy more”" in str(note.render())
        clock.advance(1.0)
        await pilot.press("escape")  # (an Enter after typing ends the typed message instead)
        assert await asyncio.wait_for(task, 5) is False


async def test_keys_within_the_grace_period_decide_nothing() -> None:
    app = App[None]()
    async with dialog_up(app) as (pilot, modal, task, clock):
        # Tab moves the focus (never typing): Wait → Move
        answer = await guarded.check_grace_period(
            pilot, app, modal, task, clock, ("ctrl+y", "enter", "escape"), ("tab", "enter")
        )
        assert answer is True


async def test_a_click_right_as_it_appears_is_ignored() -> None:
    async with dialog_up(App[None]()) as (
        pilot,
        _modal,
        task,
        clock,
    ):
        answer = await guarded.check_early_click(pilot, task, clock, "#move", "#wait")
        assert answer is False


async def test_typing_that_hit_the_dialog_lands_back_in_the_prompt_box() -> None:
    """The endpoint went away halfway through the turn: it asks whether to move, as chat does."""
    backend = guarded.AskingBackend(lambda a: a.ask_failover(MOVE), lambda m: f"moved: {m}")
    await guarded.check_typing_lands_back(
        backend, FailoverModal, (100, 30), "go on", "make it mw", "moved: True"
    )


async def test_a_message_typed_into_the_dialog_and_entered_goes_next() -> None:
    backend = guarded.AskingBackend(lambda a: a.ask_failover(MOVE), lambda m: f"moved: {m}")
    await guarded.check_typed_and_entered_goes_next(
        backend, FailoverModal, (100, 30), "go on", "and then the docs"
    )


def test_the_factory_hands_the_tuis_question_to_the_chat(tmp_path: Path) -> None:
    paths = AppPaths(tmp_path / "c", tmp_path / "d", tmp_path / "s", tmp_path / "l")
    approver = TuiApprover(App())
    backend = make_backend(Settings(), paths, approver=approver)
    assert isinstance(backend, LocalBackend)
    assert backend.ask_failover == approver.ask_failover
    plain = make_backend(Settings(), paths)
    assert isinstance(plain, LocalBackend) and plain.ask_failover is None


async def test_a_broken_answer_sent_again_elsewhere_replaces_the_partial_one_in_the_chat() -> None:
    from fusion_tui.chat.events import AnswerRestarted

    restart = AnswerRestarted("the answer broke off; sending the turn again on gpu-box")

    class Restarting(ScriptedBackend):
        async def reply(self, text: str):  # type: ignore[no-untyped-def]
            yield TextDelta("Half an ans")
            yield restart
            async for event in super().reply(text):
                yield event

    backend = Restarting([["The whole", " answer."]])
    app = build_app(Settings(), backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("q", "enter")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        answer = list(app.screen.query(ChatMessage))[-1]
        assert answer.role == "assistant" and answer.text == "The whole answer."
        assert "Half" not in str(answer.query_one("Markdown").source)  # type: ignore[attr-defined]
