"""The servers of bench/cache_reuse.py, one per side and phase group: fusion-tui's own launch
plan (`PlanServer`, a managed daemon as the app launches it) and a stock server started as a
plain client's users start it (`StockServer`, see `_servers.py`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _cache_common import Recorder, TracedClient
from _servers import Process, log_line, stock_argv

from fusion_tui.config import Settings
from fusion_tui.config.settings import LocalModelsSettings, ManagedSettings
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection, plan_for
from fusion_tui.server.process.binary import find_llama_server
from fusion_tui.server.process.daemon import ManagedDaemon, free_port
from fusion_tui.server.process.launch import LaunchSpec
from fusion_tui.server.process.records import LaunchRecord
from fusion_tui.status import ServerStatus


@dataclass(frozen=True)
class ServerConfig:
    """One launch shape: the model, fusion's plan for it, and a phase's own server setting."""

    name: str
    model: Path
    swa_full: str = "auto"
    cache_ram: int | None = None  # None: the server's default


class PlanServer:
    """A managed daemon launched with fusion-tui's own plan (`server.connect.plan_for`)."""

    kind = "fusion's plan"

    def __init__(self, home: Path, cfg: ServerConfig, args: Any) -> None:
        self.paths = AppPaths.default(env={"FUSION_TUI_HOME": str(home)})
        self.cfg = cfg
        managed = ManagedSettings(
            parallel=args.parallel, ctx=args.ctx, swa_full=cfg.swa_full, keep_running=True
        )
        self.settings = Settings(local_models=LocalModelsSettings(managed=managed))
        self.plan = plan_for(self.settings, cfg.model)
        extra = ("--cache-ram", str(cfg.cache_ram)) if cfg.cache_ram is not None else ()
        self.spec = LaunchSpec(
            model=cfg.model, parallel=self.plan.parallel, ctx=self.plan.ctx,
            swa_full=self.plan.swa_full, threads=args.threads,
            slot_save_path=self.paths.slot_save_dir, extra_args=extra,
        )  # fmt: skip
        self.daemon = ManagedDaemon(self.paths, find_llama_server())
        self.record: LaunchRecord | None = None
        self.argv: list[str] = []
        self.slots_line = ""

    async def launch(self) -> None:
        await self.daemon.stop()
        self.record = await self.daemon.launch(self.spec, fit=self.plan.to_dict(), probe=False)
        self.argv = list(self.record.argv)
        self.slots_line = log_line(Path(self.record.log_path)) or self.slots_line

    async def stop(self) -> None:
        await self.daemon.stop()

    @property
    def url(self) -> str:
        assert self.record is not None
        return self.record.url

    def connector(self, recorder: Recorder) -> Callable[..., Awaitable[Connection]]:
        async def connect(*_a: Any, **_kw: Any) -> Connection:
            client = TracedClient(self.url, recorder)
            props = await client.props()
            status = ServerStatus(state="ready")
            return Connection(client, props, status, self.record, launched=True)

        return connect


class StockServer:
    """llama-server as a plain client's user starts it (see the module docstring), with the
    slots and the total context of fusion's plan for the same model: the same KV memory."""

    kind = "stock"

    def __init__(self, home: Path, cfg: ServerConfig, args: Any) -> None:
        self.paths = AppPaths.default(env={"FUSION_TUI_HOME": str(home)})
        self.home, self.cfg, self.args = home, cfg, args
        managed = ManagedSettings(parallel=args.parallel, ctx=args.ctx, swa_full=cfg.swa_full)
        self.plan = plan_for(Settings(local_models=LocalModelsSettings(managed=managed)), cfg.model)
        self.record: LaunchRecord | None = None
        self.process: Process | None = None
        self.argv: list[str] = []
        self.slots_line = ""

    async def launch(self) -> None:
        await self.stop()
        port = free_port()
        extra = ("--cache-ram", str(self.cfg.cache_ram)) if self.cfg.cache_ram is not None else ()
        self.argv = stock_argv(
            find_llama_server(), self.cfg.model, port, parallel=self.plan.parallel,
            ctx=self.plan.ctx, threads=self.args.threads, extra=extra,
            explicit_np=self.args.stock_np,
        )  # fmt: skip
        self.process = Process(self.argv, self.home / f"stock-{port}.log", port)
        await self.process.start()
        self.slots_line = log_line(self.process.log) or self.slots_line

    async def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    @property
    def url(self) -> str:
        assert self.process is not None
        return self.process.url
