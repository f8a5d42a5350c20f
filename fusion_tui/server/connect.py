"""Provides `connect`: from settings to a ready server and a client, for the TUI and the CLI.

Managed mode picks the model (configured, else Qwen2.5-Coder-1.5B when installed, else the demo
model; a catalogue model is assembled on first use), checks its header and plans the launch
(fitted context, `--swa-full` verdict, KV estimate) before anything running is touched, so a bad
file changes nothing; then it adopts or launches the daemon. The connection is returned as
soon as `/health` is 200: on a fresh launch the throughput probe runs beside the app
(`Connection.probe_pending`) and reports the updated ready status through the same callback when
it lands. Cancelled at any stage (the user quit), it stops the server it launched. External mode
connects to a configured URL without owning it.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio

from fusion_tui.config import Settings
from fusion_tui.config.speculative import SpeculativeError, parse_setting
from fusion_tui.fit.kv import KVConfigError
from fusion_tui.fit.launch_plan import LaunchPlan, plan_launch
from fusion_tui.fit.rpc_plan import rpc_launch_plan
from fusion_tui.gguf.reader import GGUFError, read_header
from fusion_tui.models.catalog import (
    CATALOG,
    DEMO_MODEL,
    CatalogModel,
    catalog_model,
    default_model,
    short_names,
)
from fusion_tui.models.packaged import (
    AssemblyCancelled,
    ModelFileError,
    Progress,
    progress_words,
)
from fusion_tui.paths import AppPaths
from fusion_tui.server.errors import DaemonStartError, ServerError
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process import crash
from fusion_tui.server.process.daemon import ManagedDaemon
from fusion_tui.server.process.launch import LaunchSpec
from fusion_tui.server.process.probe import ProbeResult, model_display_name
from fusion_tui.server.process.records import LaunchRecord
from fusion_tui.server.process.speculative import (
    resolve_draft,
    short_name_lookup,
    speculative_choice,
)
from fusion_tui.server.types import Props
from fusion_tui.status import ServerStatus

StatusReport = Callable[[ServerStatus], None]


class ModelNotFound(DaemonStartError):
    """No model is configured and none is installed, a catalogue model's packages are missing or
    do not make its file, or the file is missing or is not a GGUF llama-server could load."""


PICK_ANOTHER = "Pick another model: F2 in the app, or `--model PATH` (`localModels.model`)."
_USABLE_HEADER_ERROR = re.compile(
    r"unsupported GGUF version ([4-9]|\d\d)|metadata exceeds the read"
)
"""Header errors of our reader that a newer llama-server may not have (a later GGUF version, a
huge metadata section): launch anyway, the plan falls back to a size estimate."""


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
    """This app owns the daemon and stops it when it quits (unless `keepRunning`): it launched
    it, or adopted one left running by an app of ours that is gone."""
    probe_pending: asyncio.Task[ProbeResult | None] | None = None
    """The start-up throughput probe, still running beside the app (a fresh launch only). When
    it lands it sets `probe` and `status` and reports the new ready status."""

    @property
    def launch_id(self) -> str | None:
        if self.record is None:
            return None
        return f"{self.record.pid}-{int(self.record.started_at)}"


@dataclass(frozen=True)
class ModelChoice:
    """The model a launch serves: a catalogue entry (maybe still to assemble) or a GGUF path."""

    entry: CatalogModel | None
    file: Path | None
    note: str = ""
    """Said once to the user, e.g. that the demo model is used because no coder is installed."""


def choose_model(settings: Settings, override: str | None = None) -> ModelChoice:
    """The model `--model` (`override`) or `localModels.model` names, else the default one.

    A short name (`coder-1.5b`, `coder-0.5b`, `smollm2`) picks a catalogue model; anything else
    is a path, checked here. Nothing is assembled yet (`prepare_model` does)."""
    chosen = override or settings.local_models.model
    if chosen:
        entry = catalog_model(chosen)
        if entry is not None:
            return ModelChoice(entry, None)
        path = Path(chosen).expanduser()
        if not path.is_file():
            what = "is a folder, not a model file" if path.is_dir() else "does not exist"
            raise ModelNotFound(
                f"no model file at {path} (check localModels.model or --model)",
                cause=f"{path} {what}; a model is a GGUF path or one of {short_names()}",
                next_step=PICK_ANOTHER,
                kind="model",
            )
        return ModelChoice(None, path)
    entry, note = default_model()
    if entry is None:
        raise ModelNotFound(
            note,
            next_step=CATALOG[DEMO_MODEL].file.fix()
            + "; or pick a model: F2 in the app, or `--model PATH`.",
            kind="model",
        )
    return ModelChoice(entry, None, note)


def prepare_model(
    choice: ModelChoice, progress: Progress | None = None, cancel: threading.Event | None = None
) -> Path:
    """The GGUF file of `choice`, a catalogue model assembled and verified on first use;
    `ModelNotFound` says which package is missing or that the parts do not make the file."""
    if choice.entry is None:
        assert choice.file is not None
        return choice.file
    try:
        return choice.entry.path(progress, cancel)
    except AssemblyCancelled:
        raise
    except ModelFileError as exc:
        raise ModelNotFound(str(exc), next_step=f"To fix it, {exc.fix}.", kind="model") from None


async def prepare_beside(choice: ModelChoice, say: StatusReport) -> Path:
    """`prepare_model` in a worker thread, so a first assembly (seconds for a gigabyte) does not
    freeze the app; its progress is reported twice a second. Cancelled (the user quit), the
    worker stops within one block and keeps nothing."""
    entry = choice.entry
    if entry is None or entry.ready():
        return prepare_model(choice)
    cancel = threading.Event()
    latest: list[tuple[str, int, int]] = []

    def progress(phase: str, done: int, total: int) -> None:
        latest[:] = [(phase, done, total)]

    async def report() -> None:
        while True:
            if latest:
                detail = progress_words(*latest[0])
                say(ServerStatus(state="starting", model=entry.title, detail=detail))
            await anyio.sleep(0.5)

    async with anyio.create_task_group() as tg:
        tg.start_soon(report)
        try:
            path = await anyio.to_thread.run_sync(
                lambda: prepare_model(choice, progress, cancel), abandon_on_cancel=True
            )
        except anyio.get_cancelled_exc_class():
            cancel.set()
            raise
        finally:
            tg.cancel_scope.cancel()
    return path


def check_model(path: Path) -> None:
    """Refuse a file llama-server could not load (not a GGUF, truncated, unreadable) before
    anything running is stopped; `ModelNotFound` says what is wrong with it."""
    try:
        read_header(path)
    except GGUFError as exc:
        if _USABLE_HEADER_ERROR.match(str(exc)):
            return
        raise ModelNotFound(
            f"{path.name} cannot be served: {exc}",
            cause="llama-server only loads GGUF model files",
            next_step=PICK_ANOTHER + " Nothing running was changed.",
            kind="model",
        ) from None


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
        draft_model_path=draft_model(settings),
    )


def draft_model(settings: Settings) -> Path | None:
    """The speculative draft model `localModels.managed.speculative` names (`draft:…`), if any;
    `KVConfigError` when it names none that exists."""
    parsed = parse_setting(settings.local_models.managed.speculative)
    if parsed.kind != "draft":
        return None
    try:
        return resolve_draft(parsed.draft, short_name_lookup)
    except SpeculativeError as exc:
        raise KVConfigError(f"speculative {exc}") from None


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
        threads=managed.thread_count,
        extra_args=managed.extra_args,
        rpc=managed.rpc,
        speculative=managed.speculative,
    )
    record = plan.to_dict()
    if devices is not None:
        record.update(devices=devices.to_dict(), device_lines=devices.lines())
    return spec, record, plan.kv_bytes_total


def make_daemon(settings: Settings, paths: AppPaths) -> ManagedDaemon:
    binary = Path(settings.server.binary).expanduser() if settings.server.binary else None
    return ManagedDaemon(paths, binary)


def stops_on_exit(settings: Settings, conn: Connection) -> bool:
    """The one rule for leaving: the daemon this process launched stops with it, unless
    `localModels.managed.keepRunning`; an adopted or external server is never stopped."""
    return conn.launched and not settings.local_models.managed.keep_running


async def release(settings: Settings, paths: AppPaths, conn: Connection) -> None:
    """Close the connection's client, then stop the daemon if `stops_on_exit` says so."""
    try:
        await conn.client.aclose()
    finally:
        if stops_on_exit(settings, conn):
            await make_daemon(settings, paths).stop()


