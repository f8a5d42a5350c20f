"""Two real llama-servers serve one app: the demo model, 2 slots each, started here
and configured as remote endpoints (`url:`). Sessions stay on their endpoint and slot, a resumed
session finds its endpoint, and killing one server moves its sessions with a stated cost and
loses nothing the user wrote."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from fusion_tui.chat.events import Notice, ReplyDone, ReplyEvent, TurnEndpoint
from fusion_tui.chat.local import LocalBackend
from fusion_tui.config import Settings
from fusion_tui.config.settings import EndpointSettings, LLMSettings, ServerSettings
from fusion_tui.paths import AppPaths
from fusion_tui.sessions.store import SessionStore
from tests.server.real_backend import RealServer, server_pair

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, llama_server_bin: Path, demo_model: Path
) -> Iterator[tuple[RealServer, RealServer]]:
    with server_pair(tmp_path_factory, llama_server_bin, demo_model, (4096, 4096)) as pair:
        yield pair


@pytest.fixture(scope="module")
def app_paths(tmp_path_factory: pytest.TempPathFactory) -> AppPaths:
    home = tmp_path_factory.mktemp("endpoints-app")
    return AppPaths.default(env={"FUSION_TUI_HOME": str(home)})


def settings_for(servers: tuple[RealServer, RealServer]) -> Settings:
    a, b = (srv.record for srv in servers)
    assert a is not None and b is not None
    eps = (EndpointSettings(url=a.url, label="alpha"), EndpointSettings(url=b.url, label="beta"))
    return Settings(
        server=ServerSettings(endpoints=eps), llm=LLMSettings(temperature=0.0, max_tokens=6)
    )


async def backend(settings: Settings, paths: AppPaths, resume: str | None = None) -> LocalBackend:
    b = LocalBackend(settings, paths, resume=resume)
    await b.start(lambda _s: None)
    return b


async def turn(b: LocalBackend, text: str) -> list[ReplyEvent]:
    events = [e async for e in b.reply(text)]
    last = events[-1]
    assert isinstance(last, ReplyDone) and last.outcome == "completed", last
    return events


def where(events: list[ReplyEvent]) -> str:
    return next(e.label for e in events if isinstance(e, TurnEndpoint))


SIDS: dict[str, str] = {}


async def test_sessions_stay_on_their_endpoint_and_slot(
    servers: tuple[RealServer, RealServer], app_paths: AppPaths
) -> None:
    b = await backend(settings_for(servers), app_paths)
    try:
        placed: list[tuple[str, int | None]] = []
        for i in range(3):  # two fill alpha's two slots, the third goes to beta
            if i:
                await b.new_session()
            await turn(b, f"Say hello number {i}.")
            placed.append((b.session.pinned_endpoint or "", b.session.pinned_slot))
            SIDS[f"s{i}"] = b.session.id
        assert [p[0] for p in placed] == ["alpha", "alpha", "beta"]
        assert placed[0][1] != placed[1][1]
        await b.open_session(SIDS["s0"])
        events = await turn(b, "And once more?")
        last = b.session.requests[-1]
        assert where(events) == "alpha" and (last.endpoint, last.id_slot) == placed[0]
        assert last.cache_n > 0  # the slot still held its prompt
    finally:
        await b.close()


async def test_a_resumed_session_finds_its_endpoint(
    servers: tuple[RealServer, RealServer], app_paths: AppPaths
) -> None:
    b = await backend(settings_for(servers), app_paths, resume=SIDS["s2"])
    try:
        events = await turn(b, "Are you still there?")
        notes = [e.text for e in events if isinstance(e, Notice)]
        assert where(events) == "beta" and any(n.startswith("back to beta") for n in notes)
        assert b.session.requests[-1].cache_n > 0
    finally:
        await b.close()


async def test_killing_one_server_moves_its_session_with_a_stated_cost(
    servers: tuple[RealServer, RealServer], app_paths: AppPaths
) -> None:
    alpha = servers[0]
    b = await backend(settings_for(servers), app_paths, resume=SIDS["s0"])
    try:
        assert alpha.record is not None
        os.kill(alpha.record.pid, signal.SIGKILL)
        for _ in range(50):
            try:
                os.kill(alpha.record.pid, 0)
            except ProcessLookupError:
                break
            await asyncio.sleep(0.1)
        events = await turn(b, "Where did my notes go?")
        notes = [e.text for e in events if isinstance(e, Notice)]
        assert any("moving to beta" in n and "cold re-read of" in n for n in notes), notes
        last = b.session.requests[-1]
        assert (last.endpoint, last.moved_from) == ("beta", "alpha")
        assert last.cache_n == 0 or last.prompt_n > 0  # read again on beta
    finally:
        await b.close()
    saved = SessionStore.default(app_paths).load(SIDS["s0"])
    said = [m.content for m in saved.messages if m.role == "user"]
    assert said == ["Say hello number 0.", "And once more?", "Where did my notes go?"]
    assert saved.pinned_endpoint == "beta"


async def test_a_server_killed_mid_answer_moves_the_turn_and_sends_it_again(
    servers: tuple[RealServer, RealServer], app_paths: AppPaths
) -> None:
    from fusion_tui.chat.events import AnswerRestarted
    from fusion_tui.server.types import TextDelta

    alpha, beta = servers
    await alpha.start()  # back after the test above: the session, now on beta, can move there
    settings = settings_for(servers)
    settings = replace(settings, llm=replace(settings.llm, max_tokens=96))
    b = await backend(settings, app_paths, resume=SIDS["s0"])
    events: list[ReplyEvent] = []
    try:
        assert beta.record is not None
        async for event in b.reply("Count slowly from one to fifty, in words."):
            events.append(event)
            if isinstance(event, TextDelta) and beta.record is not None:
                os.kill(beta.record.pid, signal.SIGKILL)  # killed mid-answer
                beta.record = None
    finally:
        await b.close()
    last = events[-1]
    assert isinstance(last, ReplyDone) and last.outcome == "completed", last
    restarted = [i for i, e in enumerate(events) if isinstance(e, AnswerRestarted)]
    assert len(restarted) == 1
    notes = [e.text for e in events if isinstance(e, Notice)]
    assert any("beta is unreachable" in n and "moving to alpha" in n for n in notes), notes
    after = "".join(e.text for e in events[restarted[0] :] if isinstance(e, TextDelta))
    saved = SessionStore.default(app_paths).load(SIDS["s0"])
    assert saved.messages[-1].role == "assistant" and saved.messages[-1].content == after
    assert not saved.messages[-1].partial
    said = [m.content for m in saved.messages if m.role == "user"]
    assert said[-1] == "Count slowly from one to fifty, in words." and len(said) == 4
    assert (saved.requests[-1].endpoint, saved.requests[-1].moved_from) == ("alpha", "beta")
