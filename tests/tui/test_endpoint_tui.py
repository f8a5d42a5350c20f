"""The TUI with several endpoints: Stop server while the session's endpoint is remote
says what was stopped (only the managed server here) and the session's server is not shown as
stopped; a start that fell back to a remote endpoint says so in the chat."""

from __future__ import annotations

from dataclasses import replace

from fusion_tui.config import Settings
from fusion_tui.status import ServerStatus
from fusion_tui.tui.app import build_app
from fusion_tui.tui.widgets.chat_message import ChatMessage
from fusion_tui.tui.widgets.status_line import StatusLine
from tests.tui.scripted_backend import READY, ScriptedBackend

SAID = "gpu-box is a remote endpoint: not stopped; stopped the managed llama-server here"


class RemoteSession(ScriptedBackend):
    async def stop_server(self) -> str | None:
        self.stopped = True
        return SAID


async def stop_server(backend: ScriptedBackend) -> tuple[list[str], str]:
    """Stop server in the app over `backend`: what it said (its notifications) and the status
    line's server state afterwards."""
    app = build_app(Settings(), backend)
    said: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.notify = lambda message, **_: said.append(message)  # type: ignore[method-assign]
        await app.run_action("stop_server")
        await pilot.pause()
        return said, app.screen.query_one(StatusLine).server.state


async def test_stop_server_on_a_remote_endpoint_says_what_it_did() -> None:
    backend = RemoteSession()
    said, state = await stop_server(backend)
    assert backend.stopped and said == [SAID]
    assert state == "ready"


async def test_stop_server_on_the_managed_server_still_says_stopped() -> None:
    said, state = await stop_server(ScriptedBackend())
    assert said == ["The managed llama-server was stopped."]
    assert state == "stopped"


async def test_a_start_that_fell_back_to_a_remote_endpoint_says_so_in_the_chat() -> None:
    line = "the managed llama-server did not start (no binary); using gpu-box instead, ..."
    status: ServerStatus = replace(READY, fallback=line)
    app = build_app(Settings(), ScriptedBackend(status=status))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        notices = [m.text for m in app.screen.query(ChatMessage) if m.role == "notice"]
        assert notices == [line]
        assert app.screen.query_one(StatusLine).server.state == "ready"
