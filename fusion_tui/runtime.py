"""Provides `connect`: from settings to a ready server and a client, for the TUI and the CLI.

Managed mode picks the model (configured, else the demo model), plans the launch (fitted context,
`--swa-full` verdict, KV estimate), then adopts or launches the daemon. External mode connects to
a configured URL without owning it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusion_tui.config import Settings
from fusion_tui.demo_model import DEMO_NAME, INSTALL_HINT, demo_model_path
from fusion_tui.fit.kv import KVConfigError
from fusion_tui.fit.launch_plan import LaunchPlan, plan_launch
from fusion_tui.fit.rpc_plan import rpc_launch_plan
from fusion_tui.paths import AppPaths
from fusion_tui.server.client import LlamaClient
from fusion_tui.server.daemon import ManagedDaemon
from fusion_tui.server.errors import DaemonStartError, ServerError
from fusion_tui.server.launch import LaunchSpec
from fusion_tui.server.probe import ProbeResult, model_display_name
from fusion_tui.server.records import LaunchRecord
from fusion_tui.server.types import Props
from fusion_tui.status import ServerStatus

StatusReport = Callable[[ServerStatus], None]


class ModelNotFound(ServerError):
    """No model is configured and the demo model is not installed, or the file is missing."""


@dataclass
class Connection:
    """A ready server: the client to use, what it serves, and (managed) its launch record."""

    client: LlamaClient
    props: Props
    status: ServerStatus
    record: LaunchRecord | None = None
    probe: ProbeResult | None = None
    model_note: str = ""
    """Said once to the user, e.g. that the demo model is used because none is configured."""
    launched: bool = False
    """This process started the daemon (rather than adopting one already running)."""

    @property
    def launch_id(self) -> str | None:
        if self.record is None:
            return None
        return f"{self.record.pid}-{int(self.record.started_at)}"


def resolve_model(settings: Settings, override: str | None = None) -> tuple[Path, str]:
    """The GGUF to serve and a note for the user when it is the demo model."""
    chosen = override or settings.local_models.model
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_file():
            raise ModelNotFound(f"no model file at {path} (check localModels.model or --model)")
        return path, ""
    demo = demo_model_path()
    if demo is None:
        raise ModelNotFound("No model is configured and the demo model is missing. " + INSTALL_HINT)
    return demo, f"No model configured: using the demo model, {DEMO_NAME}."


def plan_for(
    settings: Settings,
    model: Path,
    *,
    parallel: int | None = None,
    ctx: int | None = None,
    allow_fallback: bool = True,
    memory_bytes: int | None = None,
) -> LaunchPlan:
    """The measured plan for `model` under the managed settings (fitted context, swa-full verdict,
    estimate); `KVConfigError` for settings the server would refuse."""
    m = settings.local_models.managed
    return plan_launch(
        model,
        parallel=parallel or m.parallel,
        ctx=ctx or m.ctx,
        ubatch=m.ubatch,
        type_k=m.cache_type_k,
        type_v=m.cache_type_v,
        kv_unified=m.kv_unified,
        swa_full_mode=m.swa_full,
        min_ctx=m.min_ctx,
        max_ctx=m.max_ctx,
        memory_bytes=memory_bytes if memory_bytes is not None else m.memory_bytes,
        flash_attn=m.flash_attn,
        allow_fallback=allow_fallback,
    )


def plan_spec(
    settings: Settings,
    paths: AppPaths,
    model: Path,
    *,
    parallel: int | None = None,
    ctx: int | None = None,
) -> tuple[LaunchSpec, dict[str, Any], int]:
    """The launch spec for `model` with the fitted context; also the fit record and estimate."""
    managed = settings.local_models.managed
    try:
        plan = plan_for(settings, model, parallel=parallel, ctx=ctx)
        devices = None
        if managed.rpc:  # one model over several machines: fit each device (fit/rpc_plan.py)
            plan, devices = rpc_launch_plan(
                settings,
                lambda mem: plan_for(settings, model, parallel=parallel, ctx=ctx, memory_bytes=mem),
            )
    except KVConfigError as exc:  # a setting the server would refuse: say which, no traceback
        raise DaemonStartError(f"cannot launch with these settings: {exc}") from None
    spec = LaunchSpec(
        model=model,
        parallel=plan.parallel,
        ctx=plan.ctx,
        ubatch=managed.ubatch,
        cache_type_k=managed.cache_type_k,
        cache_type_v=managed.cache_type_v,
        kv_unified=managed.kv_unified,
        swa_full=plan.swa_full,
        flash_attn=managed.flash_attn,
        slot_save_path=paths.slot_save_dir,
        threads=managed.threads,
        extra_args=managed.extra_args,
        rpc=managed.rpc,
    )
    record = plan.to_dict()
    if devices is not None:
        record.update(devices=devices.to_dict(), device_lines=devices.lines())
    return spec, record, plan.kv_bytes_total


def make_daemon(settings: Settings, paths: AppPaths) -> ManagedDaemon:
    binary = Path(settings.server.binary).expanduser() if settings.server.binary else None
    return ManagedDaemon(paths, binary)


async def connect(
    settings: Settings,
    paths: AppPaths,
    report: StatusReport | None = None,
    *,
    model: str | None = None,
    parallel: int | None = None,
    ctx: int | None = None,
) -> Connection:
    """Reach a ready server, reporting every stage; a `ServerError` says what to do."""
    say = report or (lambda _status: None)
    if settings.server.mode == "external":
        return await _connect_external(settings, say)
    model_path, note = resolve_model(settings, model)
    name = model_display_name(model_path)
    say(ServerStatus(state="starting", model=name, detail="planning the launch"))
    spec, fit, estimate = plan_spec(settings, paths, model_path, parallel=parallel, ctx=ctx)
    daemon = make_daemon(settings, paths)
    before = daemon.current()

    def stage(message: str) -> None:
        say(ServerStatus(state="loading", model=name, detail=message))

    record = await daemon.ensure(
        spec,
        stage,
        match_spec=parallel is not None or ctx is not None,
        fit=fit,
        kv_estimate_bytes=estimate,
    )
    client = LlamaClient(record.url)
    try:
        props = await client.props()
    except ServerError:
        await client.aclose()
        raise
    probe = daemon.probe_result(record)
    status = ServerStatus(
        state="ready",
        model=name,
        slots=props.total_slots,
        n_ctx=props.n_ctx,
        tok_s=probe.tok_s if probe else None,
    )
    say(status)
    launched = before is None or before.pid != record.pid
    return Connection(client, props, status, record, probe, note, launched)


async def _connect_external(settings: Settings, say: StatusReport) -> Connection:
    url = settings.server.url
    if not url:
        raise DaemonStartError("server.mode is external but server.url is not set")
    api_key = os.environ.get(settings.server.api_key_env) or None
    client = LlamaClient(url, api_key=api_key)
    say(ServerStatus(state="loading", detail=f"connecting to {url}"))
    try:
        await client.health()
        props = await client.props()
    except ServerError:
        await client.aclose()
        raise
    name = model_display_name(props.model_path) if props.model_path else url
    status = ServerStatus(state="ready", model=name, slots=props.total_slots, n_ctx=props.n_ctx)
    say(status)
    return Connection(client, props, status)
