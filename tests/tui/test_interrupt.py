"""Ctrl+C cancels a running reply first and quits only when idle; cancel marks are kept."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path

from textual.widgets import Static

from fusion_tui.chat.backend import Said
from fusion_tui.chat.events import ReplyEvent, ToolBlock
from fusion_tui.chat.local import LocalBackend
from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.paths import AppPaths
from fusion_tui.sessions.model import Session
from fusion_tui.sessions.store import SessionStore
from fusion_tui.tui.app import build_app
from fusion_tui.tui.widgets.chat_message import ChatMessage
from fusion_tui.tui.widgets.status_line import StatusLine
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


def _paths(tmp_path: Path) -> AppPaths:
    root = tmp_path / "home"
    return AppPaths(root / "config", root / "data", root / "state", root / "log")


def _saved_cancelled_session(paths: AppPaths) -> str:
    session = Session.new(title="Cut short", now=1_700_000_000.0)
    session.begin_turn("explain slots", clock=lambda: 1_700_000_001.0)
    session.end_turn("cancelled", "Slots are", "cancelled", lambda: 1_700_000_002.0)
    session.begin_turn("and again", clock=lambda: 1_700_000_003.0)
    session.end_turn("cancelled", "", "cancelled", lambda: 1_700_000_004.0)
    SessionStore.default(paths).save(session)
    return session.id


def test_the_local_backend_gives_the_cancel_marks_of_a_resumed_session(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    session_id = _saved_cancelled_session(paths)
    backend = LocalBackend(Settings(), paths, resume=session_id)
    assert backend.history() == [
        ("user", "explain slots", None),
        ("assistant", "Slots are", "cancelled"),
        ("user", "and again", None),
        ("assistant", "", "cancelled"),
    ]


async def test_resumed_cancelled_answers_are_drawn_cancelled() -> None:
    history = [
        Said("user", "explain slots"),
        Said("assistant", "Slots are", "cancelled"),
        Said("user", "and again"),
        Said("assistant", "", "cancelled"),
    ]
    app = build_app(SETTINGS, ScriptedBackend(history=history))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        messages = list(app.screen.query(ChatMessage))
        notes = [str(m.query_one(".footnote", Static).render()) for m in messages]
        assert notes == [
            "",
            "cancelled · partial answer kept",
            "",
            "cancelled · nothing was generated",
        ]
        assert [m.has_class("-partial") for m in messages] == [False, True, False, True]


async def test_a_cancel_before_any_text_says_so_and_clears_the_old_telemetry() -> None:
    backend = ScriptedBackend([["first"], ["never"]])
    app = build_app(SETTINGS, backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        await pilot.press("a", "enter")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        status = app.screen.query_one(StatusLine)
        assert status.last_turn.startswith("slot 2")
        backend.hold_after = 0  # the next reply waits before its first fragment
        await pilot.press("b", "enter")
        await pilot.pause(0.1)
        await pilot.press("escape")
        await pilot.pause(0.3)
        answer = list(app.screen.query(ChatMessage))[-1]
        assert str(answer.query_one(".footnote", Static).render()) == (
            "cancelled · nothing was generated"
        )
        assert status.last_turn == "last turn cancelled"


class _ToolThenWait(ScriptedBackend):
    async def reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        yield ToolBlock("read_file", {"path": "hello.py"}, 'print("hi")', True, 5.0)
        await asyncio.Event().wait()


async def test_an_agent_turn_cancelled_after_a_tool_call_says_the_calls_are_kept() -> None:
    app = build_app(SETTINGS, _ToolThenWait())
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        await pilot.press("x", "enter")
        await pilot.pause(0.2)
        await pilot.press("ctrl+c")
        await pilot.pause(0.3)
        answer = list(app.screen.query(ChatMessage))[-1]
        assert str(answer.query_one(".footnote", Static).render()) == (
            "cancelled · no answer yet; the tool calls above are kept"
        )
