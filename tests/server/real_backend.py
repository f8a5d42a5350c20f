"""A managed SmolLM2 server for LocalBackend tests and the cache-reuse bench: launch, restart,
and a connector that hands LocalBackend the running daemon (as `connect` would adopt it); the
module fixture that runs one, and the turn helpers the real chat tests share."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fusion_tui.chat.events import ReplyDone, ReplyEvent
from fusion_tui.chat.local import LocalBackend
from fusion_tui.config import Settings
from fusion_tui.config.settings import LLMSettings, LocalModelsSettings, ManagedSettings
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process.daemon import ManagedDaemon
from fusion_tui.server.process.launch import LaunchSpec
from fusion_tui.server.process.records import LaunchRecord
from fusion_tui.sessions.model import RequestRecord
from fusion_tui.status import ServerStatus
from tests.prompt_words import CODE_WORDS


class RealServer:
    def __init__(
        self,
        paths: AppPaths,
        binary: Path,
        model: Path,
        *,
        parallel: int = 4,
        ctx: int = 12288,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.paths = paths
        self.daemon = ManagedDaemon(paths, binary)
        self.spec = LaunchSpec(
            model=model,
            parallel=parallel,
            ctx=ctx,
            threads=2,
            slot_save_path=paths.slot_save_dir,
            extra_args=extra_args,
        )
        self.record: LaunchRecord | None = None

    async def start(self) -> LaunchRecord:
        self.record = await self.daemon.ensure(self.spec, probe=False)
        return self.record

    async def restart(self) -> LaunchRecord:
        await self.daemon.stop()
        self.record = await self.daemon.launch(self.spec, probe=False)
        return self.record

    async def stop(self) -> None:
        await self.daemon.stop()

    def connector(self) -> Callable[..., Awaitable[Connection]]:
        async def connect(settings: Settings, paths: AppPaths, *_a: Any, **_kw: Any) -> Connection:
            record = self.record
            assert record is not None
            client = LlamaClient(record.url)
            props = await client.props()
            status = ServerStatus(state="ready", slots=props.total_slots, n_ctx=props.n_ctx)
            return Connection(client, props, status, record)

        return connect

    def settings(self, max_tokens: int = 12) -> Settings:
        return Settings(
            local_models=LocalModelsSettings(
                model=str(self.spec.model), managed=ManagedSettings(keep_running=True)
            ),
            llm=LLMSettings(temperature=0.0, max_tokens=max_tokens),
        )


@contextmanager
def server_pair(
    tmp_path_factory: pytest.TempPathFactory, binary: Path, model: Path, ctxs: tuple[int, int]
) -> Iterator[tuple[RealServer, RealServer]]:
    """Two managed llama-servers standing for two machines, `alpha` and `beta` (2 slots each,
    one thread each on the 2-core box), stopped afterwards. Answers run to `max_tokens`
    (`--ignore-eos`): a test that kills a server mid-answer needs an answer still running."""
    pair = []
    for name, ctx in zip(("alpha", "beta"), ctxs, strict=True):
        home = tmp_path_factory.mktemp(f"endpoint-{name}")
        paths = AppPaths.default(env={"FUSION_TUI_HOME": str(home)})
        srv = RealServer(paths, binary, model, parallel=2, ctx=ctx, extra_args=("--ignore-eos",))
        srv.spec = replace(srv.spec, threads=1)
        pair.append(srv)
    try:
        for srv in pair:
            asyncio.run(srv.start())
        yield pair[0], pair[1]
    finally:
        for srv in pair:
            asyncio.run(srv.stop())


@contextmanager
def running_server(home: Path, binary: Path, model: Path, **kw: Any) -> Iterator[RealServer]:
    """A `RealServer` (`kw`: its size) with its app folders under `home`, started, stopped after."""
    paths = AppPaths.default(env={"FUSION_TUI_HOME": str(home)})
    srv = RealServer(paths, binary, model, **kw)
    try:
        asyncio.run(srv.start())
        yield srv
    finally:
        asyncio.run(srv.stop())


def server_fixture(home_name: str, **kw: Any) -> Any:
    """A module-scoped `server` fixture: `running_server` (`kw`: its size) under a fresh home
    named `home_name`. Assign it in the test module: `server = server_fixture("x-home", ...)`."""

    @pytest.fixture(scope="module", name="server")
    def server(
        tmp_path_factory: pytest.TempPathFactory, llama_server_bin: Path, demo_model: Path
    ) -> Iterator[RealServer]:
        home = tmp_path_factory.mktemp(home_name)
        with running_server(home, llama_server_bin, demo_model, **kw) as srv:
            yield srv

    return server


async def completed_turn(b: LocalBackend, text: str) -> list[ReplyEvent]:
    """One chat turn's events; the turn must complete (a compaction ahead may follow)."""
    events = [e async for e in b.reply(text)]
    done = [e for e in events if isinstance(e, ReplyDone)]
    assert len(done) == 1 and done[0].outcome == "completed", events[-3:]
    return events


def own_requests(b: LocalBackend) -> list[RequestRecord]:
    """The session's requests but its side calls (titles, compaction)."""
    return [r for r in b.session.requests if not r.side_call]


WORDS = [
    *CODE_WORDS,
    *[
        "context",
        "window",
        "thread",
        "socket",
        "handler",
        "request",
        "stream",
        "answer",
        "server",
        "client",
        "build",
    ],
]


def long_text(n_words: int, seed: int = 0) -> str:
    """Plain text of about 2 tokens per word for SmolLM2 (distinct per `seed`)."""
    out = []
    for i in range(n_words):
        out.append(f"{WORDS[(i * 7 + seed) % len(WORDS)]}{(i + seed) % 97}")
        if i % 12 == 11:
            out.append(".\n")
    return "Read these notes, then answer briefly.\n" + " ".join(out)
