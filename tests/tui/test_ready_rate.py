"""The "Server ready" toast and the launch wizard's ready line gain the decode rate
("~N tok/s single stream") when the throughput probe lands after they were shown."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.server.connect import Connection
from fusion_tui.server.process.probe import ProbeResult
from fusion_tui.status import ServerStatus
from fusion_tui.tui.app import build_app
from fusion_tui.tui.screens.main import MainScreen
from fusion_tui.tui.widgets.status_line import StatusLine
from tests.tui.scripted_backend import READY, ScriptedBackend, StatusCallback
from tests.tui.test_launch_wizard import FakeLauncher, WizardHost, launched, make_wizard, text_of

MEASURING = replace(READY, tok_s=None, detail="measuring throughput")
MEASURED = replace(READY, tok_s=42.0)


class ProbeLater(ScriptedBackend):
    """Ready before its probe; the test reports the probe's result when it wants."""

    def __init__(self) -> None:
        super().__init__(status=MEASURING)
        self.report: StatusCallback | None = None

    async def start(self, report: StatusCallback) -> ServerStatus:
        self.report = report
        return await super().start(report)


@asynccontextmanager
async def shown_ready() -> AsyncIterator[tuple[ProbeLater, Any, Pilot[Any]]]:
    """The app over a `ProbeLater` backend, its start done: ready, the probe not landed yet."""
    backend = ProbeLater()
    app = build_app(Settings(ui=UISettings(cursor_blink=False)), backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        yield backend, app, pilot


def toasts(app: Any) -> list[tuple[str, str]]:
    return [(n.title, n.message) for n in app._notifications]


async def test_the_ready_toast_is_shown_again_with_the_rate_when_the_probe_lands() -> None:
    async with shown_ready() as (backend, app, pilot):
        assert toasts(app) == [("Server ready", "SmolLM2-135M-Instruct · 4 slots × 4096 ctx")]
        assert backend.report is not None
        backend.report(MEASURED)
        await pilot.pause()
        rate = "SmolLM2-135M-Instruct · 4 slots × 4096 ctx\n~42 tok/s single stream"
        assert toasts(app) == [("Server ready", rate)]  # in place of the first
        assert "~42 tok/s single stream" in str(app.screen.query_one(StatusLine).render())
        backend.report(replace(MEASURED, tok_s=40.0))  # once is enough
        await pilot.pause()
        assert toasts(app) == [("Server ready", rate)]


async def test_a_rate_landing_after_the_toast_went_gets_its_own_toast() -> None:
    async with shown_ready() as (backend, app, pilot):
        main = app.screen
        assert isinstance(main, MainScreen) and main.server.ready_toast.shown is not None
        main.server.ready_toast.shown.raised_at -= 3600  # long gone
        app.clear_notifications()
        assert backend.report is not None
        backend.report(replace(MEASURED, tok_s=4.64))
        await pilot.pause()
        assert toasts(app) == [
            ("Server speed measured", "SmolLM2-135M-Instruct · 4 slots × 4096 ctx\n"
             "~4.6 tok/s single stream"),
        ]  # fmt: skip


class LauncherProbingLater(FakeLauncher):
    """Returns the connection before its probe, as `server.connect.connect` does on a fresh
    launch."""

    conn: Connection | None = None
    say: StatusCallback | None = None

    async def __call__(self, settings: Any, paths: Any, report: Any = None, **kw: Any) -> Any:
        conn = await super().__call__(settings, paths, report, **kw)
        conn.probe, conn.status = None, replace(conn.status, tok_s=None)
        self.conn, self.say = conn, report
        return conn


async def test_the_wizard_ready_line_gains_the_rate_when_the_probe_lands(
    demo_model: Path,
) -> None:
    launcher = LauncherProbingLater(tok_s=95.0)
    app = WizardHost(make_wizard(launcher=launcher, demo=demo_model))
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await launched(pilot, demo_model)
        first = text_of(wizard, "#launch-result").splitlines()[0]
        assert first.startswith("ready · SmolLM2-135M-Instruct · ") and "tok/s" not in first
        assert launcher.conn is not None and launcher.say is not None
        launcher.conn.probe = ProbeResult(tok_s=37.0, predicted_n=64, predicted_ms=1730.0)
        launcher.say(replace(launcher.conn.status, tok_s=37.0))
        await pilot.pause()
        lines = text_of(wizard, "#launch-result").splitlines()
        assert lines[0] == f"{first} · ~37 tok/s single stream"
        assert lines[1].startswith("KV cache: estimated")
