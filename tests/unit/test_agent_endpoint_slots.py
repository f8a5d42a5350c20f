"""Agent mode (`AgentBackend`) on a second endpoint, against fake llama-servers standing
for two machines of different shapes: the slot keeper follows the endpoint the session runs on
(its slot map is grouped by endpoint, the current group and the slots are that server's, the
session is pinned to that server's slot), and after a move the prompt is measured against the
new endpoint's smaller slot: compacted there, or the turn ends with a sentence that keeps every
word the user wrote, and no prompt the server must refuse is sent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fusion_tui.agent.loop import AHEAD_ASK
from fusion_tui.chat.agent_backend import AgentBackend
from fusion_tui.chat.endpoint_view import GroupedSlotView
from fusion_tui.chat.events import Notice, ReplyDone, TurnEndpoint
from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.sessions.store import SessionStore
from tests.fakes.fake_server import FakeLlamaServer, RecordedRequest, Reply
from tests.unit.cli_support import act
from tests.unit.endpoint_support import alpha_beta


@pytest.fixture
def big_ws(ws: Path) -> Path:
    """The workspace with a 3,600-character file: reading it makes a long transcript."""
    (ws / "big.txt").write_text("lorem ipsum " * 300)
    return ws


@pytest.fixture
def alpha_beta3() -> Iterator[tuple[FakeLlamaServer, FakeLlamaServer]]:
    """alpha: 2 slots of 16,384; beta: 3 slots of 4,096 (refusing longer prompts, as a real
    server does)."""
    with (
        FakeLlamaServer(total_slots=2, n_ctx=16384) as a,
        FakeLlamaServer(total_slots=3, n_ctx=4096) as b,
    ):
        b.refuse_over_ctx = True
        yield a, b


def prompts(srv: FakeLlamaServer) -> list[str]:
    return [str(r.body.get("prompt", "")) for r in srv.completions()]


def steps(srv: FakeLlamaServer) -> list[RecordedRequest]:
    """The requests of the tasks' steps, less the summaries (on a small slot the transcript
    is compacted ahead after a task: a question on its own slot, or a side call)."""
    return [
        r
        for r in srv.completions()
        if r.body.get("cache_prompt") is not False and AHEAD_ASK not in str(r.body["prompt"])
    ]


async def drain(backend: AgentBackend, text: str) -> list[Any]:
    return [e async for e in backend.reply(text)]


def done(events: list[Any]) -> ReplyDone:
    """The task's end (on a small slot a compaction ahead may be said after it)."""
    ends = [e for e in events if isinstance(e, ReplyDone)]
    assert len(ends) == 1
    return ends[0]


async def test_a_resumed_agent_session_on_the_second_endpoint_shows_its_slots_grouped(
    paths: AppPaths, ws: Path, alpha_beta3: tuple[FakeLlamaServer, FakeLlamaServer]
) -> None:
    a, b = alpha_beta3
    settings = Settings(server=alpha_beta(a, b))
    first = AgentBackend(settings, paths, ws)
    await first.start(lambda _s: None)
    a.script(act("finish", summary="done here"))
    await drain(first, "first task")
    sid = first.session.id
    await first.close()
    store = SessionStore.default(paths)
    stored = store.load(sid)
    stored.pinned_endpoint = "beta"  # as if it had been placed on beta
    store.save(stored)
    again = AgentBackend(settings, paths, ws, resume=sid)
    await again.start(lambda _s: None)
    try:
        view = again.slot_view()
        assert isinstance(view, GroupedSlotView)
        groups = await view.endpoint_groups()
        assert [(g.label, g.current, len(g.slots)) for g in groups] == [
            ("alpha", False, 2), ("beta", True, 3),
        ]  # fmt: skip
        assert len(await view.slots()) == 3  # beta's slots, not the first connection's
        b.script(act("finish", summary="done there"))
        events = await drain(again, "second task")
        served = steps(b)
        owners = view.slot_owners()
    finally:
        await again.close()
    assert done(events).outcome == "completed"
    assert len(served) == 1 and served[0].body["id_slot"] >= 0  # the placed slot was named
    session = again.session
    assert session.pinned_endpoint == "beta" and session.pinned_slot == served[0].slot
    assert session.server is not None and session.server.total_slots == 3
    assert session.pinned_slot in owners  # the slot map names this session on beta's slot


