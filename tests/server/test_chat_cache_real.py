"""The plain chat's cache economy on the real server (SmolLM2, 2 slots × 2,048, one launch for
the module): a degenerate answer cut at maxTokens is reused whole by the next turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fusion_tui.chat.local import LocalBackend
from tests.server.real_backend import RealServer, completed_turn, own_requests, server_fixture

pytestmark = pytest.mark.server


server = server_fixture("chat-cache-home", parallel=2, ctx=4096)


async def backend(srv: RealServer, max_tokens: int = 12, **kw: Any) -> LocalBackend:
    kw.setdefault("connector", srv.connector())
    b = LocalBackend(srv.settings(max_tokens), srv.paths, **kw)
    await b.start(lambda _s: None)
    return b


async def test_a_degenerate_answer_cut_at_max_tokens_is_reused_whole(server: RealServer) -> None:
    b = await backend(server, max_tokens=48)
    await completed_turn(
        b, "Write the word ava, separated by commas, two hundred times: ava, ava, ava,"
    )
    answer = b.session.messages[-1].content
    assert answer.lower().count("ava") >= 5, answer  # the degenerate, cut answer this is about
    first = own_requests(b)[-1]
    await completed_turn(b, "Thanks.")
    second = own_requests(b)[-1]
    await b.close()
    assert second.id_slot == first.id_slot
    # everything the slot held (prompt + the answer's tokens, the last one not yet evaluated)
    assert second.cache_n >= first.prompt_n + first.cache_n + 48 - 3, (first, second)
    assert second.prompt_n <= 30, second  # the new turn only


async def test_a_chat_session_past_its_slot_compacts_and_the_turn_completes(
    server: RealServer, demo_model: Path
) -> None:
    from fusion_tui.chat.compaction import next_turn_room
    from fusion_tui.chat.events import Compacted
    from fusion_tui.fit.swa import prefix_reuse
    from fusion_tui.gguf.facts import read_model_facts
    from tests.server.real_backend import long_text

    assert server.record is not None  # the launch plan's reuse class (`full`), as launched
    server.record.fit = {"prefix_reuse": prefix_reuse(read_model_facts(demo_model), False)}
    b = await backend(server, max_tokens=12)  # also the summary's budget: a loaded box is slow
    n_ctx = b.conn.props.n_ctx  # type: ignore[union-attr]
    assert n_ctx == 2048
    compacted: list[Compacted] = []
    for i in range(6):
        events = await completed_turn(b, long_text(130, seed=i) + f"\nWhat is note {i} about?")
        compacted += [e for e in events if isinstance(e, Compacted)]
    await b.close()
    assert compacted, "six turns of ~430 tokens must outgrow a 2,048-token slot"
    c = compacted[0]
    # right after the answer that left the next turn too little room (an eighth of the slot)
    assert c.before + 12 + next_turn_room(n_ctx) > n_ctx > c.after and c.turns >= 1
    assert all(t.outcome == "completed" for t in b.session.turns)
    assert len([m for m in b.session.messages if m.role == "user"]) == 6
    side = [r for r in b.session.requests if r.side_call]
    own_slots = {r.id_slot for r in own_requests(b)}
    assert side and len(own_slots) == 1
    # the summary continued the session's own cached prompt: only the question was read
    assert side[0].id_slot in own_slots and side[0].prompt_n < 100, side[0]
    assert side[0].cache_n > n_ctx // 2, side[0]


async def test_two_sessions_and_their_titles_keep_every_cached_prefix(
    server: RealServer, demo_model: Path
) -> None:
    from fusion_tui.fit.swa import prefix_reuse
    from fusion_tui.gguf.facts import read_model_facts
    from tests.server.real_backend import long_text

    assert server.record is not None  # the launch plan's reuse class, as `launch` records it
    server.record.fit = {"prefix_reuse": prefix_reuse(read_model_facts(demo_model), False)}
    a, b = await backend(server), await backend(server)
    await completed_turn(a, long_text(200, seed=11))
    await completed_turn(b, long_text(150, seed=12))
    await a.make_title()  # whether SmolLM2's answer makes a usable title does not matter here
    await b.make_title()
    for s in (a, b):  # the side calls ran: a title continuing each session's own prompt
        side = [r for r in s.session.requests if r.side_call]
        assert len(side) == 1 and side[0].id_slot == own_requests(s)[-1].id_slot, side
    for text in ("Which word came first?", "And the last one?"):
        for s in (a, b):
            before = own_requests(s)[-1]
            await completed_turn(s, text)
            after = own_requests(s)[-1]
            assert after.id_slot == before.id_slot
            assert after.cache_n >= before.prompt_n + before.cache_n, (before, after)
    await a.close()
    await b.close()
    assert a.session.pinned_slot != b.session.pinned_slot


async def test_six_sessions_on_two_slots_come_back_from_disk(server: RealServer) -> None:
    from fusion_tui.chat.events import Notice
    from tests.server.real_backend import long_text

    sessions = [await backend(server, max_tokens=4) for _ in range(6)]
    restored: list[str] = []
    for r in range(2):
        for k, b in enumerate(sessions):
            text = long_text(60, seed=30 + k) if r == 0 else "And then?"
            events = await completed_turn(b, text)
            restored += [e.text for e in events if isinstance(e, Notice) and "restored" in e.text]
    for b in sessions:
        await b.close()
    assert len(restored) == 6, restored  # every returning session came back from disk
    for b in sessions:
        first, second = own_requests(b)
        assert second.cache_n >= first.prompt_n + first.cache_n, (first, second)
        assert second.prompt_n <= 24, second  # the new turn only


async def test_six_sessions_on_two_slots_ride_the_servers_ram_cache_back(
    server: RealServer,
) -> None:
    """The app's own launch (only we send to it), the server's RAM prompt cache on (default): a
    returning session whose slot another took is sent there without a disk restore; the server
    moves the other session's prompt to RAM and brings this one back from it."""
    from dataclasses import replace

    from fusion_tui.chat.events import Notice
    from tests.server.real_backend import long_text

    plain_connect = server.connector()

    async def launched(*a: Any, **kw: Any) -> Any:
        return replace(await plain_connect(*a, **kw), launched=True)

    sessions = [await backend(server, max_tokens=4, connector=launched) for _ in range(6)]
    rode: list[str] = []
    restored: list[str] = []
    for r in range(2):
        for k, b in enumerate(sessions):
            text = long_text(60, seed=40 + k) if r == 0 else "And then?"
            events = await completed_turn(b, text)
            notes = [e.text for e in events if isinstance(e, Notice)]
            rode += [n for n in notes if "RAM prompt cache holds" in n]
            restored += [n for n in notes if n.startswith("restored the saved slot")]
    for b in sessions:
        await b.close()
    assert len(rode) >= 4 and not restored, (rode, restored)
    for b in sessions:
        first, second = own_requests(b)
        assert second.cache_n >= first.prompt_n + first.cache_n, (first, second)
        assert second.prompt_n <= 24, second  # the new turn only: the RAM cache had it all


async def test_typing_reads_the_next_prompts_opening_ahead_and_the_turn_reads_only_its_words(
    server: RealServer,
) -> None:
    b = await backend(server, max_tokens=8)
    await completed_turn(b, "Name three colours.")
    first = own_requests(b)[-1]
    await b.read_ahead()  # the first keystroke of the next message
    text = "And three fruits?"
    await completed_turn(b, text)
    second = own_requests(b)[-1]
    assert b.conn is not None
    words = len(await b.conn.client.tokenize(text, add_special=False))
    await b.close()
    assert second.id_slot == first.id_slot
    # the slot held prompt + answer + the next user header: the turn read its words and the
    # frame's end-of-user / assistant header (5 tokens of ChatML) only
    assert second.cache_n >= first.prompt_n + first.cache_n + 8 + 4, (first, second)
    assert second.prompt_n <= words + 6, (second, words)
