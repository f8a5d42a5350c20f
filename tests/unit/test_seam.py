"""The seam between the screens and the core: one backend factory, the session's own turn
bookkeeping, the one rule for stopping the daemon, the one fake clock, and the one shape of a CLI
command."""

from __future__ import annotations

import argparse
from pathlib import Path

import anyio
import pytest

from fusion_tui.agent.approval import ApprovalRequest, Decision, DenyAll
from fusion_tui.agent.tools.workspace import ToolError
from fusion_tui.chat.agent_backend import AgentBackend
from fusion_tui.chat.backend import Unavailable
from fusion_tui.chat.factory import make_backend
from fusion_tui.chat.local import LocalBackend
from fusion_tui.cli import COMMANDS, DEFAULT, build_parser
from fusion_tui.clock import sleep_until
from fusion_tui.config import Settings
from fusion_tui.config.settings import LocalModelsSettings, ManagedSettings
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection, stops_on_exit
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.types import Props
from fusion_tui.sessions.model import Session
from fusion_tui.sessions.store import SessionStore
from fusion_tui.slots.keeper import SlotKeeper
from fusion_tui.status import ServerStatus
from tests.fakes.clock import FakeClock


class Yes:
    async def decide(self, request: ApprovalRequest) -> Decision:
        return Decision.ALLOW_ONCE


# --- make_backend ----------------------------------------------------------------------------


def test_a_workspace_makes_an_agent_backend_with_the_approver_handed_in(
    app_home: AppPaths, tmp_path: Path
) -> None:
    approver = Yes()
    backend = make_backend(Settings(), app_home, workspace=tmp_path, approver=approver)
    assert isinstance(backend, AgentBackend)
    assert backend.approver is approver
    assert backend.workspace.root == tmp_path.resolve()
    assert backend.session.workspace == str(tmp_path.resolve())


def test_no_workspace_makes_the_plain_chat(app_home: AppPaths) -> None:
    backend = make_backend(Settings(), app_home, model="m.gguf")
    assert isinstance(backend, LocalBackend)
    assert backend.model == "m.gguf"
    assert backend.slot_view() is backend.keeper
    assert backend.sessions() is backend.store


def test_agent_mode_without_an_approver_denies(app_home: AppPaths, tmp_path: Path) -> None:
    backend = make_backend(Settings(), app_home, workspace=tmp_path)
    assert isinstance(backend, AgentBackend) and isinstance(backend.approver, DenyAll)


def test_a_bad_workspace_and_a_bad_resume_are_refused(app_home: AppPaths, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="not a directory"):
        make_backend(Settings(), app_home, workspace=tmp_path / "nowhere")
    with pytest.raises(Exception, match="20260101-000000-000-abcdef"):
        make_backend(Settings(), app_home, resume="20260101-000000-000-abcdef")


async def test_an_agent_backend_switches_sessions_and_stops_no_server_it_did_not_launch(
    app_home: AppPaths, tmp_path: Path
) -> None:
    backend = make_backend(Settings(), app_home, workspace=tmp_path)
    assert isinstance(backend, AgentBackend)
    first = backend.session
    saved = Session.new(title="older", workspace=str(tmp_path))
    SessionStore.default(app_home).save(saved)
    await backend.open_session(saved.id)
    assert backend.session.id == saved.id
    await backend.new_session()
    assert backend.session.id not in (saved.id, first.id)
    assert backend.slot_view() is None and await backend.make_title() is None
    with pytest.raises(Unavailable, match="not launched by fusion-tui; it is not ours to stop"):
        await backend.stop_server()


# --- the session's turn bookkeeping ---------------------------------------------------------


def test_a_turn_keeps_the_words_first_and_the_partial_answer_marked() -> None:
    ticks = iter([10.0, 20.0, 30.0, 40.0])
    session = Session.new(now=1.0)
    session.begin_turn("  fix   the\nparser  ", workspace="/ws", clock=lambda: next(ticks))
    assert session.title == "fix the parser" and session.workspace == "/ws"
    assert [(m.role, m.content) for m in session.messages] == [("user", "  fix   the\nparser  ")]
    assert session.updated == 10.0
    session.end_turn("cancelled", "half an", "cancelled", lambda: next(ticks))
    answer = session.messages[-1]
    assert (answer.role, answer.content, answer.partial, answer.partial_reason) == (
        "assistant",
        "half an",
        True,
        "cancelled",
    )
    assert [(t.outcome, t.time, t.detail) for t in session.turns] == [
        ("cancelled", 20.0, "cancelled")
    ]
    assert session.updated == 20.0
    session.begin_turn("again", clock=lambda: next(ticks))
    assert session.title == "fix the parser"  # a titled session keeps its title
    session.end_turn("completed", "", "ok", lambda: next(ticks))
    assert session.messages[-1].content == "again"  # nothing to keep from an empty answer