async def connect(
    settings: Settings,
    paths: AppPaths,
    report: StatusReport | None = None,
    *,
    model: str | None = None,
    parallel: int | None = None,
    ctx: int | None = None,
    detached: bool = False,
) -> Connection:
    """Reach a ready server, reporting every stage; a `ServerError` says what to do.

    `detached` (`fusion-tui launch`): the server is left running on purpose, no app owns it.
    """
    say = report or (lambda _status: None)
    if settings.server.mode == "external":
        return await _connect_external(settings, say)
    choice = choose_model(settings, model)
    model_path = await prepare_beside(choice, say)
    note = choice.note
    name = model_display_name(model_path)
    say(ServerStatus(state="starting", model=name, detail="planning the launch"))
    spec, fit, estimate = plan_spec(settings, paths, model_path, parallel=parallel, ctx=ctx)
    check_model(model_path)  # both before anything running is touched
    daemon = make_daemon(settings, paths)
    owner = 0 if detached else os.getpid()

    def stage(message: str) -> None:
        say(ServerStatus(state="loading", model=name, detail=message))

    before = daemon.current()

    def ours(rec: LaunchRecord | None) -> bool:
        """This call launched `rec`, or took it over from an app of ours that is gone."""
        if rec is None or not owner or rec.owner_pid != owner:
            return False
        return before is None or before.pid != rec.pid or before.owner_pid != owner

    record: LaunchRecord | None = None
    try:
        record = await daemon.ensure(
            spec,
            stage,
            match_spec=parallel is not None or ctx is not None,
            fit=fit,
            kv_estimate_bytes=estimate,
            probe=False,
            owner_pid=owner,
        )
        client = LlamaClient(record.url)
        try:
            props = await client.props()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await client.aclose()
            raise
    except BaseException:
        if ours(record) and not settings.local_models.managed.keep_running:
            with anyio.CancelScope(shield=True):
                await daemon.stop()  # quit mid start-up: stop what this app launched
        raise
    probe = daemon.probe_result(record)
    status = ServerStatus(
        state="ready",
        model=name,
        slots=props.total_slots,
        n_ctx=props.n_ctx,
        tok_s=probe.tok_s if probe else None,
        note=record.note,
        speculative=speculative_choice(record),
    )
    launched = ours(record)
    conn = Connection(client, props, status, record, probe, note, launched)
    if probe is None and (launched or detached):
        status = replace(status, detail="measuring throughput")
        conn.status = status
        conn.probe_pending = asyncio.create_task(
            _probe_beside(conn, daemon, spec, fit, estimate, owner, say)
        )
    say(status)
    return conn


