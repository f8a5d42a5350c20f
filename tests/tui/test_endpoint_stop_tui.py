"""Stop server while the session's endpoint is remote (issue 14): the TUI says what was stopped
(only the managed server here) and the session's server is not shown as stopped."""

from __future__ import annotations

from fusion_tui.config import Settings
from fusion_tui.tui.app import build_app
from fusion_tui.tui.widgets.status_line import StatusLine
from tests.tui.scripted_backend import ScriptedBackend

SAID = "gpu-box is a remote endpoint: not stopped; stopped the managed llama-server here"


class RemoteSession(ScriptedBackend):
    async def stop_server(self) -> str | None:
        self.stopped = True
        return SAID


async def test_stop_server_on_a_remote_endpoint_says_what_it_did() -> None:
    backend = RemoteSession()
    app = build_app(Settings(), backend)
    said: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.notify = lambda message, **_: said.append(message)  # type: ignore[method-assign]
        await app.run_action("stop_server")
        await pilot.pause()
        assert backend.stopped and said == [SAID]
        assert app.screen.query_one(StatusLine).server.state == "ready"


async def test_stop_server_on_the_managed_server_still_says_stopped() -> None:
    backend = ScriptedBackend()
    app = build_app(Settings(), backend)
    said: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.notify = lambda message, **_: said.append(message)  # type: ignore[method-assign]
        await app.run_action("stop_server")
        await pilot.pause()
        assert said == ["The managed llama-server was stopped."]
        assert app.screen.query_one(StatusLine).server.state == "stopped"