def test_a_turn_the_server_never_answered_keeps_only_the_words() -> None:
    session = Session.new(now=1.0)
    session.begin_turn("task", clock=lambda: 5.0)
    session.end_turn("error", None, "unreachable", lambda: 6.0)
    assert [m.role for m in session.messages] == ["user"]
    assert session.last_outcome == "error" and session.turns[0].time == 6.0


def test_a_request_record_is_rounded_and_stamped_by_the_wall_clock() -> None:
    session = Session.new(now=1.0)
    record = session.record_request(
        id_slot=2, prompt_n=10, cache_n=90, ttft_ms=123.456, predicted_per_second=41.239,
        side_call=True, clock=lambda: 99.0,
    )  # fmt: skip
    assert session.requests == [record]
    assert (record.ttft_ms, record.predicted_per_second, record.time, record.side_call) == (
        123.5,
        41.24,
        99.0,
        True,
    )


# --- stopping the daemon on exit ------------------------------------------------------------


def _conn(launched: bool) -> Connection:
    props = Props(model_path="/m.gguf", total_slots=2, n_ctx=4096)
    return Connection(LlamaClient("http://127.0.0.1:9"), props, ServerStatus(), launched=launched)


@pytest.mark.parametrize(
    ("launched", "keep", "stops"), [(True, False, True), (True, True, False), (False, False, False)]
)
async def test_only_a_daemon_we_launched_stops_on_exit_unless_kept(
    launched: bool, keep: bool, stops: bool
) -> None:
    managed = ManagedSettings(keep_running=keep)
    settings = Settings(local_models=LocalModelsSettings(managed=managed))
    conn = _conn(launched)
    assert stops_on_exit(settings, conn) is stops
    await conn.client.aclose()


# --- the slot keeper without a server -------------------------------------------------------


async def test_the_slot_keeper_names_its_session_and_the_side_slot(tmp_path: Path) -> None:
    session = Session.new(title="parser")
    keeper = SlotKeeper(SessionStore(tmp_path), session)
    assert keeper.slot_owners() == {} and keeper.session_on_slot(1) is None
    keeper.pool.update(4, "/m.gguf", "L1")
    keeper.pool.pin(session.id, 1)
    keeper.side_slot = 3
    assert keeper.slot_owners() == {3: "side", 1: "parser"}
    assert keeper.session_on_slot(1) == session.id
    other = Session.new()
    assert await keeper.switch(other) is None  # not connected: nothing to save
    assert keeper.session is other and keeper.slot_owners() == {3: "side"}


# --- the one fake clock ---------------------------------------------------------------------


async def test_the_fake_clock_moves_by_hand_and_wakes_who_is_due() -> None:
    clock = FakeClock(start=100.0)
    woke: list[float] = []

    async def sleeper(when: float) -> None:
        await sleep_until(clock, when)
        woke.append(clock.now())

    async with anyio.create_task_group() as tg:
        tg.start_soon(sleeper, 105.0)
        tg.start_soon(sleeper, 130.0)
        await anyio.sleep(0.01)
        clock.advance(10.0)
        await anyio.sleep(0.01)
        assert woke == [110.0]
        clock.advance(30.0)
    assert woke == [110.0, 140.0]


async def test_the_fake_clock_runs_a_coroutine_in_virtual_time() -> None:
    clock = FakeClock()

    async def wait_an_hour() -> float:
        await clock.sleep(3600.0)
        return clock.now()

    assert await clock.run(wait_an_hour) == 3600.0


# --- the CLI's one shape --------------------------------------------------------------------


def test_every_command_is_one_module_of_one_shape() -> None:
    order = ["launch", "status", "stop", "config", "inspect", "sessions", "run", "chat", "serve"]
    order += ["doctor"]
    order += ["models"]
    assert list(COMMANDS) == order  # the order `--help` lists them in
    for module in [*COMMANDS.values(), DEFAULT]:
        assert callable(module.register) and callable(module.run)
    sub = argparse.ArgumentParser().add_subparsers(dest="command")
    for name, module in COMMANDS.items():
        module.register(sub)
        assert name in sub.choices
    args = build_parser().parse_args(["--workspace", "w", "--resume", "ID", "run", "task"])
    assert (args.command, args.app_workspace, args.resume, args.task) == ("run", "w", "ID", "task")
