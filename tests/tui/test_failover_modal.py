"""The failover question (issue 14): move the session with its stated cold cost, or wait."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.app import App
from textual.widgets import Static

from fusion_tui.chat.factory import make_backend
from fusion_tui.chat.local import LocalBackend
from fusion_tui.config import Settings
from fusion_tui.endpoints.placement import Placement
from fusion_tui.paths import AppPaths
from fusion_tui.tui.approver import TuiApprover
from fusion_tui.tui.screens.failover import FailoverModal

MOVE = Placement(
    "move", "gpu-box", 1, "here is unreachable; moving to gpu-box slot 1", moved_from="here",
    cold_tokens=1834, repinned=True,
)  # fmt: skip


async def _ask(keys: list[str]) -> tuple[bool, str]:
    app: App[None] = App()
    async with app.run_test(size=(100, 30)) as pilot:
        approver = TuiApprover(app)
        task = asyncio.create_task(approver.ask_failover(MOVE))
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, FailoverModal)
        text = str(modal.query_one("#failover-cost", Static).render())
        for key in keys:
            await pilot.press(key)
        await pilot.pause()
        return await task, text


async def test_m_moves_and_the_cost_is_stated() -> None:
    moved, text = await _ask(["m"])
    assert moved is True
    assert "1,834 prompt tokens" in text and "gpu-box" in text


async def test_escape_waits() -> None:
    moved, _ = await _ask(["escape"])
    assert moved is False


def test_the_factory_hands_the_tuis_question_to_the_chat(tmp_path: Path) -> None:
    paths = AppPaths(tmp_path / "c", tmp_path / "d", tmp_path / "s", tmp_path / "l")
    approver = TuiApprover(App())
    backend = make_backend(Settings(), paths, approver=approver)
    assert isinstance(backend, LocalBackend)
    assert backend.ask_failover == approver.ask_failover
    plain = make_backend(Settings(), paths)
    assert isinstance(plain, LocalBackend) and plain.ask_failover is None


async def test_a_broken_answer_sent_again_elsewhere_replaces_the_partial_one_in_the_chat() -> None:
    from fusion_tui.chat.events import AnswerRestarted, TextDelta
    from fusion_tui.tui.app import build_app
    from fusion_tui.tui.widgets.chat_message import ChatMessage
    from tests.tui.scripted_backend import ScriptedBackend

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
