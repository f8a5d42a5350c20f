"""The plain chat over two endpoints, against two fake llama-servers: placement, the
pin kept across turns, a resumed session back on its endpoint, failover with its stated cost,
the request records' `endpoint` / `moved_from`, and a wait that keeps the user's words."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from fusion_tui.chat.events import Notice, ReplyDone
from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.sessions.store import SessionStore
from tests.fakes.fake_server import FakeLlamaServer
from tests.unit.endpoint_support import alpha_beta, failover_answer, slot_kept_busy, two_servers
from tests.unit.local_fake import FakeChatBackend, fast_settings, turn


@pytest.fixture
def paths(tmp_path: Path) -> AppPaths:
    root = tmp_path / "home"
    return AppPaths(root / "config", root / "data", root / "state", root / "log")


@pytest.fixture
def two() -> Iterator[tuple[FakeLlamaServer, FakeLlamaServer]]:
    with two_servers(4096) as (a, b):
        yield a, b


def settings_for(a: FakeLlamaServer, b: FakeLlamaServer) -> Settings:
    return replace(fast_settings(), server=alpha_beta(a, b))


def completions(srv: FakeLlamaServer) -> list[int]:
    return [r.body.get("id_slot", -1) for r in srv.completions()]


async def backend_for(settings: Settings, paths: AppPaths, **kw: object) -> FakeChatBackend:
    backend = FakeChatBackend(settings, paths, **kw)  # type: ignore[arg-type]
    await backend.start(lambda _s: None)
    return backend


async def started(
    two: tuple[FakeLlamaServer, FakeLlamaServer], paths: AppPaths
) -> tuple[FakeLlamaServer, FakeLlamaServer, FakeChatBackend]:
    """The servers alpha and beta, and a chat backend over them, started."""
    a, b = two
    return a, b, await backend_for(settings_for(a, b), paths)


def done(events: Sequence[object]) -> ReplyDone:
    last = events[-1]
    assert isinstance(last, ReplyDone)
    return last


async def test_a_session_stays_on_its_endpoint_and_slot_and_records_the_label(
    two: tuple[FakeLlamaServer, FakeLlamaServer], paths: AppPaths
) -> None:
    a, b, backend = await started(two, paths)
    first = await turn(backend, "hello")
    second = await turn(backend, "again")
    await backend.close()
    session = backend.session
    assert session.pinned_endpoint == "alpha" and completions(b) == []
    assert completions(a) == [session.pinned_slot, session.pinned_slot]
    assert [r.endpoint for r in session.requests] == ["alpha", "alpha"]
    assert all(r.moved_from is None for r in session.requests)
    assert done(second).note.startswith(f"alpha · slot {session.pinned_slot} · ")
    assert any(isinstance(e, Notice) and "alpha slot" in e.text for e in first)


async def test_a_resumed_session_goes_back_to_its_endpoint(
    two: tuple[FakeLlamaServer, FakeLlamaServer], paths: AppPaths
) -> None:
    a, b = two
    settings = settings_for(a, b)
    store = SessionStore.default(paths)
    backend = await backend_for(settings, paths)
    await turn(backend, "hello")
    sid = backend.session.id
    await backend.close()
    stored = store.load(sid)
    stored.pinned_endpoint = "beta"  # as if it had been placed on beta
    store.save(stored)
    again = await backend_for(settings, paths, resume=sid)
    events = await turn(again, "back")
    await again.close()
    assert len(completions(b)) == 1 and again.session.requests[-1].endpoint == "beta"
    assert any(isinstance(e, Notice) and e.text.startswith("back to beta") for e in events)


async def test_an_endpoint_that_goes_away_moves_the_session_with_the_stated_cost(
    two: tuple[FakeLlamaServer, FakeLlamaServer], paths: AppPaths
) -> None:
    a, _b, backend = await started(two, paths)
    await turn(backend, "hello")
    assert backend.session.pinned_endpoint == "alpha"
    prompt = backend.session.requests[-1].prompt_n + backend.session.requests[-1].cache_n
    a.stop()
    events = await turn(backend, "are you there")
    await backend.close()
    session = backend.session
    assert done(events).outcome == "completed"
    notes = [e.text for e in events if isinstance(e, Notice)]
    assert any("moving to beta" in n and f"cold re-read of {prompt:,} prompt tokens" in n
               for n in notes)  # fmt: skip
    last = session.requests[-1]
    assert (last.endpoint, last.moved_from) == ("beta", "alpha")
    assert session.pinned_endpoint == "beta"
    assert [m.content for m in session.messages if m.role == "user"] == ["hello", "are you there"]


async def test_waiting_instead_of_moving_keeps_what_the_user_wrote(
    two: tuple[FakeLlamaServer, FakeLlamaServer], paths: AppPaths
) -> None:
    a, b, backend = await started(two, paths)
    asked, backend.ask_failover = failover_answer(False)
    await turn(backend, "hello")
    a.stop()
    events = await turn(backend, "my precious words")
    await backend.close()
    assert asked and asked[0].action == "move" and asked[0].endpoint == "beta"
    assert done(events).outcome == "error" and "waiting" in done(events).note
    assert completions(b) == []
    stored = SessionStore.default(paths).load(backend.session.id)
    assert [m.content for m in stored.messages if m.role == "user"][-1] == "my precious words"


async def test_a_kept_pin_asks_only_its_own_endpoint_before_a_turn(
    two: tuple[FakeLlamaServer, FakeLlamaServer], paths: AppPaths
) -> None:
    _a, b, backend = await started(two, paths)
    await turn(backend, "hello")
    before = len(b.requests)
    events = await turn(backend, "again")
    await backend.close()
    assert done(events).outcome == "completed"
    assert len(b.requests) == before  # a slow beta could not delay alpha's turns


async def test_a_pinned_slot_another_client_keeps_busy_is_left_and_the_turn_says_so(
    two: tuple[FakeLlamaServer, FakeLlamaServer], paths: AppPaths
) -> None:
    a, _b, backend = await started(two, paths)
    await turn(backend, "hello")
    mine = backend.session.pinned_slot
    assert mine is not None
    try:
        with slot_kept_busy(a, {"prompt": "someone else", "id_slot": mine}):
            events = await turn(backend, "again")
    finally:
        await backend.close()
    why = f"slot {mine} on alpha is busy with another client's work; re-pinned to slot"
    assert any(isinstance(e, Notice) and why in e.text for e in events)
    assert why in done(events).note  # kept in the session's turn record too
    assert backend.session.pinned_slot != mine and backend.session.pinned_endpoint == "alpha"
    assert why in backend.session.turns[-1].detail


async def test_a_server_killed_mid_answer_is_asked_about_then_the_turn_is_sent_again(
    two: tuple[FakeLlamaServer, FakeLlamaServer], paths: AppPaths
) -> None:
    from fusion_tui.chat.events import AnswerRestarted, EndpointMoved
    from tests.fakes.fake_server import Reply

    a, b, backend = await started(two, paths)
    asked, backend.ask_failover = failover_answer(True)
    await turn(backend, "hello")
    a.script(Reply(text=["Lost", " half", " of", " it"], disconnect_after=2, then_die=True))
    b.script(Reply(text=["All", " of", " it."]))
    events = await turn(backend, "go on")
    await backend.close()
    assert done(events).outcome == "completed"
    assert [(p.action, p.moved_from, p.endpoint) for p in asked] == [("move", "alpha", "beta")]
    kinds = [type(e) for e in events if isinstance(e, Notice)]
    assert kinds.index(AnswerRestarted) < kinds.index(EndpointMoved)
    assert backend.session.messages[-1].content == "All of it."
    assert len(completions(b)) == 1


async def test_stop_server_on_a_remote_endpoint_says_what_it_did_and_keeps_the_session_there(
    two: tuple[FakeLlamaServer, FakeLlamaServer], paths: AppPaths
) -> None:
    _a, _b, backend = await started(two, paths)
    await turn(backend, "hello")
    said = await backend.stop_server()
    events = await turn(backend, "still here?")
    await backend.close()
    assert said == (
        "alpha is a remote endpoint: not stopped; no managed llama-server is configured on this "
        "machine"
    )
    assert done(events).outcome == "completed" and backend.session.requests[-1].endpoint == "alpha"
