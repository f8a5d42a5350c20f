"""Side calls cost the sessions nothing: a title continues the session's own cached prompt when
the launch's prefix reuse is `full`, and otherwise goes to a slot no stored session holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.unit.local_fake import FakeChatBackend, connector_for, fast_settings, turn


@pytest.fixture
def paths(tmp_path: Path) -> AppPaths:
    return AppPaths(*(tmp_path / n for n in ("config", "data", "state", "log")))


def with_fit(srv: FakeLlamaServer, reuse: str) -> Any:
    base = connector_for(srv, None)

    async def connect(*a: Any, **kw: Any) -> Connection:
        conn = await base(*a, **kw)
        assert conn.record is not None
        conn.record.fit = {"prefix_reuse": reuse}
        return conn

    return connect


def completions(srv: FakeLlamaServer) -> list[Any]:
    return [r for r in srv.completions()]


async def test_a_title_continues_the_sessions_own_prompt_when_reuse_is_full(
    paths: AppPaths,
) -> None:
    with FakeLlamaServer(total_slots=4, n_ctx=4096) as srv:
        b = FakeChatBackend(fast_settings(), paths, connector=with_fit(srv, "full"))
        await b.start(lambda _s: None)
        await turn(b, "please refactor the parser module")
        srv.script(Reply(text=["Parser refactor"]))
        assert await b.make_title() == "Parser refactor"
        await turn(b, "go on")
        await b.close()
    first, title, nxt = completions(srv)
    assert title.slot == first.slot == nxt.slot
    answer = b.session.messages[1].content
    assert title.body["prompt"].startswith(first.body["prompt"] + answer)
    end = b.session.requests
    assert [r.side_call for r in end] == [False, True, False]
    # the title evaluated only its question; the next turn reused prompt + answer whole
    asked = len(title.body["prompt"]) - len(first.body["prompt"] + answer)
    assert end[1].prompt_n == asked and end[1].cache_n == len(first.body["prompt"] + answer)
    assert end[2].cache_n >= end[0].prompt_n + end[0].cache_n + len(answer)


async def test_elsewhere_a_title_goes_to_a_slot_no_stored_session_holds(paths: AppPaths) -> None:
    with FakeLlamaServer(total_slots=3, n_ctx=4096) as srv:
        connect = with_fit(srv, "none")
        other = FakeChatBackend(fast_settings(), paths, connector=connect)
        await other.start(lambda _s: None)
        srv.script(Reply(id_slot=0))  # the server put this session on slot 0
        await turn(other, "another session, stored")
        await other.close()
        a = FakeChatBackend(fast_settings(), paths, connector=connect)
        await a.start(lambda _s: None)
        await turn(a, "session a")
        srv.script(Reply(text=["Session A"]))
        await a.make_title()
        await a.close()
    assert other.session.pinned_slot == 0 and a.session.pinned_slot not in (0, None)
    title = completions(srv)[-1]
    # not slot 0 (the stored session's prompt), not A's own
    assert title.slot not in (0, a.session.pinned_slot)


async def test_a_turn_cuts_a_running_title_short_and_it_reruns_after(paths: AppPaths) -> None:
    import anyio

    with FakeLlamaServer(total_slots=4, n_ctx=4096) as srv:
        b = FakeChatBackend(fast_settings(), paths, connector=with_fit(srv, "full"))
        await b.start(lambda _s: None)
        await turn(b, "first question")
        srv.script(Reply(text=["Slow", " title"], prompt_seconds=2.0), Reply(), Reply(text=["T"]))
        titles: list[str | None] = []
        async with anyio.create_task_group() as tg:

            async def title() -> None:
                titles.append(await b.make_title())

            tg.start_soon(title)
            await anyio.sleep(0.3)  # the title is being read
            await turn(b, "second question")
        await b.close()
    assert titles == ["T"]  # the slow one was cancelled; the rerun came after the turn
    assert b.side_calls.cancelled == 1
    sides = [r.side_call for r in b.session.requests]
    assert sides == [False, False, True]
