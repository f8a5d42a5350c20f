"""Two real llama-servers of different context per slot: alpha 2,048 tokens a slot,
beta 512. A chat session that outgrew beta's slot on alpha moves there when alpha is killed; the
turn's prompt is compacted for beta's slot before it is sent, so beta answers it (a real server
refuses a prompt that does not fit: `exceed_context_size_error`)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from fusion_tui.chat.events import Compacted, Notice, ReplyDone
from fusion_tui.chat.local import LocalBackend
from fusion_tui.config import Settings
from fusion_tui.config.settings import EndpointSettings, LLMSettings, ServerSettings
from fusion_tui.paths import AppPaths
from tests.server.real_backend import RealServer, server_pair

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, llama_server_bin: Path, demo_model: Path
) -> Iterator[tuple[RealServer, RealServer]]:
    with server_pair(tmp_path_factory, llama_server_bin, demo_model, (4096, 1024)) as pair:
        yield pair


async def test_a_session_moved_to_a_smaller_slot_is_compacted_there_and_answered(
    servers: tuple[RealServer, RealServer], tmp_path: Path
) -> None:
    alpha, beta = servers
    assert alpha.record is not None and beta.record is not None
    eps = (
        EndpointSettings(url=alpha.record.url, label="alpha"),
        EndpointSettings(url=beta.record.url, label="beta"),
    )
    settings = Settings(
        server=ServerSettings(endpoints=eps), llm=LLMSettings(temperature=0.0, max_tokens=6)
    )
    paths = AppPaths.default(env={"FUSION_TUI_HOME": str(tmp_path / "app")})
    backend = LocalBackend(settings, paths)
    await backend.start(lambda _s: None)
    try:
        long = "Remember these fruits: " + ", ".join(["apple", "banana", "cherry"] * 90) + "."
        first = [e async for e in backend.reply(long)]
        assert isinstance(first[-1], ReplyDone) and first[-1].outcome == "completed", first[-1]
        own = backend.session.requests[-1]
        assert backend.session.pinned_endpoint == "alpha" and own.prompt_n + own.cache_n > 512
        os.kill(alpha.record.pid, signal.SIGKILL)
        for _ in range(50):
            try:
                os.kill(alpha.record.pid, 0)
            except ProcessLookupError:
                break
            await asyncio.sleep(0.1)
        events = [e async for e in backend.reply("Which fruit came first?")]
    finally:
        await backend.close()
    last = events[-1]
    assert isinstance(last, ReplyDone) and last.outcome == "completed", last
    assert any(isinstance(e, Compacted) for e in events)
    notes = [e.text for e in events if isinstance(e, Notice)]
    assert any("moving to beta" in n for n in notes), notes
    moved = backend.session.requests[-1]
    assert (moved.endpoint, moved.moved_from) == ("beta", "alpha")
    assert moved.prompt_n + moved.cache_n < 512
    said = [m.content for m in backend.session.messages if m.role == "user"]
    assert said == [long, "Which fruit came first?"]
