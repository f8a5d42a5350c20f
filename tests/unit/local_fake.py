"""Helpers to run `LocalBackend` against the fake llama-server (which serves `/completion` only).

`FakeChatBackend` renders chat messages (the title call) into one prompt and streams native
`/completion`; the chat's own turns already send a `prompt`;
everything else (pins, gate, watch, retry, archive, resume) is the real code. `DiskFake` writes
saved slots into a folder as the real server does, so the archive's checks see real files.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from fusion_tui.chat.events import ReplyEvent
from fusion_tui.chat.local import LocalBackend
from fusion_tui.config import Settings
from fusion_tui.config.settings import LocalModelsSettings
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process.records import LaunchRecord
from fusion_tui.server.types import StreamEvent
from fusion_tui.status import ServerStatus
from tests.fakes.fake_server import FakeLlamaServer


class DiskFake(FakeLlamaServer):
    def __init__(self, folder: Path, **kw: Any) -> None:
        super().__init__(**kw)
        self.folder = folder
        self.actions: list[tuple[str, str]] = []
        """(action, file name) of every slot save/restore asked."""

    def _slot_action(
        self, path: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, dict[str, Any]]:
        action = (query.get("action") or [""])[0]
        name = body.get("filename") if isinstance(body, dict) else None
        self.actions.append((action, str(name)))
        if action == "restore" and isinstance(name, str):
            file = self.folder / name
            if file.is_file():
                self.saved[name] = json.loads(file.read_text())
        status, obj = super()._slot_action(path, query, body)
        if status == 200 and action == "save" and isinstance(name, str):
            (self.folder / name).write_text(json.dumps(self.saved[name]))
        return status, obj


def render(messages: list[dict[str, str]]) -> str:
    return "".join(f"<{m['role']}>{m['content']}\n" for m in messages) + "<assistant>"


class FakeChatBackend(LocalBackend):
    def _open_stream(self, body: dict[str, Any]) -> AsyncGenerator[StreamEvent, None]:
        assert self.conn is not None
        if "messages" not in body:  # the chat's own prompt (the template frame): as it is
            return super()._open_stream(body)
        native = {k: v for k, v in body.items() if k != "messages"}
        native["prompt"] = render(body["messages"])
        idle = self.settings.local_models.request_timeout_ms / 1000
        return self.conn.client.stream_completion(native, idle_timeout=idle)


def fast_settings(**local: Any) -> Settings:
    lm = LocalModelsSettings(
        progress_poll_ms=20, request_timeout_ms=300, first_token_timeout_ms=5_000
    )
    return Settings(local_models=replace(lm, **local))


def connector_for(
    srv: FakeLlamaServer, slot_dir: Path | None, pid: int = 4242
) -> Callable[..., Awaitable[Connection]]:
    """A connector that 'adopts' `srv` as a managed daemon with launch id `{pid}-1000`."""

    async def connect(
        settings: Settings, paths: AppPaths, report: Any = None, **_kw: Any
    ) -> Connection:
        client = LlamaClient(srv.url)
        props = await client.props()
        spec: dict[str, Any] = {"cache_type_k": "f16", "cache_type_v": "f16"}
        if slot_dir is not None:
            spec["slot_save_path"] = str(slot_dir)
        record = LaunchRecord(
            pid=pid,
            argv=[],
            model_path=props.model_path,
            host="127.0.0.1",
            port=srv.port,
            url=srv.url,
            started_at=1000.0,
            ctx=props.n_ctx * props.total_slots,
            parallel=props.total_slots,
            log_path="",
            spec=spec,
        )
        status = ServerStatus(state="ready", slots=props.total_slots, n_ctx=props.n_ctx)
        return Connection(client, props, status, record)

    return connect


async def started(
    srv: FakeLlamaServer,
    paths: AppPaths,
    slot_dir: Path | None,
    *,
    pid: int = 4242,
    resume: str | None = None,
    settings: Settings | None = None,
    **kw: Any,
) -> FakeChatBackend:
    backend = FakeChatBackend(
        settings or fast_settings(),
        paths,
        resume=resume,
        connector=connector_for(srv, slot_dir, pid),
        **kw,
    )
    await backend.start(lambda _s: None)
    return backend


async def turn(backend: LocalBackend, text: str) -> list[ReplyEvent]:
    return [event async for event in backend.reply(text)]
