"""Pilot tests of agent mode: approval modal, tool blocks, AgentBackend on the fake server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Static

from fusion_tui.agent.approval import ApprovalRequest, Decision
from fusion_tui.chat.agent_backend import AgentBackend
from fusion_tui.config import Settings
from fusion_tui.config.settings import ServerSettings, UISettings
from fusion_tui.paths import AppPaths
from fusion_tui.server.launch_choice import LaunchChoice
from fusion_tui.sessions.store import SessionStore
from fusion_tui.tui.app import build_app
from fusion_tui.tui.approver import TuiApprover
from fusion_tui.tui.screens.approval import ApprovalModal
from fusion_tui.tui.widgets.chat_message import ChatMessage
from fusion_tui.tui.widgets.slot_map import SlotMap
from fusion_tui.tui.widgets.tool_call import ToolCallBlock
from tests.fakes.clock import FakeClock
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.tui.scripted_agent_backend import DIFF, ScriptedAgentBackend
from tests.unit.cli_support import edit

SHELL = ApprovalRequest("shell", "run_shell", "git status -s", "git status -s", "git status")
WRITE = ApprovalRequest("write", "edit_file", "app.py", DIFF)


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("host")


def past_grace(modal: ApprovalModal, seconds: float = 1.0) -> None:
    """Move the modal's key clock on: it has been up (and the keys quiet) that long."""
    clock = modal.key_clock.clock
    assert isinstance(clock, FakeClock)
    clock.advance(seconds)


async def ask(request: ApprovalRequest, *keys: str, click: str | None = None) -> Decision:
    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        approver = TuiApprover(app, clock=FakeClock())
        task = asyncio.ensure_future(approver.decide(request))
        await pilot.pause()
        assert isinstance(app.screen, ApprovalModal)
        past_grace(app.screen)
        if click:
            await pilot.click(click)
        await pilot.press(*keys)
        decision = await asyncio.wait_for(task, 5)
        await pilot.pause()
        assert not isinstance(app.screen, ApprovalModal)
        return decision


@pytest.mark.parametrize(
    ("keys", "click", "expected"),
    [
        (("ctrl+y",), None, Decision.ALLOW_ONCE),
        (("left", "enter"), None, Decision.ALLOW_PREFIX),  # the focus starts on "deny"
        (("left", "left", "enter"), None, Decision.ALLOW_ONCE),
        (("shift+tab", "enter"), None, Decision.ALLOW_PREFIX),
        (("escape",), None, Decision.DENY),
        ((), "#allow-once", Decision.ALLOW_ONCE),
        ((), "#allow-prefix", Decision.ALLOW_PREFIX),
        ((), "#deny", Decision.DENY),
        (("enter",), None, Decision.DENY),  # the focused default is "deny"
    ],
)
async def test_the_approval_modal_returns_each_decision(
    keys: tuple[str, ...], click: str | None, expected: Decision
) -> None:
    assert await ask(SHELL, *keys, click=click) is expected


async def test_a_write_offers_no_prefix_and_shows_the_diff() -> None:
    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        task = asyncio.ensure_future(TuiApprover(app, clock=FakeClock()).decide(WRITE))
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, ApprovalModal)
        assert not modal.query("#allow-prefix")
        shown = " ".join(str(s.render()) for s in modal.query(Static))
        assert "Write app.py?" in shown and 'return f"hello {name}"' in shown
        past_grace(modal)
        await pilot.press("left", "enter")  # no prefix button: from "deny" to "allow once"
        assert await asyncio.wait_for(task, 5) is Decision.ALLOW_ONCE


async def test_a_cancelled_question_takes_the_modal_down() -> None:
    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        task = asyncio.ensure_future(TuiApprover(app).decide(SHELL))
        await pilot.pause()
        assert isinstance(app.screen, ApprovalModal)
        task.cancel()
        await pilot.pause()
        await pilot.pause()
        assert not isinstance(app.screen, ApprovalModal)


async def test_tool_blocks_render_above_the_answer() -> None:
    app = build_app(Settings(ui=UISettings(cursor_blink=False)), ScriptedAgentBackend())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press(*"fix greeting", "enter")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        chat = app.screen.query_one("#chat")
        kinds = [type(w).__name__ for w in chat.children]
        assert kinds == [
            "ChatMessage",
            "ToolCallBlock",
            "ToolCallBlock",
            "ToolCallBlock",
            "ChatMessage",
        ]
        blocks = list(chat.query(ToolCallBlock))
        assert [b.block.name for b in blocks] == ["list_dir", "edit_file", "run_shell"]
        assert [b.collapsed for b in blocks] == [True, False, True]  # the diff starts open
        assert blocks[2].has_class("-failed")
        assert str(blocks[0].title).startswith("✓ list_dir(path=.) · 3 ms")
        assert "1.2 s" in str(blocks[2].title)
        answer = list(chat.query(ChatMessage))[-1]
        assert answer.text.startswith("Changed the greeting")
        blocks[0].collapsed = False
        await pilot.pause()
        shown = " ".join(str(s.render()) for s in blocks[0].query(Static))
        assert "README.md" in shown and '"path": "."' in shown


# --- AgentBackend on the fake server -------------------------------------------------------


@pytest.fixture
def srv() -> Iterator[FakeLlamaServer]:
    with FakeLlamaServer(total_slots=2, n_ctx=8192) as server:
        yield server


async def wait_for_modal(app: App[Any], pilot: Any) -> ApprovalModal:
    """The modal once it is up, its grace period over (the app's approver has a fake clock)."""
    for _ in range(200):
        if isinstance(app.screen, ApprovalModal):
            past_grace(app.screen)
            return app.screen
        await pilot.pause(0.02)
    raise AssertionError("the approval modal never appeared")


