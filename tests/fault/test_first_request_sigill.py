"""llama-server comes up, passes its throughput probe, then dies of SIGILL at the
user's first request. The running app relaunches it once, right away, with repacking off
(`--no-repack`, remembered for this binary and CPU), and the message goes back into the prompt
box so Enter sends it again. Fake binaries (tests/fakes/crashing_server.py) die on cue."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fusion_tui.chat.agent_backend import AgentBackend
from fusion_tui.chat.local import LocalBackend
from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.paths import AppPaths
from fusion_tui.server.process.cpu_quirks import NOTE_AMX, NOTE_OTHER, CpuQuirks, read_cpu
from fusion_tui.server.process.daemon import ManagedDaemon
from fusion_tui.server.sigill_recovery import sigill_after_serving
from fusion_tui.tui.app import build_app
from fusion_tui.tui.key_clock import KeyClock
from fusion_tui.tui.screens.main import MainScreen
from fusion_tui.tui.widgets.chat_message import ChatMessage
from fusion_tui.tui.widgets.prompt_input import PromptInput
from tests.fakes.clock import FakeClock
from tests.fakes.crash_binaries import fake_binary, minimal_model, repack_flags
from tests.fault.test_start_crashes import settings_for

NOTE = NOTE_AMX if read_cpu().advertises_amx else NOTE_OTHER


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return minimal_model(tmp_path / "models" / "tiny.gguf")


async def until(pilot: Any, check: Any, what: str, tries: int = 400) -> None:
    for _ in range(tries):
        if check():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def first_request(
    pilot: Any, main: MainScreen, backend: LocalBackend | AgentBackend, text: str
) -> tuple[PromptInput, FakeClock]:
    """Once the first start is ready and its probe passed, type `text` and send it (the prompt
    box on a fake key clock): the prompt box and that clock."""
    await until(pilot, lambda: main.server.status.state == "ready", "the first start")
    conn = backend.conn
    assert conn is not None and conn.probe_pending is not None
    await asyncio.wait_for(conn.probe_pending, 30)  # the probe passes
    clock = FakeClock()
    prompt = main.query_one(PromptInput)
    prompt.key_clock = KeyClock(clock)
    await pilot.press(*text)
    clock.advance(1.0)
    await pilot.press("enter")
    return prompt, clock


def settings(binary: Path, model: Path) -> Settings:
    return replace(settings_for(binary, model), ui=UISettings(cursor_blink=False))


async def test_a_sigill_at_the_first_request_relaunches_with_repacking_off_and_keeps_the_message(
    app_home: AppPaths, tmp_path: Path, model: Path
) -> None:
    binary = fake_binary(tmp_path / "bin", "sigill-after-probe")
    app = build_app(settings(binary, model), paths=app_home)
    backend = app.backend
    assert isinstance(backend, LocalBackend)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            main = app.screen
            assert isinstance(main, MainScreen)
            prompt, clock = await first_request(pilot, main, backend, "hello there")
            await until(pilot, lambda: len(repack_flags(binary)) == 2, "the relaunch")
            await until(
                pilot,
                lambda: main.server.status.state == "ready" and bool(main.server.status.note),
                "the relaunched server",
            )
            assert repack_flags(binary) == [False, True]
            assert main.server.status.note == NOTE
            assert prompt.text == "hello there"  # back in the box, to send again
            notices = [m.text for m in main.query(ChatMessage) if m.role == "notice"]
            assert any("SIGILL" in n and "--no-repack" in n for n in notices)
            assert CpuQuirks(app_home.daemon_dir).repack_off(binary) == NOTE
            assert await backend.died_of_sigill() is False  # the new server runs
            clock.advance(1.0)
            await pilot.press("enter")  # sent again: answered by the relaunched server
            await until(pilot, lambda: not main.reply_running and len(backend.history()) >= 4,
                        "the answer")  # fmt: skip
            said = backend.history()
            assert [s.role for s in said][-2:] == ["user", "assistant"]
            assert said[-2].text == "hello there" and said[-1].partial_reason is None
            assert len(repack_flags(binary)) == 2  # relaunched once, not again
    finally:
        await ManagedDaemon(app_home).stop()


async def test_a_server_already_without_repacking_is_not_relaunched_for_sigill(
    app_home: AppPaths, tmp_path: Path, model: Path
) -> None:
    """The recovery happens once: a connection whose server runs with `--no-repack` (or that
    this process did not launch, or that is alive) never counts."""
    binary = fake_binary(tmp_path / "bin", "ok")
    conn_settings = settings(binary, model)
    daemon = ManagedDaemon(app_home, binary=binary)
    from fusion_tui.server.connect import connect

    conn = await connect(conn_settings, app_home)
    try:
        assert conn.record is not None and conn.launched
        assert await sigill_after_serving(conn_settings, app_home, conn, wait=0.1) is False
        conn.record.repack_off = True
        assert await sigill_after_serving(conn_settings, app_home, conn, wait=0.1) is False
        assert await sigill_after_serving(conn_settings, app_home, None) is False
    finally:
        await conn.client.aclose()
        await daemon.stop()


async def test_agent_mode_recovers_a_first_request_sigill_the_same_way(
    app_home: AppPaths, tmp_path: Path, model: Path
) -> None:
    binary = fake_binary(tmp_path / "bin", "sigill-after-probe")
    ws = tmp_path / "ws"
    ws.mkdir()
    app = build_app(settings(binary, model), paths=app_home, workspace=ws)
    backend = app.backend
    assert isinstance(backend, AgentBackend)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            main = app.screen
            assert isinstance(main, MainScreen)
            prompt, _clock = await first_request(pilot, main, backend, "list the files")
            await until(
                pilot,
                lambda: (
                    len(repack_flags(binary)) == 2
                    and main.server.status.state == "ready"
                    and bool(main.server.status.note)
                ),
                "the relaunched server",
            )
            assert repack_flags(binary) == [False, True]
            assert prompt.text == "list the files"
            notices = [m.text for m in main.query(ChatMessage) if m.role == "notice"]
            assert any("SIGILL" in n for n in notices)
    finally:
        await ManagedDaemon(app_home).stop()