async def _probe_beside(
    conn: Connection,
    daemon: ManagedDaemon,
    spec: LaunchSpec,
    fit: dict[str, Any],
    estimate: int,
    owner: int,
    say: StatusReport,
) -> ProbeResult | None:
    """Measure throughput while the app is already usable; a server that dies of SIGILL at this
    first computation is started again with repacking off on the same port (so the client's URL
    stays right) and measured again. Reports the ready status (or the error) when done."""
    record = conn.record
    assert record is not None
    ready = conn.status
    say = _quiet(say)

    def stage(message: str) -> None:
        say(ServerStatus(state="loading", model=ready.model, detail=message))

    result = await daemon.measure(record, lambda _msg: None)
    if result is None and not conn.client.is_closed:
        died = await daemon.exit_signal(record.pid)
        if died is not None:
            first = daemon.exit_error(-died, crash.MEASURING)
            daemon.files.clear(record.pid)
            if died != signal.SIGILL or record.repack_off:
                if died == signal.SIGILL:
                    first = crash.sigill_even_without_repack(first, record.binary)
                _failed(conn, first, say)
                return None
            stage("died of SIGILL while measuring throughput; starting again with repacking off")
            try:
                async with daemon.lock(stage):  # no other instance launches meanwhile
                    new = await daemon.relaunch_without_repack(
                        spec, Path(record.binary), stage, fit, estimate, owner, first, record.port
                    )
            except DaemonStartError as exc:
                _failed(conn, exc, say)
                return None
            conn.record = new
            ready = replace(ready, note=new.note)
            result = await daemon.measure(new, lambda _msg: None)
    conn.probe = result
    conn.status = replace(ready, tok_s=result.tok_s if result else None, detail="")
    say(conn.status)
    return result


def _quiet(say: StatusReport) -> StatusReport:
    """`say` for a task that may outlive its reader (the app quit while the probe ran)."""

    def tell(status: ServerStatus) -> None:
        try:
            say(status)
        except Exception:  # a gone screen must not fail the probe
            pass

    return tell


def _failed(conn: Connection, error: DaemonStartError, say: StatusReport) -> None:
    conn.status = ServerStatus(state="error", model=conn.status.model, detail=error.message)
    say(conn.status)


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