async def test_agent_mode_asks_before_a_write_and_draws_the_tool_block(
    srv: FakeLlamaServer, app_home: AppPaths, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    srv.script(edit("hello.txt", "hi\n", prose="Wrote it."))
    settings = Settings(
        server=ServerSettings(mode="external", url=srv.url), ui=UISettings(cursor_blink=False)
    )
    app = build_app(settings, paths=app_home, workspace=ws)
    app.approver.clock = FakeClock()
    backend = app.backend
    assert isinstance(backend, AgentBackend) and backend.approver is app.approver
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        await pilot.press(*"write hello", "enter")
        modal = await wait_for_modal(app, pilot)
        assert modal.request.tool == "write_file" and modal.request.target == "hello.txt"
        await pilot.press("ctrl+y")
        await pilot.pause()
        main = app.screen
        await main.workers.wait_for_complete()
        await pilot.pause()
        blocks = list(main.query(ToolCallBlock))
        assert [(b.block.name, b.block.ok) for b in blocks] == [("write_file", True)]
        assert "+hi" in blocks[0].block.diff
        assert list(main.query(ChatMessage))[-1].text == "Wrote it."
    assert (ws / "hello.txt").read_text() == "hi\n"
    saved = SessionStore.default(app_home).load(backend.session.id)
    assert [t.outcome for t in saved.turns] == ["completed"]


async def test_escape_cancels_an_agent_turn_and_it_is_saved_as_cancelled(
    srv: FakeLlamaServer, app_home: AppPaths, tmp_path: Path
) -> None:
    srv.script(Reply(hang="first_token"))
    settings = Settings(server=ServerSettings(mode="external", url=srv.url))
    app = build_app(settings, paths=app_home, workspace=tmp_path)
    backend = app.backend
    assert isinstance(backend, AgentBackend)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        await pilot.press(*"wait", "enter")
        for _ in range(200):
            if any(r.slot is not None for r in srv.requests):
                break
            await pilot.pause(0.02)
        await pilot.press("escape")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        answer = list(app.screen.query(ChatMessage))[-1]
        assert answer.has_class("-partial")
    saved = SessionStore.default(app_home).load(backend.session.id)
    assert saved.messages[0].content == "wait"
    assert [t.outcome for t in saved.turns] == ["cancelled"]


async def test_an_agent_session_survives_a_relaunch_with_its_tools_and_approver(
    srv: FakeLlamaServer, app_home: AppPaths, tmp_path: Path
) -> None:
    """F2 (launch another model) closes the backend and builds the next one: still agent mode
    in the same workspace, still asking the user before a write."""
    ws = tmp_path / "ws"
    ws.mkdir()
    settings = Settings(
        server=ServerSettings(mode="external", url=srv.url), ui=UISettings(cursor_blink=False)
    )
    app = build_app(settings, paths=app_home, workspace=ws)
    app.approver.clock = FakeClock()
    first = app.backend
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        # what the launch wizard does on F2: its launcher, then the app takes the connection
        conn = await app._relaunch(settings, app_home, model=str(tmp_path / "next.gguf"))
        choice = LaunchChoice(tmp_path / "next.gguf", 2, None, conn)  # type: ignore[arg-type]
        await app._on_launch_chosen(choice)
        await pilot.pause()
        assert app.backend is not first
        srv.script(edit("again.txt", "yes\n", prose="Done."))
        await pilot.press(*"write again", "enter")
        modal = await wait_for_modal(app, pilot)  # the approver came along
        assert modal.request.tool == "write_file" and modal.request.target == "again.txt"
        await pilot.press("ctrl+y")
        await pilot.pause()
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        blocks = list(app.screen.query(ToolCallBlock))  # the tools came along
        assert [(b.block.name, b.block.ok) for b in blocks] == [("write_file", True)]
        assert list(app.screen.query(ChatMessage))[-1].text == "Done."
    assert (ws / "again.txt").read_text() == "yes\n"


async def test_the_slot_map_works_in_agent_mode_and_shows_the_next_server_while_launching(
    srv: FakeLlamaServer, app_home: AppPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fusion_tui.server.connect

    real_connect = fusion_tui.server.connect.connect
    launched = asyncio.Event()

    async def slow_connect(*args: Any, **kwargs: Any) -> Any:
        await launched.wait()  # the wizard is still launching
        return await real_connect(*args, **kwargs)

    monkeypatch.setattr(fusion_tui.server.connect, "connect", slow_connect)
    settings = Settings(
        server=ServerSettings(mode="external", url=srv.url), ui=UISettings(cursor_blink=False)
    )
    app = build_app(settings, paths=app_home, workspace=tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        maps = list(app.screen.query(SlotMap))
        assert len(maps) == 1 and maps[0].display
        await maps[0].refresh_now()
        assert len(maps[0].rows) == 2  # the fake server's two slots
        await pilot.press("ctrl+b")
        assert not maps[0].display
        await app.run_action("toggle_slot_map")  # the palette's "Toggle slot map"
        assert maps[0].display
        relaunch = asyncio.ensure_future(
            app._relaunch(settings, app_home, model=str(tmp_path / "next.gguf"))
        )
        await pilot.pause(0.1)
        assert not app.screen.query(SlotMap)  # not the server being replaced
        pending = str(app.screen.query_one("#slots-pending", Static).render())
        assert "launching next.gguf" in pending
        launched.set()
        conn = await asyncio.wait_for(relaunch, 5)
        choice = LaunchChoice(tmp_path / "next.gguf", 2, None, conn)
        await app._on_launch_chosen(choice)
        await pilot.pause()
        assert not app.screen.query("#slots-pending")
        assert len(app.screen.query(SlotMap)) == 1
