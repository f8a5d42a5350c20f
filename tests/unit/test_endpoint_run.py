"""`EndpointRun.completion` against two fake llama-servers: a slot another client keeps
busy is never named (the request goes to a free slot and the note says why); a request whose
endpoint went away moves to the other endpoint once, said, and its event carries `moved_from`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import pytest

from fusion_tui.agent.endpoint_run import EndpointRun, place_run
from fusion_tui.agent.events import RequestDone
from fusion_tui.config import Settings
from fusion_tui.endpoints.session_pins import EndpointPins
from fusion_tui.server.types import StreamEnd
from fusion_tui.sessions.model import Session
from fusion_tui.slots.gate import SlotGate
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.unit.endpoint_support import alpha_beta, failover_answer, slot_kept_busy, two_servers


@pytest.fixture
def two() -> Iterator[tuple[FakeLlamaServer, FakeLlamaServer]]:
    with two_servers(4096) as (a, b):
        yield a, b


async def started(
    a: FakeLlamaServer, b: FakeLlamaServer
) -> tuple[EndpointPins, list[str], EndpointRun]:
    """A new session's run placed over alpha (`a`) and beta (`b`): the pins, its notes, the run."""
    pins = EndpointPins(Settings(server=alpha_beta(a, b)))
    notes: list[str] = []
    session = Session.new()
    conn = await pins.connect(None, None, None, None)  # type: ignore[arg-type]
    route = await place_run(pins, conn, session, notes.append)
    return pins, notes, EndpointRun(pins, route, session.id, notes.append)


def stream(run: EndpointRun, slot: int) -> AsyncIterator[Any]:
    """The events of one streamed completion of "hi there" on `slot`, through the run."""
    completion = run.completion(SlotGate(lambda: 2), 5.0, None)
    return completion({"prompt": "hi there", "id_slot": slot, "stream": True, "n_predict": 4})


async def ask(run: EndpointRun, slot: int) -> StreamEnd:
    ends = [e async for e in stream(run, slot) if isinstance(e, StreamEnd)]
    return ends[-1]


def done(end: StreamEnd) -> RequestDone:
    return RequestDone(0, "step", end.id_slot, end.timings.prompt_n, end.timings.cache_n, 1,
                       1.0, 10.0, 5.0, 8)  # fmt: skip


async def test_a_slot_another_client_keeps_busy_is_never_named(
    two: tuple[FakeLlamaServer, FakeLlamaServer],
) -> None:
    a, b = two
    pins, notes, run = await started(a, b)
    assert run.label == "alpha"
    try:
        with slot_kept_busy(a, {"prompt": "someone else", "id_slot": 0}):
            end = await ask(run, 0)
    finally:
        await pins.aclose()
    assert end.id_slot == 1
    assert any("slot 0 on alpha is busy with another client's work" in n for n in notes)


async def test_a_gone_endpoint_moves_the_request_once_and_marks_it(
    two: tuple[FakeLlamaServer, FakeLlamaServer],
) -> None:
    a, b = two
    pins, notes, run = await started(a, b)
    first = run.annotate(done(await ask(run, 0)), main=True)
    assert (first.endpoint, first.moved_from) == ("alpha", None)
    a.stop()
    try:
        end = await ask(run, 0)
    finally:
        await pins.aclose()
    moved = run.annotate(done(end), main=True)
    assert (moved.endpoint, moved.moved_from) == ("beta", "alpha")
    assert run.label == "beta" and len(b.requests) > 0
    assert any("alpha is unreachable" in n and "moving to beta" in n for n in notes)
    again = run.annotate(replace(done(end)), main=True)
    assert again.moved_from is None  # only the first request after the move


async def test_a_stream_broken_mid_answer_on_a_gone_endpoint_restarts_on_the_other_one(
    two: tuple[FakeLlamaServer, FakeLlamaServer],
) -> None:
    from fusion_tui.agent.request import StreamRestart
    from fusion_tui.server.types import TextDelta

    a, b = two
    pins, notes, run = await started(a, b)
    a.script(Reply(text=["par", "tial", " lost"], disconnect_after=2, then_die=True))
    b.script(Reply(text=["whole"]))
    try:
        seen = [e async for e in stream(run, 0)]
    finally:
        await pins.aclose()
    texts = [e.text if isinstance(e, TextDelta) else type(e).__name__ for e in seen
             if isinstance(e, TextDelta | StreamRestart)]  # fmt: skip
    assert texts == ["par", "tial", "StreamRestart", "whole"]
    assert isinstance(seen[-1], StreamEnd) and run.label == "beta"
    moved = run.annotate(done(seen[-1]), main=True)
    assert (moved.endpoint, moved.moved_from) == ("beta", "alpha")
    assert any("alpha is unreachable" in n and "moving to beta" in n for n in notes)


async def test_a_stream_broken_on_a_healthy_endpoint_is_an_error_as_before(
    two: tuple[FakeLlamaServer, FakeLlamaServer],
) -> None:
    from fusion_tui.server.errors import ServerError

    a, b = two
    pins, _notes, run = await started(a, b)
    a.script(Reply(text=["par", "tial", " lost"], disconnect_after=2))
    try:
        with pytest.raises(ServerError, match="broke mid-answer"):
            _ = [e async for e in stream(run, 0)]
    finally:
        await pins.aclose()
    assert run.label == "alpha" and not any(r.path.startswith("/completion") for r in b.requests)


async def test_when_someone_is_asked_a_declined_move_waits(
    two: tuple[FakeLlamaServer, FakeLlamaServer],
) -> None:
    from fusion_tui.server.errors import ServerError

    a, b = two
    pins, notes, run = await started(a, b)
    asked, run.ask = failover_answer(False)
    a.stop()
    try:
        with pytest.raises(ServerError):
            await ask(run, 0)
    finally:
        await pins.aclose()
    assert [(p.action, p.endpoint) for p in asked] == [("move", "beta")]
    assert run.label == "alpha" and not any(r.path.startswith("/completion") for r in b.requests)
    assert any("waiting (your message is kept)" in n for n in notes)


async def test_the_agent_request_drops_what_streamed_before_a_restart() -> None:

    from fusion_tui.agent.request import StreamRestart, stream_request
    from fusion_tui.server.types import StreamEvent, TextDelta, Timings
    from tests.fakes.clock import FakeClock

    async def completion(body: dict[str, Any]) -> AsyncIterator[StreamEvent | StreamRestart]:
        yield TextDelta('{"tool": "list_')
        yield StreamRestart()
        yield TextDelta('{"tool": "finish"}')
        yield StreamEnd(id_slot=1, timings=Timings(prompt_n=5, cache_n=0, predicted_n=3))

    events: list[object] = []
    reply = await stream_request(
        completion, {"prompt": "p", "id_slot": 1}, step=1, purpose="step", clock=FakeClock(),
        deadline=None, cancel=None, on_event=events.append,
    )  # fmt: skip
    assert (reply.text, reply.ended) == ('{"tool": "finish"}', "ok")
