"""Provides `fusion-tui launch [MODEL] [--parallel N] [--ctx N]`: start the managed llama-server
headless, print its ready line and exit (the server keeps running). MODEL, or the top-level
`--model`, is a GGUF path or a short name (`coder-1.5b`, `coder-0.5b`, `smollm2`)."""

from __future__ import annotations

import argparse

import anyio

from fusion_tui.cli.common import Context, Subparsers
from fusion_tui.cli.model_args import MODEL_HELP, add_model_positional, model_argument
from fusion_tui.server.connect import connect
from fusion_tui.server.process.probe import ready_line
from fusion_tui.status import ServerStatus


def register(subparsers: Subparsers) -> None:
    launch = subparsers.add_parser(
        "launch", help="start the managed llama-server headless and exit"
    )
    add_model_positional(launch, f"what to serve: {MODEL_HELP} (or --model; default: config)")
    launch.add_argument("--parallel", type=int, help="slots (-np)")
    launch.add_argument("--ctx", type=int, help="total context (-c); default: fitted to memory")


def run(args: argparse.Namespace, ctx: Context) -> int:
    return anyio.run(launch, args, ctx)


async def launch(args: argparse.Namespace, ctx: Context) -> int:
    model, clash = model_argument(args)
    if clash:
        print(f"fusion-tui launch: {clash}", file=ctx.err)
        return 2

    def say(status: ServerStatus) -> None:
        print(f"  {status.summary()}", file=ctx.err, flush=True)

    conn = await connect(
        ctx.settings,
        ctx.paths,
        say,
        model=model,
        parallel=args.parallel,
        ctx=args.ctx,
        detached=True,
    )
    if conn.probe_pending is not None:
        await conn.probe_pending  # the ready line carries the measured tok/s
    await conn.client.aclose()
    if conn.status.state == "error":  # the server died at its first computation
        print(f"fusion-tui: {conn.status.detail}", file=ctx.err)
        return 1
    if conn.model_note:
        print(conn.model_note, file=ctx.err)
    assert conn.record is not None
    print(ready_line(conn.record, conn.probe), file=ctx.out)
    return 0
