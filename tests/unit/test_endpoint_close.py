"""Closing the plain chat while its session is on a remote endpoint still saves the other
sessions' slots on the managed server here before that server stops with the app (as agent mode
and `run` do): their warm resume survives. Fakes: the managed server is a `DiskFake` adopted as
launched by this app; its stop is recorded, no process is touched."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fusion_tui.chat.local import LocalBackend
from fusion_tui.config.settings import EndpointSettings, ServerSettings
from fusion_tui.paths import AppPaths
from fusion_tui.server import connect
from fusion_tui.server.connect import Connection
from fusion_tui.sessions.store import SessionStore
from tests.fakes.fake_server import FakeLlamaServer
from tests.unit.endpoint_support import RecordingDaemon
from tests.unit.local_fake import DiskFake, connector_for, fast_settings, turn


@pytest.fixture
def daemon(monkeypatch: pytest.MonkeyPatch) -> RecordingDaemon:
    fake = RecordingDaemon()
    monkeypatch.setattr(connect, "make_daemon", lambda _s, _p: fake)
    return fake


async def test_closing_on_a_remote_endpoint_saves_the_other_sessions_here_first(
    tmp_path: Path, daemon: RecordingDaemon
) -> None:
    paths = AppPaths(*(tmp_path / n for n in ("config", "data", "state", "log")))
    slot_dir = tmp_path / "slots"
    slot_dir.mkdir()
    with (
        DiskFake(slot_dir, total_slots=2, n_ctx=8192) as here,
        FakeLlamaServer(total_slots=2, n_ctx=8192) as beta,
    ):
        adopted = connector_for(here, slot_dir)

        async def launched(*a: Any, **kw: Any) -> Connection:
            return replace(await adopted(*a, **kw), launched=True)  # this app's own launch

        eps = (EndpointSettings(managed=True), EndpointSettings(url=beta.url, label="beta"))
        settings = replace(fast_settings(), server=ServerSettings(endpoints=eps))
        other = LocalBackend(settings, paths, connector=launched)
        await other.start(lambda _s: None)
        await turn(other, "a session that stays on the server here")
        other.keeper.detach()  # the app went on with another session: this one stays in its slot
        store = SessionStore.default(paths)
        mine = LocalBackend(settings, paths, connector=launched)
        await mine.start(lambda _s: None)
        await turn(mine, "first")
        stored = store.load(mine.session.id)
        stored.pinned_endpoint = "beta"  # as if it had moved to beta
        store.save(stored)
        store.release(mine.session.id)
        mine = LocalBackend(settings, paths, resume=stored.id, connector=launched)
        await mine.start(lambda _s: None)
        await turn(mine, "second, on beta")
        assert mine.session.requests[-1].endpoint == "beta"
        before = list(here.actions)
        await mine.close()
        saved_here = [name for action, name in here.actions[len(before) :] if action == "save"]
    assert any(other.session.id in name for name in saved_here), (saved_here, here.actions)
    assert daemon.stops == 1  # then the managed server stopped with the app
