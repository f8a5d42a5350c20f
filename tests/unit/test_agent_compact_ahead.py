"""Agent mode in the TUI compacts ahead as the plain chat does: after the task's outcome
(`ReplyDone`), when the next task would not fit the transcript, the summary runs while the
outcome is read, said as it starts and when it is done; the user's next message cuts it short.
Against the fake llama-server, whose tokens are characters."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fusion_tui.agent.loop import AHEAD_ASK
from fusion_tui.chat.agent_backend import AgentBackend
from fusion_tui.chat.events import Compacted, Notice, ReplyDone, ReplyEvent
from fusion_tui.paths import AppPaths
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.unit.cli_support import act
from tests.unit.local_fake import connector_for, fast_settings

LONG = "the answer is " + "many words " * 640
"""7,000 characters: in an 8,192 slot no room is left for a next task."""


async def turn(backend: AgentBackend, text: str) -> list[ReplyEvent]:
    return [event async for event in backend.reply(text)]


@asynccontextmanager
async def agent_mode(
    paths: AppPaths, ws: Path
) -> AsyncIterator[tuple[FakeLlamaServer, AgentBackend]]:
    """Agent mode on a fake server of two 8,192-token slots."""
    with FakeLlamaServer(total_slots=2, n_ctx=8192) as srv:
        backend = AgentBackend(fast_settings(), paths, ws, connect_fn=connector_for(srv, None))
        await backend.start(lambda _s: None)
        try:
            yield srv, backend
        finally:
            await backend.close()


async def test_a_task_that_fills_the_slot_is_compacted_after_its_outcome(
    paths: AppPaths, ws: Path
) -> None:
    async with agent_mode(paths, ws) as (srv, backend):
        srv.script(act("finish", summary=LONG), Reply(text=["explained the answer"]))
        events = await turn(backend, "explain it")
        srv.script(act("finish", summary="ok"))
        nxt = await turn(backend, "and now?")
    done = next(i for i, e in enumerate(events) if isinstance(e, ReplyDone))
    after = events[done + 1 :]
    assert [type(e) for e in after] == [Notice, Compacted]
    assert "ahead of the next task" in after[0].text
    assert isinstance(nxt[-1], ReplyDone) and nxt[-1].outcome == "completed"
    prompts = [str(c.body["prompt"]) for c in srv.completions()]
    assert "explained the answer" in prompts[-1] and "many words" not in prompts[-1]


async def test_a_task_that_leaves_room_says_nothing_after_its_outcome(
    paths: AppPaths, ws: Path
) -> None:
    async with agent_mode(paths, ws) as (srv, backend):
        srv.script(act("finish", summary="short"))
        events = await turn(backend, "explain it")
    assert isinstance(events[-1], ReplyDone)
    assert len(srv.completions()) == 1


async def test_the_next_message_cuts_the_compaction_ahead_short(paths: AppPaths, ws: Path) -> None:
    async with agent_mode(paths, ws) as (srv, backend):
        srv.script(act("finish", summary=LONG), Reply(text=["never"], hang="first_token"))
        events = backend.reply("explain it")
        async for event in events:
            if isinstance(event, Notice) and "ahead" in event.text:
                break
        for _ in range(200):  # the summary request reaches the server and hangs there
            if len(srv.completions()) == 2:
                break
            await asyncio.sleep(0.01)
        await events.aclose()  # the user sent the next message: the screen closes them
        srv.release()
        srv.script(act("finish", summary="ok"))
        nxt = await turn(backend, "and now?")
    assert [d.outcome for d in nxt if isinstance(d, ReplyDone)] == ["completed"]
    bodies = [c.body for c in srv.completions()]
    assert AHEAD_ASK in str(bodies[1]["prompt"])  # the summary that was cut short
    assert "many words" in str(bodies[2]["prompt"])  # the transcript was left as it was
    assert AHEAD_ASK not in str(bodies[2]["prompt"])  # without the question
