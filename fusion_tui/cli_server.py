"""Provides the server-facing commands: the app itself, `launch`, `status` and `stop`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import anyio

from fusion_tui.config import Settings
from fusion_tui.endpoints.status import endpoints_json
from fusion_tui.paths import AppPaths
from fusion_tui.runtime import connect, make_daemon
from fusion_tui.server.client import LlamaClient
from fusion_tui.server.errors import ServerError
from fusion_tui.server.probe import model_display_name, ready_line
from fusion_tui.status import ServerStatus


def run(args: argparse.Namespace, settings: Settings, paths: AppPaths) -> int:
    try:
        if args.command is None:
            return run_app(args, settings, paths)
        if args.command == "launch":
            return anyio.run(launch, args, settings, paths)
        if args.command == "status":
            return anyio.run(status, args, settings, paths)
        return anyio.run(stop, settings, paths)
    except ServerError as exc:
        print(f"fusion-tui: {exc}", file=sys.stderr)
        return 1


def run_app(args: argparse.Namespace, settings: Settings, paths: AppPaths) -> int:
    from fusion_tui.agent.tools.workspace import ToolError
    from fusion_tui.chat.agent_backend import AgentBackend
    from fusion_tui.chat.backend import Backend
    from fusion_tui.chat.local import LocalBackend
    from fusion_tui.sessions.store import SessionStoreError
    from fusion_tui.tui.app import build_app
    from fusion_tui.tui.approver import TuiApprover

    workspace = getattr(args, "app_workspace", None)
    backend: Backend
    try:
        if workspace:  # agent mode: each message is an agent task in the workspace
            backend = AgentBackend(settings, paths, workspace, model=args.model, resume=args.resume)
        else:
            backend = LocalBackend(settings, paths, model=args.model, resume=args.resume)
    except (SessionStoreError, ValueError) as exc:
        print(f"fusion-tui: cannot resume: {exc}", file=sys.stderr)
        return 2
    except ToolError as exc:
        print(f"fusion-tui: {exc}", file=sys.stderr)
        return 2
    app = build_app(settings, backend, paths=paths)
    if isinstance(backend, AgentBackend):
        backend.approver = TuiApprover(app)  # writes and commands are asked in a modal
    app.run()
    return 0


async def launch(args: argparse.Namespace, settings: Settings, paths: AppPaths) -> int:
    def say(status: ServerStatus) -> None:
        print(f"  {status.summary()}", file=sys.stderr, flush=True)

    conn = await connect(
        settings, paths, say, model=args.model, parallel=args.parallel, ctx=args.ctx
    )
    await conn.client.aclose()
    if conn.model_note:
        print(conn.model_note, file=sys.stderr)
    assert conn.record is not None
    print(ready_line(conn.record, conn.probe))
    return 0


async def status(args: argparse.Namespace, settings: Settings, paths: AppPaths) -> int:
    daemon = make_daemon(settings, paths)
    record = daemon.current()
    info: dict[str, Any] = {"running": record is not None}
    if record is not None:
        probe = daemon.probe_result(record)
        info.update(
            pid=record.pid,
            url=record.url,
            model_path=record.model_path,
            model=model_display_name(record.model_path),
            parallel=record.parallel,
            ctx=record.ctx,
            n_ctx_slot=record.n_ctx_slot,
            started_at=record.started_at,
            uptime_s=round(time.time() - record.started_at, 1),
            tok_s=probe.tok_s if probe else None,
            kv_estimate_bytes=record.kv_estimate_bytes,
            kv_allocated_bytes=record.kv_allocated_bytes,
            log_path=record.log_path,
        )
        async with LlamaClient(record.url) as client:
            try:
                slots = await client.slots()
                info["slots"] = [
                    {
                        "id": s.id,
                        "is_processing": s.is_processing,
                        "n_ctx": s.n_ctx,
                        "n_prompt_tokens": s.n_prompt_tokens,
                    }
                    for s in slots
                ]
                info["health"] = await client.health()
            except ServerError as exc:
                info["health"] = f"error: {exc}"
    info["endpoints"] = await endpoints_json(
        settings,
        record.url if record is not None else None,
        managed_tok_s=info.get("tok_s"),
    )
    if args.json:
        print(json.dumps(info))
    elif record is None:
        print("no managed llama-server is running (start one with `fusion-tui launch`)")
    else:
        print(ready_line(record, daemon.probe_result(record)).replace("ready", "running", 1))
        print(f"  pid {record.pid} · {record.url} · health {info.get('health')}")
        for s in info.get("slots", []):
            state = "processing" if s["is_processing"] else "idle"
            print(f"  slot {s['id']}: {state}, {s['n_prompt_tokens']:,} / {s['n_ctx']:,} tokens")
        print(f"  log: {record.log_path}")
    if not args.json and (len(info["endpoints"]) > 1 or not info["endpoints"][0]["managed"]):
        for ep in info["endpoints"]:
            state = "healthy" if ep["healthy"] else f"unreachable ({ep['error']})"
            if ep["error"] == "not running":
                state = "not running"
            model = f" · {ep['model']} · {ep['total_slots']} slots" if ep["healthy"] else ""
            where = f"{ep['url']} · " if ep["url"] else ""
            print(f"  endpoint {ep['label']}: {where}{state}{model}")
    return 0


async def stop(settings: Settings, paths: AppPaths) -> int:
    from fusion_tui.chat.warm import save_before_daemon_stop

    daemon = make_daemon(settings, paths)
    if daemon.current() is not None:
        await save_before_daemon_stop(settings, paths)  # sessions resume warm after a restart
    if await daemon.stop():
        print("stopped the managed llama-server")
    else:
        print("no managed llama-server was running")
    return 0