async def test_after_a_move_mid_task_the_keeper_and_the_slot_map_follow_the_session(
    paths: AppPaths, ws: Path, alpha_beta3: tuple[FakeLlamaServer, FakeLlamaServer]
) -> None:
    a, b = alpha_beta3
    backend = AgentBackend(Settings(server=alpha_beta(a, b)), paths, ws)
    await backend.start(lambda _s: None)
    try:
        a.script(act("finish", summary="done here"))
        await drain(backend, "first task")
        a.stop()
        b.script(act("finish", summary="done there"))
        moved = await drain(backend, "second task")
        view = backend.slot_view()
        assert isinstance(view, GroupedSlotView)
        groups = {g.label: g for g in await view.endpoint_groups()}
        beta_slots = len(await view.slots())
    finally:
        await backend.close()
    assert done(moved).outcome == "completed"
    assert [e.label for e in moved if isinstance(e, TurnEndpoint)] == ["alpha", "beta"]
    assert groups["beta"].current and not groups["alpha"].current and beta_slots == 3
    session = backend.session
    served = [r.slot for r in steps(b)]
    assert session.pinned_endpoint == "beta" and session.pinned_slot == served[-1]
    assert session.server is not None and session.server.total_slots == 3
    assert session.pinned_slot in groups["beta"].owners


async def test_a_move_to_a_smaller_slot_compacts_there_before_the_prompt_is_sent(
    paths: AppPaths, big_ws: Path, alpha_beta3: tuple[FakeLlamaServer, FakeLlamaServer]
) -> None:
    a, b = alpha_beta3
    backend = AgentBackend(Settings(server=alpha_beta(a, b)), paths, big_ws)
    await backend.start(lambda _s: None)
    try:
        a.script(act("read_file", path="big.txt"), act("finish", summary="read it"))
        await drain(backend, "read big.txt")
        assert max(len(p) for p in prompts(a)) > b.n_ctx  # alpha's prompt would not fit beta
        a.stop()
        b.script(Reply(text=["We read big.txt: lorem ipsum."]), act("finish", summary="there"))
        events = await drain(backend, "and now?")
        b.script(act("finish", summary="still there"))
        again = await drain(backend, "once more")  # the next task's host is beta's
        host = backend.host
    finally:
        await backend.close()
    assert done(events).outcome == "completed", done(events).note
    notes = [e.text for e in events if isinstance(e, Notice)]
    assert any(n.startswith("compacted the transcript") for n in notes), notes
    assert len(steps(b)) == 2 and all(len(p) < b.n_ctx for p in prompts(b))  # none refused
    assert done(again).outcome == "completed"
    assert host is not None and host.conn.props.n_ctx == 4096 and host.current is host.conn
    moved = [(r.endpoint, r.moved_from) for r in backend.session.requests if r.moved_from]
    assert moved == [("beta", "alpha")]


async def test_when_even_the_compacted_prompt_cannot_fit_the_turn_ends_saying_what_to_do(
    paths: AppPaths, big_ws: Path
) -> None:
    with (
        FakeLlamaServer(total_slots=2, n_ctx=16384) as a,
        FakeLlamaServer(total_slots=2, n_ctx=2048) as b,  # smaller than the tools' prefix
    ):
        b.refuse_over_ctx = True
        backend = AgentBackend(Settings(server=alpha_beta(a, b)), paths, big_ws)
        await backend.start(lambda _s: None)
        try:
            a.script(act("read_file", path="big.txt"), act("finish", summary="read it"))
            await drain(backend, "read big.txt")
            a.stop()
            b.script(Reply(text=["We read big.txt."]))
            events = await drain(backend, "my precious follow-up")
        finally:
            await backend.close()
        sent = prompts(b)
    note = done(events).note
    assert done(events).outcome == "error"
    assert "a slot on beta holds 2,048" in note and "moved there from alpha" in note, note
    assert "Your words and the session are kept" in note
    assert all(len(p) < b.n_ctx for p in sent)  # nothing beta had to refuse
    stored = SessionStore.default(paths).load(backend.session.id)
    said = [m.content for m in stored.messages if m.role == "user"]
    assert said == ["read big.txt", "my precious follow-up"]


async def test_a_resumed_session_placed_on_a_smaller_slot_is_measured_there_first(
    paths: AppPaths, big_ws: Path, alpha_beta3: tuple[FakeLlamaServer, FakeLlamaServer]
) -> None:
    a, b = alpha_beta3
    settings = Settings(server=alpha_beta(a, b))
    first = AgentBackend(settings, paths, big_ws)
    await first.start(lambda _s: None)
    a.script(act("read_file", path="big.txt"), act("finish", summary="read it"))
    await drain(first, "read big.txt")
    sid = first.session.id
    await first.close()
    a.stop()
    again = AgentBackend(settings, paths, big_ws, resume=sid)
    await again.start(lambda _s: None)  # placed on beta by a move: alpha is gone
    b.script(Reply(text=["We read big.txt: lorem ipsum."]), act("finish", summary="there"))
    try:
        events = await drain(again, "and now?")
    finally:
        await again.close()
    assert done(events).outcome == "completed", done(events).note
    assert any(isinstance(e, Notice) and e.text.startswith("compacted the transcript")
               for e in events)  # fmt: skip
    assert len(prompts(b)) == 2 and all(len(p) < b.n_ctx for p in prompts(b))  # none refused
