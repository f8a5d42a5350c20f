"""Provides `fusion-tui stop`: save every session's slot, then stop the managed llama-server."""

from __future__ import annotations

import argparse

import anyio

from fusion_tui.chat.warm import save_before_daemon_stop
from fusion_tui.cli.common import Context, Subparsers
from fusion_tui.runtime import make_daemon


def register(subparsers: Subparsers) -> None:
    subparsers.add_parser("stop", help="stop the managed llama-server")


def run(args: argparse.Namespace, ctx: Context) -> int:
    return anyio.run(stop, ctx)


async def stop(ctx: Context) -> int:
    daemon = make_daemon(ctx.settings, ctx.paths)
    if daemon.current() is not None:
        await save_before_daemon_stop(ctx.settings, ctx.paths)  # sessions resume warm after
    if await daemon.stop():
        print("stopped the managed llama-server", file=ctx.out)
    else:
        print("no managed llama-server was running", file=ctx.out)
    return 0
