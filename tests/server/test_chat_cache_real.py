"""The plain chat's cache economy on the real server (SmolLM2, 2 slots × 2,048, one launch for
the module): a degenerate answer cut at maxTokens is reused whole by the next turn."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fusion_tui.chat.events import ReplyDone, ReplyEvent
from fusion_tui.chat.local import LocalBackend
from fusion_tui.paths import AppPaths
from fusion_tui.sessions.model import RequestRecord
from tests.server.real_backend import RealServer

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, llama_server_bin: Path, demo_model: Path
) -> Iterator[RealServer]:
    home = tmp_path_factory.mktemp("chat-cache-home")
    paths = AppPaths.default(env={"FUSION_TUI_HOME": str(home)})
    srv = RealServer(paths, llama_server_bin, demo_model, parallel=2, ctx=4096)
    try:
        asyncio.run(srv.start())
        yield srv
    finally:
        asyncio.run(srv.stop())


async def backend(srv: RealServer, max_tokens: int = 12, **kw: Any) -> LocalBackend:
    b = LocalBackend(srv.settings(max_tokens), srv.paths, connector=srv.connector(), **kw)
    await b.start(lambda _s: None)
    return b


async def turn(b: LocalBackend, text: str) -> list[ReplyEvent]:
    events = [e async for e in b.reply(text)]
    last = events[-1]
    assert isinstance(last, ReplyDone) and last.outcome == "completed", last
    return events


def own(b: LocalBackend) -> list[RequestRecord]:
    return [r for r in b.session.requests if not r.side_call]


async def test_a_degenerate_answer_cut_at_max_tokens_is_reused_whole(server: RealServer) -> None:
    b = await backend(server, max_tokens=48)
    await turn(b, "Write the word ava, separated by commas, two hundred times: ava, ava, ava,")
    answer = b.session.messages[-1].content
    assert answer.lower().count("ava") >= 5, answer  # the degenerate, cut answer this is about
    first = own(b)[-1]
    await turn(b, "Thanks.")
    second = own(b)[-1]
    await b.close()
    assert second.id_slot == first.id_slot
    # everything the slot held (prompt + the answer's tokens, the last one not yet evaluated)
    assert second.cache_n >= first.prompt_n + first.cache_n + 48 - 3, (first, second)
    assert second.prompt_n <= 30, second  # the new turn only
