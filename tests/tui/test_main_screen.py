"""Pilot tests of the main screen fed by a scripted backend."""

from __future__ import annotations

from pathlib import Path

from fusion_tui.chat.backend import Said, SessionCatalog
from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.sessions.model import Session
from fusion_tui.sessions.store import SessionStore
from fusion_tui.tui.app import build_app
from fusion_tui.tui.screens.sessions import SessionsScreen
from fusion_tui.tui.widgets.chat_message import ChatMessage
from fusion_tui.tui.widgets.prompt_input import PromptInput
from fusion_tui.tui.widgets.status_line import StatusLine
from tests.tui.scripted_backend import ScriptedBackend


async def test_prompt_streams_an_answer_and_shows_telemetry() -> None:
    backend = ScriptedBackend([["Hello", ", ", "**world**"]])
    app = build_app(Settings(), backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press(*"hi", "enter")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        messages = list(app.screen.query(ChatMessage))
        assert [m.role for m in messages] == ["user", "assistant"]
        assert messages[1].text == "Hello, **world**"
        assert backend.sent == ["hi"]
        status = app.screen.query_one(StatusLine)
        assert status.last_turn == "slot 2 · 30/42 prompt tokens cached · 12 evaluated · 88.0 tok/s"
        assert status.server.state == "ready"


async def test_escape_cancels_and_keeps_the_partial_answer() -> None:
    backend = ScriptedBackend([["one ", "two ", "three"]], hold_after=2)
    app = build_app(Settings(), backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("x", "enter")
        await pilot.pause(0.1)
        await pilot.press("escape")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        answer = list(app.screen.query(ChatMessage))[-1]
        assert answer.text == "one two "
        assert answer.has_class("-partial")
        assert backend.cancelled
        assert backend.history()[-1] == ("assistant", "one two ", "cancelled")


async def test_a_server_that_fails_to_start_is_explained_and_the_prompt_kept() -> None:
    backend = ScriptedBackend(start_error="model file is not a GGUF")
    app = build_app(Settings(), backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        status = app.screen.query_one(StatusLine)
        assert status.server.state == "error"
        await pilot.press(*"keep me", "enter")
        await pilot.pause()
        assert app.screen.query_one("#prompt").text == "keep me"
        assert backend.sent == []


async def test_new_session_clears_the_chat_and_stop_server_says_stopped() -> None:
    backend = ScriptedBackend([["answer"]])
    app = build_app(Settings(), backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("q", "enter")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        assert len(app.screen.query(ChatMessage)) == 2
        await app.run_action("new_session")
        await pilot.pause()
        assert len(app.screen.query(ChatMessage)) == 0
        assert backend.history() == []
        await app.run_action("stop_server")
        await pilot.pause()
        assert backend.stopped
        assert app.screen.query_one(StatusLine).server.state == "stopped"


async def test_sessions_action_without_a_store_explains_itself() -> None:
    app = build_app(Settings(), ScriptedBackend())
    said: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.notify = lambda message, **_: said.append(message)  # type: ignore[method-assign]
        await app.run_action("open_sessions")
        await pilot.pause()
    assert said == ["sessions are not available with this backend"]


async def test_a_failed_turn_offers_a_relaunch_that_starts_the_server_again() -> None:
    from fusion_tui.chat.events import ReplyDone

    backend = ScriptedBackend(
        [[]], prelude=[ReplyDone("error", note="error · crashed", partial=True)]
    )
    starts: list[int] = []
    real_start = backend.start

    async def counting_start(report):  # type: ignore[no-untyped-def]
        starts.append(1)
        return await real_start(report)

    backend.start = counting_start  # type: ignore[method-assign]
    app = build_app(Settings(), backend)
    said: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        app.notify = lambda message, **_: said.append(message)  # type: ignore[method-assign]
        await pilot.press("x", "enter")
        await pilot.pause(0.2)
        app.screen.workers.cancel_group(app.screen, "reply")
        await pilot.pause()
        assert any("F5 relaunches the server" in m for m in said)
        await pilot.press("f5")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
    assert len(starts) == 2
    assert backend.closed


class CatalogBackend(ScriptedBackend):
    """A scripted backend with saved sessions: the screens reach them only through it."""

    def __init__(self, store: SessionStore) -> None:
        super().__init__()
        self.store = store
        self.opened: list[str] = []

    def sessions(self) -> SessionCatalog | None:
        return self.store

    async def open_session(self, session_id: str) -> str | None:
        self.opened.append(session_id)
        self._history = [Said("user", "words from the saved session")]
        return None


async def test_the_sessions_screen_lists_the_backends_sessions_and_opens_the_pick(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path)
    saved = Session.new(title="Older work", now=1_700_000_000.0)
    store.save(saved)
    backend = CatalogBackend(store)
    app = build_app(Settings(ui=UISettings(cursor_blink=False)), backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await app.run_action("open_sessions")
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        for _ in range(100):  # the list is read in a thread
            if screen.entries:
                break
            await pilot.pause(0.02)
        assert [e.title for e in screen.entries] == ["Older work"]
        await pilot.press("enter")
        for _ in range(100):
            if backend.opened:
                break
            await pilot.pause(0.02)
        await pilot.pause()
        assert backend.opened == [saved.id]
        messages = list(app.screen.query(ChatMessage))
        assert [m.text for m in messages] == ["words from the saved session"]


async def test_enter_sends_without_a_newline_and_ctrl_j_adds_one() -> None:
    backend = ScriptedBackend([["ok"]])
    app = build_app(Settings(ui=UISettings(cursor_blink=False)), backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("a", "ctrl+j", "b")
        prompt = app.screen.query_one(PromptInput)
        assert prompt.text == "a\nb"
        await pilot.press("enter")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        assert backend.sent == ["a\nb"] and prompt.text == ""
        await pilot.press("enter")  # an empty box sends nothing and stays empty
        await pilot.pause()
        assert backend.sent == ["a\nb"] and prompt.text == ""
