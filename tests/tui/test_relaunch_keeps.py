"""F2 (launch another model) keeps the session on screen and stores the launch in the config."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from fusion_tui.chat.agent_backend import AgentBackend
from fusion_tui.config import Settings
from fusion_tui.config.loader import load_settings
from fusion_tui.config.settings import ServerSettings, UISettings
from fusion_tui.paths import AppPaths
from fusion_tui.server.launch_choice import LaunchChoice
from fusion_tui.tui.app import build_app
from fusion_tui.tui.widgets.chat_message import ChatMessage
from tests.fakes.fake_server import FakeLlamaServer, Reply


@pytest.fixture
def srv() -> Iterator[FakeLlamaServer]:
    with FakeLlamaServer(total_slots=2, n_ctx=8192) as server:
        yield server


async def test_f2_keeps_the_session_and_saves_slots_and_context(
    srv: FakeLlamaServer, app_home: AppPaths, tmp_path: Path
) -> None:
    srv.script(Reply(text=[json.dumps({"tool": "finish", "args": {"summary": "Hello there."}})]))
    ws = tmp_path / "ws"
    ws.mkdir()
    settings = Settings(
        server=ServerSettings(mode="external", url=srv.url), ui=UISettings(cursor_blink=False)
    )
    app = build_app(settings, paths=app_home, workspace=ws)  # the fake serves /completion
    first = app.backend
    assert isinstance(first, AgentBackend)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.screen.workers.wait_for_complete()
        await pilot.press(*"say hello", "enter")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        # what the wizard does on F2: its launcher, then the app takes the connection
        model = tmp_path / "next.gguf"
        conn = await app._relaunch(settings, app_home, model=str(model))
        plan = SimpleNamespace(ctx=16384)
        await app._on_launch_chosen(LaunchChoice(model, 2, plan, conn))  # type: ignore[arg-type]
        await pilot.pause()
        second = app.backend
        assert second is not first and isinstance(second, AgentBackend)
        assert second.session.id == first.session.id
        texts = [(m.role, m.text) for m in app.screen.query(ChatMessage)]
        assert texts[:2] == [("user", "say hello"), ("assistant", "Hello there.")]
        assert texts[-1][0] == "notice" and "This session continues here" in texts[-1][1]
    saved = load_settings(app.config_file, env={})  # type: ignore[arg-type]
    assert saved.local_models.model == str(model)
    assert saved.local_models.managed.parallel == 2
    assert saved.local_models.managed.ctx == 16384
