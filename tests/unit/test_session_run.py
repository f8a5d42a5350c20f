"""`agent.session_run` against the fake llama-server (real HTTP on loopback)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from fusion_tui.agent.approval import DenyAll
from fusion_tui.agent.deadline import CancelToken
from fusion_tui.agent.events import AgentEvent, RequestDone, ToolFinished
from fusion_tui.agent.host import AgentHost, gated_completion, machine_facts
from fusion_tui.agent.session_run import SessionRunner, open_session
from fusion_tui.agent.task import AgentConfig
from fusion_tui.agent.tools.workspace import Workspace
from fusion_tui.agent.transcript import load_transcript, packer_path
from fusion_tui.server.connect import Connection
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process.probe import ProbeResult
from fusion_tui.server.process.records import LaunchRecord
from fusion_tui.server.template import TemplateFrame
from fusion_tui.server.types import StreamEnd, StreamEvent, TextDelta, Timings
from fusion_tui.sessions.model import Session, SessionFileError
from fusion_tui.sessions.store import SessionNotFound, SessionStore
from fusion_tui.slots.gate import SlotGate
from fusion_tui.status import ServerStatus
from tests.fakes.fake_server import FakeLlamaServer, Reply

CONFIG = AgentConfig(max_steps=6, finalize=False)


def act(tool: str, **args: Any) -> Reply:
    text = json.dumps({"tool": tool, "args": args})
    return Reply(text=[text[:10], text[10:]])


@pytest.fixture
def srv() -> Iterator[FakeLlamaServer]:
    with FakeLlamaServer(total_slots=3, n_ctx=8192) as server:
        yield server


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    (root / "b.py").write_text("print('b')\n")
    return Workspace(root)


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "sessions")


async def connection(srv: FakeLlamaServer) -> Connection:
    client = LlamaClient(srv.url)
    return Connection(client, await client.props(), ServerStatus(state="ready"))


def completions(srv: FakeLlamaServer) -> list[dict[str, Any]]:
    return [r.body for r in srv.requests if r.path == "/completion"]


async def test_a_turn_runs_tools_and_is_saved_with_telemetry(
    srv: FakeLlamaServer, ws: Workspace, store: SessionStore
) -> None:
    srv.script(act("list_dir", path="."), act("finish", summary="two files"))
    conn = await connection(srv)
    host = await AgentHost.open(conn)
    session = Session.new()
    events: list[AgentEvent] = []
    runner = SessionRunner(host, store, session, workspace=ws, approver=DenyAll(), config=CONFIG)
    report = await runner.run("list the files", on_event=events.append)
    await conn.client.aclose()

    assert report.outcome == "completed"
    assert report.result is not None and report.result.summary == "two files"
    saved = store.load(session.id)
    assert [m.role for m in saved.messages] == ["user", "tool", "assistant"]
    assert saved.messages[0].content == "list the files"
    tool = saved.messages[1]
    assert tool.tool_name == "list_dir" and tool.tool_arguments == {"path": "."}
    assert "a.txt" in (tool.tool_result or "") and "b.py" in (tool.tool_result or "")
    assert saved.messages[2].content == "two files" and not saved.messages[2].partial
    assert [t.outcome for t in saved.turns] == ["completed"]
    assert len(saved.requests) == 2
    first_slot = srv.requests[-1].slot
    assert {r.id_slot for r in saved.requests} == {first_slot}
    assert saved.pinned_slot == first_slot
    assert saved.server is not None and saved.server.model_path == "/models/fake.gguf"
    assert saved.workspace == str(ws.root)
    assert saved.prefix_hash == host.prefix_hash
    bodies = completions(srv)
    assert bodies[0]["id_slot"] == -1 and bodies[1]["id_slot"] == first_slot
    assert bodies[1]["prompt"].startswith(bodies[0]["prompt"])
    assert [e.name for e in events if isinstance(e, ToolFinished)] == ["list_dir"]
    assert sum(isinstance(e, RequestDone) for e in events) == 2
    transcript = load_transcript(store, session.id)
    assert transcript is not None
    assert [m.kind for m in transcript["messages"]] == ["task", "action", "observation", "action"]


async def test_a_resumed_session_extends_its_last_prompt_exactly_on_its_slot(
    srv: FakeLlamaServer, ws: Workspace, store: SessionStore
) -> None:
    srv.script(act("finish", summary="one"), act("finish", summary="two"))
    conn = await connection(srv)
    host = await AgentHost.open(conn)
    session = Session.new()
    first = SessionRunner(host, store, session, workspace=ws, approver=DenyAll(), config=CONFIG)
    await first.run("task one")
    await conn.client.aclose()

    # a new process: new connection, new pool, the session read back from disk
    conn2 = await connection(srv)
    host2 = await AgentHost.open(conn2)
    again = open_session(store, session.id)
    second = SessionRunner(host2, store, again, workspace=ws, approver=DenyAll(), config=CONFIG)
    report = await second.run("task two")
    await conn2.client.aclose()

    assert report.outcome == "completed"
    one, two = completions(srv)
    assert two["prompt"].startswith(one["prompt"] + "".join(act("finish", summary="one").text))
    assert two["id_slot"] == store.load(session.id).pinned_slot == srv.requests[-1].slot >= 0
    assert [m.content for m in store.load(session.id).messages if m.role == "user"] == [
        "task one",
        "task two",
    ]
    assert [t.outcome for t in store.load(session.id).turns] == ["completed", "completed"]


async def test_the_template_frame_is_probed_once_per_daemon(srv: FakeLlamaServer) -> None:
    conn = await connection(srv)
    host = await AgentHost.open(conn)
    await AgentHost.open(conn)
    await conn.client.aclose()
    assert sum(r.path == "/apply-template" for r in srv.requests) == 1
    assert host.frame == TemplateFrame.chatml()  # the fake renders ChatML
    assert host.stable_prefix.endswith("to change one, write its file.")  # the tools close it
    assert "- prefix reuse:" not in host.stable_prefix  # no machine facts: the model has no use
    assert "- delegate(" in host.stable_prefix  # three slots: fan-out is offered


async def test_machine_facts_take_the_probe_rate_and_the_fits_reuse_class(
    srv: FakeLlamaServer,
) -> None:
    conn = await connection(srv)
    await conn.client.aclose()
    conn.probe = ProbeResult(tok_s=95.4, predicted_n=64, predicted_ms=670.0)
    conn.record = LaunchRecord(
        pid=1, argv=[], model_path="", host="127.0.0.1", port=1, url="", started_at=0.0, ctx=0,
        parallel=3, log_path="", fit={"prefix_reuse": "none"},
    )  # fmt: skip
    facts = machine_facts(conn)
    assert (facts.model, facts.slots, facts.ctx_per_worker) == ("fake", 3, 8192)
    assert facts.tok_per_s == 95.4 and facts.prefix_reuse == "none"
    # the stable prefix is the same bytes on every launch: the measured rate stays out of it
    again = machine_facts(conn)
    conn.probe = ProbeResult(tok_s=41.0, predicted_n=64, predicted_ms=1560.0)
    assert machine_facts(conn).render() == again.render() and "tok/s" not in again.render()


async def test_a_cancel_mid_stream_keeps_the_users_words_and_saves_cancelled(
    srv: FakeLlamaServer, ws: Workspace, store: SessionStore
) -> None:
    srv.script(Reply(text=['{"tool": ', '"list_dir"'], hang="mid_stream"))
    conn = await connection(srv)
    host = await AgentHost.open(conn)
    session = Session.new()
    runner = SessionRunner(host, store, session, workspace=ws, approver=DenyAll(), config=CONFIG)
    cancel = CancelToken()

    def on_event(event: AgentEvent) -> None:
        assert store.load(session.id).messages[0].content == "please do it"  # saved before
        if type(event).__name__ == "TokenDelta":
            cancel.cancel()

    report = await runner.run("please do it", on_event=on_event, cancel=cancel)
    await conn.client.aclose()
    assert report.outcome == "cancelled"
    saved = store.load(session.id)
    assert saved.messages[0].content == "please do it"
    assert saved.messages[-1].partial and saved.messages[-1].partial_reason == "cancelled"
    assert [t.outcome for t in saved.turns] == ["cancelled"]


async def test_an_outer_cancellation_still_saves_the_turn(
    srv: FakeLlamaServer, ws: Workspace, store: SessionStore
) -> None:
    srv.script(Reply(hang="first_token"))
    conn = await connection(srv)
    host = await AgentHost.open(conn)
    session = Session.new()
    runner = SessionRunner(host, store, session, workspace=ws, approver=DenyAll(), config=CONFIG)
    with anyio.move_on_after(0.3):
        await runner.run("hang please")
    await conn.client.aclose()
    saved = store.load(session.id)
    assert [m.content for m in saved.messages if m.role == "user"] == ["hang please"]
    assert [t.outcome for t in saved.turns] == ["cancelled"]
    transcript = load_transcript(store, session.id)
    assert transcript is not None and transcript["messages"][-1].kind == "task"


async def test_an_interrupted_transcript_takes_the_next_task(
    srv: FakeLlamaServer, ws: Workspace, store: SessionStore
) -> None:
    srv.script(Reply(hang="first_token"), act("finish", summary="done"))
    conn = await connection(srv)
    host = await AgentHost.open(conn)
    session = Session.new()
    runner = SessionRunner(host, store, session, workspace=ws, approver=DenyAll(), config=CONFIG)
    with anyio.move_on_after(0.3):
        await runner.run("first")
    report = await runner.run("second")
    await conn.client.aclose()
    assert report.outcome == "completed"
    prompt = completions(srv)[-1]["prompt"]
    assert "first" in prompt and "second" in prompt
    assert prompt.index("interrupted") < prompt.index("second")


async def test_a_server_error_is_an_error_outcome_and_the_turn_is_saved(
    srv: FakeLlamaServer, ws: Workspace, store: SessionStore
) -> None:
    srv.script(Reply(status=500, error={"code": 500, "message": "boom", "type": "server_error"}))
    conn = await connection(srv)
    host = await AgentHost.open(conn)
    session = Session.new()
    runner = SessionRunner(host, store, session, workspace=ws, approver=DenyAll(), config=CONFIG)
    report = await runner.run("x")
    await conn.client.aclose()
    assert report.outcome == "error" and "boom" in report.error
    saved = store.load(session.id)
    assert saved.turns[-1].outcome == "error" and "boom" in saved.turns[-1].detail


def test_open_session_refuses_unknown_and_damaged_sessions(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        open_session(store, "20260101-000000-000-abcdef")
    session = Session.new()
    store.save(session)
    path = packer_path(store, session.id)
    path.parent.mkdir(parents=True)
    path.write_text('{"messages": [{"role": "assistant", "text": "x"}]}')
    with pytest.raises(SessionFileError, match="transcript is damaged"):
        open_session(store, session.id)
    assert open_session(store, None).id != session.id


async def test_the_gate_lets_one_request_per_slot_through_at_a_time() -> None:
    log: list[str] = []

    async def stream(body: dict[str, Any]) -> AsyncIterator[StreamEvent]:
        log.append(f"start {body['prompt']}")
        await anyio.sleep(0.01)
        yield TextDelta("x")
        log.append(f"end {body['prompt']}")
        yield StreamEnd(id_slot=body["id_slot"], timings=Timings())

    completion = gated_completion(stream, SlotGate())

    async def one(name: str) -> None:
        async for _ in completion({"prompt": name, "id_slot": 1}):
            pass

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, "a")
        tg.start_soon(one, "b")
    assert log in (
        ["start a", "end a", "start b", "end b"],
        ["start b", "end b", "start a", "end a"],
    )
