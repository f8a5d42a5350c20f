"""Pilot tests of `SessionsScreen` over a real store in a temporary folder."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.app import App
from textual.widgets import Input, OptionList, Static

from fusion_tui.sessions.model import Message, Session
from fusion_tui.sessions.store import SessionStore
from fusion_tui.tui.screens.sessions import (
    ConfirmDeleteScreen,
    RenameScreen,
    SessionsScreen,
    age,
)

NOW = 1_750_000_000.0
PARSER = "20250601-090000-000-aaaaaa"
DOCS = "20250602-090000-000-bbbbbb"
BENCH = "20250603-090000-000-cccccc"
BROKEN = "20250604-090000-000-dddddd"


def make_store(root: Path) -> SessionStore:
    """Three readable sessions and one damaged file, with fixed times and ids."""
    store = SessionStore(root)
    sessions = [
        Session(
            PARSER, "Fix the parser bug", NOW - 7200, NOW - 3600, "~/src/fusion", pinned_slot=2
        ),
        Session(DOCS, "Write the README", NOW - 90000, NOW - 86400 * 2, "~/src/fusion"),
        Session(BENCH, "Benchmark cache reuse", NOW - 600, NOW - 120, "~/src/bench"),
    ]
    sessions[0].messages = [Message("user", "why does the tokenizer drop quotes?")]
    sessions[2].messages = [Message("user", "run it"), Message("assistant", "done")]
    for session in sessions:
        store.save(session)
    (root / f"{BROKEN}.json").write_text('{"schema_version": 1, "id": ', encoding="utf-8")
    return store


class SessionsHost(App[None]):
    """Opens the sessions screen at start and records what it was dismissed with."""

    def __init__(self, store: SessionStore) -> None:
        super().__init__()
        self.store = store
        self.cursor_blink = False
        self.results: list[str | None] = []

    def on_mount(self) -> None:
        self.push_screen(SessionsScreen(self.store, clock=lambda: NOW), self.results.append)


async def settle(app: App[None]) -> None:
    """Let thread workers finish and their `call_from_thread` answers land (a few rounds)."""
    for _ in range(3):
        for screen in app.screen_stack:
            await screen.workers.wait_for_complete()
        await asyncio.sleep(0.02)


def titles(screen: SessionsScreen) -> list[str]:
    return [e.title if e.ok else f"damaged:{e.id}" for e in screen.entries]


async def test_lists_sessions_newest_first_and_the_damaged_file_last(tmp_path: Path) -> None:
    app = SessionsHost(make_store(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app)
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        assert titles(screen) == [
            "Benchmark cache reuse",
            "Fix the parser bug",
            "Write the README",
            f"damaged:{BROKEN}",
        ]
        broken = screen.entries[-1]
        assert broken.status == "damaged" and "not valid JSON" in broken.reason
        prompt = str(screen.query_one(OptionList).get_option_at_index(3).prompt)
        assert "damaged" in prompt and f"{BROKEN}.json" in prompt
        assert "not valid JSON (line 1, column 29: Expecting value)" in prompt
        assert str(tmp_path) not in prompt  # no absolute path on screen
        first = str(screen.query_one(OptionList).get_option_at_index(1).prompt)
        assert "slot 2" in first and "1 h ago" in first and "~/src/fusion" in first
        note = str(screen.query_one("#sessions-note", Static).render())
        assert note.startswith("4 sessions · 1 unreadable")
        await pilot.pause()


async def test_search_filters_as_you_type_including_message_text(tmp_path: Path) -> None:
    app = SessionsHost(make_store(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app)
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        await pilot.press(*"readme")
        await settle(app)
        assert titles(screen) == ["Write the README"]
        screen.query_one(Input).value = "TOKENIZER"  # only in a message of the parser session
        await settle(app)
        assert titles(screen) == ["Fix the parser bug"]
        screen.query_one(Input).value = "dddddd"  # the damaged file's name
        await settle(app)
        assert titles(screen) == [f"damaged:{BROKEN}"]
        screen.query_one(Input).value = "nothing like this"
        await settle(app)
        assert screen.entries == ()
        assert "No session matches" in str(screen.query_one("#sessions-note", Static).render())


async def test_enter_resumes_the_highlighted_session(tmp_path: Path) -> None:
    app = SessionsHost(make_store(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app)
        await pilot.press("down", "down", "enter")  # focus the list, move to the second entry
        await settle(app)
        assert app.results == [PARSER]
        assert not isinstance(app.screen, SessionsScreen)


async def test_escape_closes_with_none(tmp_path: Path) -> None:
    app = SessionsHost(make_store(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app)
        await pilot.press("escape")
        await settle(app)
        assert app.results == [None]


async def test_rename_writes_the_new_title(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    app = SessionsHost(store)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app)
        await pilot.press("f2")
        await settle(app)
        assert isinstance(app.screen, RenameScreen)
        rename = app.screen.query_one(Input)
        assert rename.value == "Benchmark cache reuse"
        rename.value = "Bench: cache reuse vs plain client"
        await pilot.press("enter")
        await settle(app)
        assert isinstance(app.screen, SessionsScreen)
        assert store.load(BENCH).title == "Bench: cache reuse vs plain client"
        assert titles(app.screen)[0] == "Bench: cache reuse vs plain client"


async def test_delete_asks_first_and_cancel_keeps_the_file(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    app = SessionsHost(store)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app)
        await pilot.press("ctrl+d")
        await settle(app)
        assert isinstance(app.screen, ConfirmDeleteScreen)
        await pilot.press("escape")
        await settle(app)
        assert (tmp_path / f"{BENCH}.json").exists()
        await pilot.press("ctrl+d")
        await settle(app)
        await pilot.click("#delete")
        await settle(app)
        assert not (tmp_path / f"{BENCH}.json").exists()
        assert isinstance(app.screen, SessionsScreen)
        assert "Benchmark cache reuse" not in titles(app.screen)
        assert len(app.screen.entries) == 3


async def test_a_damaged_entry_cannot_be_resumed_renamed_or_deleted(tmp_path: Path) -> None:
    app = SessionsHost(make_store(tmp_path))
    damaged = tmp_path / f"{BROKEN}.json"
    before = damaged.read_bytes()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app)
        await pilot.press("down", "end")
        await settle(app)
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        assert screen.selected is not None and screen.selected.status == "damaged"
        await pilot.press("enter", "f2", "ctrl+d")
        await settle(app)
        assert app.screen is screen and app.results == []  # no dismiss, no modal pushed
        assert damaged.read_bytes() == before
        warnings = [n.message for n in app._notifications]
        assert len(warnings) == 3
        assert all("leaves this file alone" in w and "not valid JSON" in w for w in warnings)


async def test_an_empty_store_says_so(tmp_path: Path) -> None:
    app = SessionsHost(SessionStore(tmp_path / "none"))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app)
        screen = app.screen
        assert isinstance(screen, SessionsScreen) and screen.entries == ()
        assert str(screen.query_one("#sessions-note", Static).render()) == "No saved sessions yet."
        await pilot.press("enter")
        assert app.results == []


def test_age_is_short_and_relative() -> None:
    assert [age(s) for s in (5, 600, 7200, 86400 * 3)] == [
        "just now",
        "10 min ago",
        "2 h ago",
        "3 d ago",
    ]
