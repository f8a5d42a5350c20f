"""Stop server in the TUI's agent mode, as in the plain chat: the session's slot (and every other
session's) is saved, then the managed daemon stops; an external server is never stopped (said);
with several endpoints and the session on a remote one, only the managed server here stops (said)
and the session goes on there. Against the fake llama-server; the daemon is a recording fake."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fusion_tui.chat import server_stop
from fusion_tui.chat.agent_backend import AgentBackend
from fusion_tui.chat.backend import Unavailable
from fusion_tui.chat.events import ReplyDone, ReplyEvent
from fusion_tui.config.settings import EndpointSettings, ServerSettings
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection
from fusion_tui.server.errors import ServerError
from fusion_tui.sessions.store import SessionStore
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.unit.endpoint_support import RecordingDaemon, alpha_beta, two_servers
from tests.unit.local_fake import DiskFake, connector_for, fast_settings


@pytest.fixture
def daemon(monkeypatch: pytest.MonkeyPatch) -> RecordingDaemon:
    fake = RecordingDaemon()
    monkeypatch.setattr(server_stop, "make_daemon", lambda _s, _p: fake)
    return fake


def finish(summary: str) -> Reply:
    return Reply(text=[json.dumps({"tool": "finish", "args": {"summary": summary}})])


async def turn(backend: AgentBackend, text: str) -> list[ReplyEvent]:
    return [event async for event in backend.reply(text)]


def completed(events: list[ReplyEvent]) -> bool:
    return isinstance(events[-1], ReplyDone) and events[-1].outcome == "completed"


async def test_the_managed_server_stops_after_the_sessions_slot_is_saved(
    tmp_path: Path, paths: AppPaths, ws: Path, daemon: RecordingDaemon
) -> None:
    slot_dir = tmp_path / "slots"
    slot_dir.mkdir()
    srv = DiskFake(slot_dir, total_slots=2, n_ctx=8192)
    with srv:
        backend = AgentBackend(fast_settings(), paths, ws, connect_fn=connector_for(srv, slot_dir))
        await backend.start(lambda _s: None)
        try:
            srv.script(finish("done"))
            assert completed(await turn(backend, "a task"))
            session = backend.session
            name = backend.keeper.archive.file_name(session.id)  # type: ignore[union-attr]
            assert daemon.stops == 0 and srv.actions == []
            said = await backend.stop_server()
            assert said is None  # the screen says "stopped" and shows the server stopped
            assert daemon.stops == 1
            assert srv.actions == [("save", name)] and (slot_dir / name).is_file()
            assert backend.slot_view() is None
            with pytest.raises(ServerError, match="not connected"):
                await turn(backend, "one more")
        finally:
            await backend.close()
    assert daemon.stops == 1  # leaving afterwards stops nothing again
    saved = SessionStore.default(paths).load(session.id)
    assert [m.content for m in saved.messages if m.role == "user"] == ["a task"]


async def test_an_external_server_is_never_stopped_and_that_is_said(
    paths: AppPaths, ws: Path, daemon: RecordingDaemon
) -> None:
    with FakeLlamaServer(total_slots=2, n_ctx=8192) as srv:
        managed = connector_for(srv, None)

        async def external(*args: Any, **kw: Any) -> Connection:
            return replace(await managed(*args, **kw), record=None)

        backend = AgentBackend(fast_settings(), paths, ws, connect_fn=external)
        await backend.start(lambda _s: None)
        try:
            with pytest.raises(Unavailable, match="not launched by fusion-tui; it is not ours"):
                await backend.stop_server()
            assert daemon.stops == 0
            srv.script(finish("still served"))
            assert completed(await turn(backend, "a task"))
        finally:
            await backend.close()


async def test_on_a_remote_endpoint_nothing_remote_stops_and_the_session_goes_on(
    paths: AppPaths, ws: Path, daemon: RecordingDaemon
) -> None:
    with two_servers(8192) as (a, b):
        settings = replace(fast_settings(), server=alpha_beta(a, b))
        backend = AgentBackend(settings, paths, ws)
        await backend.start(lambda _s: None)
        try:
            a.script(finish("one"))
            assert completed(await turn(backend, "first"))
            said = await backend.stop_server()
            a.script(finish("two"))
            after = await turn(backend, "second")
        finally:
            await backend.close()
    assert said == (
        "alpha is a remote endpoint: not stopped; no managed llama-server is configured on this "
        "machine"
    )
    assert daemon.stops == 0
    assert completed(after) and [r.endpoint for r in backend.session.requests] == ["alpha"] * 2


async def test_with_the_session_remote_only_the_managed_server_here_stops(
    tmp_path: Path, paths: AppPaths, ws: Path, daemon: RecordingDaemon
) -> None:
    slot_dir = tmp_path / "slots"
    slot_dir.mkdir()
    with (
        DiskFake(slot_dir, total_slots=2, n_ctx=8192) as here,
        FakeLlamaServer(total_slots=2, n_ctx=8192) as b,
    ):
        eps = (EndpointSettings(managed=True), EndpointSettings(url=b.url, label="beta"))
        settings = replace(fast_settings(), server=ServerSettings(endpoints=eps))
        connect = connector_for(here, slot_dir)
        first = AgentBackend(settings, paths, ws, connect_fn=connect)
        await first.start(lambda _s: None)
        try:
            here.script(finish("one"))
            assert completed(await turn(first, "first"))
        finally:
            await first.close()
        store = SessionStore.default(paths)
        stored = store.load(first.session.id)
        stored.pinned_endpoint = "beta"  # as if it had been placed on beta
        store.save(stored)
        backend = AgentBackend(settings, paths, ws, resume=stored.id, connect_fn=connect)
        await backend.start(lambda _s: None)
        try:
            b.script(finish("two"))
            assert completed(await turn(backend, "second"))
            said = await backend.stop_server()
            here.stop()  # what the daemon's stop did to it
            b.script(finish("three"))
            after = await turn(backend, "third")
        finally:
            await backend.close()
    assert said == "beta is a remote endpoint: not stopped; stopped the managed llama-server here"
    assert daemon.stops == 1
    assert completed(after)
    assert [r.endpoint for r in backend.session.requests] == ["here", "beta", "beta"]
