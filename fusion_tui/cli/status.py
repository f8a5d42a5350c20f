"""Provides `fusion-tui status [--json]`: what the managed server is doing (the `--json` fields
are an interface: running, pid, url, model_path, model, parallel, ctx, n_ctx_slot, started_at,
uptime_s, tok_s, probe_partial, repack_off, note, speculative, threads, kv_estimate_bytes,
kv_allocated_bytes, log_path, slots, health, endpoints; `speculative` is what runs and why:
setting, choice, reason, args, and for `auto` the trial's figures; `threads` is how `threads:
auto` chose `-t`, "" when it did not decide)."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import anyio

from fusion_tui.cli.common import Context, Subparsers
from fusion_tui.endpoints.status import endpoints_json
from fusion_tui.server.connect import make_daemon
from fusion_tui.server.errors import ServerError
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process.probe import model_display_name, ready_line


def register(subparsers: Subparsers) -> None:
    status = subparsers.add_parser("status", help="what the managed server is doing")
    status.add_argument("--json", action="store_true")


def run(args: argparse.Namespace, ctx: Context) -> int:
    return anyio.run(status, args, ctx)


async def status(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.out
    daemon = make_daemon(ctx.settings, ctx.paths)
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
            probe_partial=probe.partial if probe else None,
            repack_off=record.repack_off,
            note=record.note,
            speculative=record.speculative,
            threads=record.threads,
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
        ctx.settings,
        record.url if record is not None else None,
        managed_tok_s=info.get("tok_s"),
    )
    if args.json:
        print(json.dumps(info), file=out)
    elif record is None:
        print("no managed llama-server is running (start one with `fusion-tui launch`)", file=out)
    else:
        print(
            ready_line(record, daemon.probe_result(record)).replace("ready", "running", 1), file=out
        )
        print(f"  pid {record.pid} · {record.url} · health {info.get('health')}", file=out)
        for s in info.get("slots", []):
            state = "processing" if s["is_processing"] else "idle"
            line = f"  slot {s['id']}: {state}, {s['n_prompt_tokens']:,} / {s['n_ctx']:,} tokens"
            print(line, file=out)
        print(f"  log: {record.log_path}", file=out)
    if not args.json and (len(info["endpoints"]) > 1 or not info["endpoints"][0]["managed"]):
        for ep in info["endpoints"]:
            state = "healthy" if ep["healthy"] else f"unreachable ({ep['error']})"
            if ep["error"] == "not running":
                state = "not running"
            model = f" · {ep['model']} · {ep['total_slots']} slots" if ep["healthy"] else ""
            where = f"{ep['url']} · " if ep["url"] else ""
            print(f"  endpoint {ep['label']}: {where}{state}{model}", file=out)
    return 0
