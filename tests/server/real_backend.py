"""A managed SmolLM2 server for LocalBackend tests and the cache-reuse bench: launch, restart,
and a connector that hands LocalBackend the running daemon (as `connect` would adopt it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fusion_tui.config import Settings
from fusion_tui.config.settings import LLMSettings, LocalModelsSettings, ManagedSettings
from fusion_tui.paths import AppPaths
from fusion_tui.runtime import Connection
from fusion_tui.server.client import LlamaClient
from fusion_tui.server.daemon import ManagedDaemon
from fusion_tui.server.launch import LaunchSpec
from fusion_tui.server.records import LaunchRecord
from fusion_tui.status import ServerStatus


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


WORDS = [
    *[
        "parser",
        "lexer",
        "token",
        "buffer",
        "module",
        "import",
        "cache",
        "slot",
        "session",
        "prompt",
        "layer",
        "tensor",
    ],
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
