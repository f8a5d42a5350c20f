"""The plain chat moving to an endpoint with a smaller slot, against two fake
llama-servers of different `n_ctx` (beta refuses a prompt that does not fit, as a real server
does): the turn's prompt is built again for beta's slot and compacted there before it is sent,
and when even that cannot fit the turn ends with a sentence that says what to do, keeping every
word the user wrote, and beta is never sent a prompt it must refuse."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

import pytest

from fusion_tui.chat.events import Compacted, ReplyDone
from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.sessions.store import SessionStore
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.unit.endpoint_support import alpha_beta
from tests.unit.local_fake import FakeChatBackend, fast_settings, turn


@pytest.fixture
def big_small() -> Iterator[tuple[FakeLlamaServer, FakeLlamaServer]]:
    """alpha: 2 slots of 8,192; beta: 2 slots of 1,024, refusing longer prompts."""
    with (
        FakeLlamaServer(total_slots=2, n_ctx=8192) as a,
        FakeLlamaServer(total_slots=2, n_ctx=1024) as b,
    ):
        b.refuse_over_ctx = True
        yield a, b


def prompts(srv: FakeLlamaServer) -> list[str]:
    return [str(r.body.get("prompt", "")) for r in srv.completions()]


def done(events: Sequence[object]) -> ReplyDone:
    last = events[-1]
    assert isinstance(last, ReplyDone)
    return last


async def on_alpha(a: FakeLlamaServer, b: FakeLlamaServer, paths: AppPaths) -> FakeChatBackend:
    """A chat over alpha and beta with a first turn of about 1,400 characters on alpha."""
    settings: Settings = replace(fast_settings(), server=alpha_beta(a, b))
    backend = FakeChatBackend(settings, paths)
    await backend.start(lambda _s: None)
    a.script(Reply(text=["The answer, at length: " + "words " * 120]))
    await turn(backend, "Tell me about it: " + "details " * 80)
    assert backend.session.pinned_endpoint == "alpha"
    return backend


async def test_a_turn_moved_mid_answer_to_a_smaller_slot_is_compacted_there_first(
    big_small: tuple[FakeLlamaServer, FakeLlamaServer], paths: AppPaths
) -> None:
    a, b = big_small
    backend = await on_alpha(a, b, paths)
    a.script(Reply(text=["Lost", " half", " of", " it"], disconnect_after=2, then_die=True))
    b.script(Reply(text=["An earlier talk about details."]), Reply(text=["All", " of", " it."]))
    try:
        events = await turn(backend, "And then? " + "more " * 40)
    finally:
        await backend.close()
    assert done(events).outcome == "completed", done(events).note
    assert any(isinstance(e, Compacted) for e in events)
    assert len(prompts(b)) == 2 and all(len(p) < b.n_ctx for p in prompts(b))  # none refused
    assert backend.session.messages[-1].content == "All of it."
    assert backend.session.requests[-1].endpoint == "beta"


async def test_a_turn_that_cannot_fit_the_smaller_slot_ends_saying_what_to_do(
    big_small: tuple[FakeLlamaServer, FakeLlamaServer], paths: AppPaths
) -> None:
    a, b = big_small
    backend = await on_alpha(a, b, paths)
    a.stop()
    b.script(Reply(text=["An earlier talk about details."]))
    words = "Here is my whole file: " + "line of code\n" * 90  # alone larger than beta's slot
    try:
        events = await turn(backend, words)
    finally:
        await backend.close()
    note = done(events).note
    assert done(events).outcome == "error"
    assert "a slot on beta holds 1,024" in note and "moved there from alpha" in note, note
    assert "Your words and the session are kept" in note
    assert all(len(p) < b.n_ctx for p in prompts(b))  # nothing beta had to refuse
    stored = SessionStore.default(paths).load(backend.session.id)
    said = [m.content for m in stored.messages if m.role == "user"]
    assert said[-1] == words and len(said) == 2


async def test_the_summary_request_itself_is_cut_to_fit_the_smaller_slot(
    big_small: tuple[FakeLlamaServer, FakeLlamaServer], paths: AppPaths
) -> None:
    a, b = big_small
    settings: Settings = replace(fast_settings(), server=alpha_beta(a, b))
    settings = replace(settings, llm=replace(settings.llm, max_tokens=6))  # a 6-token summary
    backend = FakeChatBackend(settings, paths)
    await backend.start(lambda _s: None)
    try:
        await turn(backend, "Remember these: " + "apple, banana, cherry, " * 40)  # 936 chars
        a.stop()
        b.script(Reply(text=["Fruits."]), Reply(text=["Apple."]))
        events = await turn(backend, "Which fruit came first?")
    finally:
        await backend.close()
    assert done(events).outcome == "completed", done(events).note
    assert len(prompts(b)) == 2 and all(len(p) < b.n_ctx for p in prompts(b))  # none refused
