"""Provides `fusion-tui serve`: the same app in a browser, through textual-serve (optional extra).

Bound to 127.0.0.1 unless told otherwise: the app drives a server that can run shell commands
in your workspace, so exposing it is a decision, not a default.
"""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys

from fusion_tui.cli.common import Context, Subparsers


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="run the app in a browser (needs the `serve` extra: textual-serve)"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000)


def command_line(args: argparse.Namespace) -> str:
    """The command textual-serve runs for each browser session: this same app."""
    parts = [sys.executable, "-m", "fusion_tui"]
    if getattr(args, "model", None):
        parts += ["--model", args.model]
    return shlex.join(parts)


def run(args: argparse.Namespace, ctx: Context) -> int:
    try:  # the optional `serve` extra; imported only when this command runs
        server_module = importlib.import_module("textual_serve.server")
    except ImportError:
        print(
            "fusion-tui serve needs textual-serve: pip install 'fusion-tui[serve]'",
            file=sys.stderr,
        )
        return 2
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: serving on {args.host}, reachable from other machines", file=sys.stderr)
    server = server_module.Server(
        command_line(args), host=args.host, port=args.port, title="fusion-tui"
    )
    server.serve()
    return 0
