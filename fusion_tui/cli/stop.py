"""Provides `fusion-tui stop`: save every session's slot, then stop the managed llama-server.

Only the managed server on this machine is ever stopped; with remote endpoints configured
the line says they were left running."""

from __future__ import annotations

import argparse

import anyio

from fusion_tui.cli.common import Context, Subparsers
from fusion_tui.endpoints.model import not_stopped, remote_labels
from fusion_tui.server.connect import make_daemon
from fusion_tui.slots.saving import save_before_daemon_stop


def register(subparsers: Subparsers) -> None:
    subparsers.add_parser("stop", help="stop the managed llama-server")


def run(args: argparse.Namespace, ctx: Context) -> int:
    return anyio.run(stop, ctx)


async def stop(ctx: Context) -> int:
    daemon = make_daemon(ctx.settings, ctx.paths)
    if daemon.current() is not None:
        await save_before_daemon_stop(ctx.settings, ctx.paths)  # sessions resume warm after
    stopped = await daemon.stop()
    said = "stopped the managed llama-server" if stopped else "no managed llama-server was running"
    remote = remote_labels(ctx.settings)  # only the managed server here is stopped
    print(f"{said}; {not_stopped(remote)}" if remote else said, file=ctx.out)
    return 0
