"""Pilot test of agent mode over two endpoints: a session that runs on the second one
gets the slot map grouped by endpoint, with that endpoint marked current and its own slots, and
the status line names that endpoint once a turn ran there."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import OptionList

from fusion_tui.chat.agent_backend import AgentBackend
from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.paths import AppPaths
from fusion_tui.sessions.store import SessionStore
from fusion_tui.tui.app import build_app
from fusion_tui.tui.widgets.endpoint_slot_map import EndpointSlotMap
from fusion_tui.tui.widgets.status_line import StatusLine
from tests.fakes.fake_server import FakeLlamaServer
from tests.unit.cli_support import act
from tests.unit.endpoint_support import alpha_beta


async def test_an_agent_session_on_the_second_endpoint_has_the_grouped_slot_map(
    app_home: AppPaths, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with (
        FakeLlamaServer(total_slots=2, n_ctx=8192) as a,
        FakeLlamaServer(total_slots=3, n_ctx=8192) as b,
    ):
        settings = Settings(server=alpha_beta(a, b), ui=UISettings(cursor_blink=False))
        first = AgentBackend(settings, app_home, ws)
        await first.start(lambda _s: None)
        a.script(act("finish", summary="done here"))
        [e async for e in first.reply("first task")]
        sid = first.session.id
        await first.close()
        store = SessionStore.default(app_home)
        stored = store.load(sid)
        stored.pinned_endpoint = "beta"  # as if it had been placed on beta
        store.save(stored)
        app = build_app(settings, paths=app_home, workspace=ws, resume=sid)
        assert isinstance(app.backend, AgentBackend)
        async with app.run_test(size=(160, 40)) as pilot:
            await app.screen.workers.wait_for_complete()
            await pilot.pause()
            maps = list(app.screen.query(EndpointSlotMap))
            assert len(maps) == 1
            await maps[0].refresh_now()
            await pilot.pause()
            listing = maps[0].query_one("#slot-list", OptionList)
            count = listing.option_count
            lines = [str(listing.get_option_at_index(i).prompt) for i in range(count)]
            b.script(act("finish", summary="done there"))
            await pilot.press(*"go on", "enter")
            await pilot.pause()
            await app.screen.workers.wait_for_complete()
            await pilot.pause()
            status = str(app.screen.query_one(StatusLine).render())
    assert len(lines) == 7, lines  # two headers, alpha's 2 slots, beta's 3
    assert lines[0].startswith("  alpha ·") and lines[3].startswith("◆ beta ·"), lines
    assert status.startswith("beta · "), status  # the status line names the turn's endpoint
