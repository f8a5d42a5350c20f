"""Provides the TUI command: `fusion-tui [--model M] [--resume [ID]] [--workspace DIR]`.

It runs when no subcommand is named. Its flags come before any subcommand (`run` and `serve`
read `--model`, and `run` falls back to `--workspace`). Textual is imported only here, when the
app starts, so the headless commands never load it.
"""

from __future__ import annotations

import argparse

from fusion_tui.cli.common import Context, Subparsers
from fusion_tui.cli.model_args import MODEL_HELP, RootModel


def add_root_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        action=RootModel,
        help=f"what to serve: {MODEL_HELP} (default: config, else coder-1.5b when installed, "
        "else the demo model)",
    )
    parser.add_argument(
        "--resume", nargs="?", const="", metavar="ID", help="resume a session (the last one)"
    )
    parser.add_argument(  # agent mode (fusion_tui.chat.agent_backend)
        "--workspace",
        dest="app_workspace",
        metavar="DIR",
        help="agent mode: each message runs a coding-agent task in this folder",
    )


def register(subparsers: Subparsers) -> None:
    """Nothing to add: the TUI is the default command and its flags are the root's."""


def run(args: argparse.Namespace, ctx: Context) -> int:
    from fusion_tui.agent.tools.workspace import ToolError
    from fusion_tui.sessions.store import SessionStoreError
    from fusion_tui.tui.app import build_app

    try:  # agent mode with --workspace: each message is an agent task in the workspace
        app = build_app(
            ctx.settings, paths=ctx.paths, workspace=getattr(args, "app_workspace", None),
            model=args.model, resume=args.resume,
        )  # fmt: skip
    except (SessionStoreError, ValueError) as exc:
        print(f"fusion-tui: cannot resume: {exc}", file=ctx.err)
        return 2
    except ToolError as exc:
        print(f"fusion-tui: {exc}", file=ctx.err)
        return 2
    app.run()
    return 0
