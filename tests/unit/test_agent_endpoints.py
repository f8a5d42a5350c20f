"""Agent mode (the TUI's `AgentBackend`) over two endpoints (issue 14), against two fake
llama-servers: the session runs on its endpoint, records carry it, and when that endpoint goes
away the next turn moves, says so in the chat and marks the request with `moved_from`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fusion_tui.chat.agent_backend import AgentBackend
from fusion_tui.chat.events import Notice, ReplyDone
from fusion_tui.config import Settings
from fusion_tui.config.settings import EndpointSettings, ServerSettings
from fusion_tui.paths import AppPaths
from tests.fakes.fake_server import FakeLlamaServer, Reply


def act(tool: str, **args: Any) -> Reply:
    return Reply(text=[json.dumps({"tool": tool, "args": args})], prompt_seconds=0.01)


async def test_agent_turns_stay_on_their_endpoint_and_move_when_it_goes(tmp_path: Path) -> None:
    paths = AppPaths(tmp_path / "c", tmp_path / "d", tmp_path / "s", tmp_path / "l")
    ws = tmp_path / "ws"
    ws.mkdir()
    with (
        FakeLlamaServer(total_slots=2, n_ctx=8192) as a,
        FakeLlamaServer(total_slots=2, n_ctx=8192) as b,
    ):
        eps = (
            EndpointSettings(url=a.url, label="alpha"),
            EndpointSettings(url=b.url, label="beta"),
        )
        backend = AgentBackend(Settings(server=ServerSettings(endpoints=eps)), paths, ws)
        await backend.start(lambda _s: None)
        try:
            a.script(act("finish", summary="done here"))
            first = [e async for e in backend.reply("first task")]
            assert isinstance(first[-1], ReplyDone) and first[-1].outcome == "completed"
            assert backend.session.pinned_endpoint == "alpha"
            assert [r.endpoint for r in backend.session.requests] == ["alpha"]
            a.stop()
            b.script(act("finish", summary="done there"))
            second = [e async for e in backend.reply("second task")]
        finally:
            await backend.close()
    assert isinstance(second[-1], ReplyDone) and second[-1].outcome == "completed"
    notes = [e.text for e in second if isinstance(e, Notice)]
    assert any("alpha is unreachable" in n and "moving to beta" in n for n in notes), notes
    last = backend.session.requests[-1]
    assert (last.endpoint, last.moved_from) == ("beta", "alpha")
    assert backend.session.pinned_endpoint == "beta"
    said = [m.content for m in backend.session.messages if m.role == "user"]
    assert said == ["first task", "second task"]
