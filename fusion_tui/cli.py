"""Provides `main`: the `fusion-tui` command. The TUI by default; headless subcommands for scripts.

Subcommand names, flags and `--json` fields are an interface: scripts depend on them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from fusion_tui import __version__
from fusion_tui.config import ConfigError, Settings, load_settings, settings_to_dict
from fusion_tui.config.loader import config_path
from fusion_tui.paths import AppPaths


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fusion-tui",
        description="Coding sessions with a local llama-server that keep its KV cache warm.",
    )
    parser.add_argument("--version", action="version", version=f"fusion-tui {__version__}")
    parser.add_argument("--model", help="GGUF to serve (default: config, else the demo model)")
    parser.add_argument(
        "--resume", nargs="?", const="", metavar="ID", help="resume a session (the last one)"
    )
    parser.add_argument(  # agent mode (fusion_tui.chat.agent_backend)
        "--workspace",
        dest="app_workspace",
        metavar="DIR",
        help="agent mode: each message runs a coding-agent task in this folder",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    launch = sub.add_parser("launch", help="start the managed llama-server headless and exit")
    launch.add_argument("model", nargs="?", help="GGUF to serve")
    launch.add_argument("--parallel", type=int, help="slots (-np)")
    launch.add_argument("--ctx", type=int, help="total context (-c); default: fitted to memory")

    status = sub.add_parser("status", help="what the managed server is doing")
    status.add_argument("--json", action="store_true")

    sub.add_parser("stop", help="stop the managed llama-server")

    config = sub.add_parser("config", help="where the config file is, and what it says")
    config.add_argument("action", choices=["path", "show"])

    for name in ("inspect", "sessions", "run", "serve", "doctor"):
        module = _subcommand_module(name)
        if module is not None:
            module.register(sub)
    return parser


def _subcommand_module(name: str) -> Any:
    """Subcommands that live beside the feature they drive (`cli_inspect.py`, ...)."""
    import importlib

    try:
        return importlib.import_module(f"fusion_tui.cli_{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"fusion_tui.cli_{name}":
            return None
        raise


def load(paths: AppPaths) -> Settings:
    return load_settings(config_path(paths.config_file, os.environ))


def main(argv: Sequence[str] | None = None) -> int:
    """The command; a reader that goes away (`| head`) ends it quietly, as Unix tools do."""
    from fusion_tui.cli_shell import QuietBrokenPipe

    with QuietBrokenPipe() as outcome:
        outcome.code = _main(argv)
    return outcome.code


def _main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    paths = AppPaths.default()
    try:
        if args.command is None:
            from fusion_tui.cli_shell import needs_terminal

            refusal = needs_terminal()
            if refusal:
                print(refusal, file=sys.stderr)
                return 2
        if args.command == "config":
            return config_command(args, paths)
        if args.command == "doctor":  # reads the config itself: a bad file is one of its checks
            return int(_subcommand_module("doctor").run(args, paths))
        settings = load(paths)
        if args.command in (None, "launch", "status", "stop"):
            from fusion_tui import cli_server

            return cli_server.run(args, settings, paths)
        module = _subcommand_module(args.command)
        if args.command == "sessions":
            return int(module.run(args, paths=paths))
        if args.command == "inspect":
            return int(module.run(args))
        return int(module.run(args, settings, paths))
    except ConfigError as exc:
        print(f"fusion-tui: config error: {exc}", file=sys.stderr)
        print("The file was left as it is; fix it and run again.", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def config_command(args: argparse.Namespace, paths: AppPaths) -> int:
    path = config_path(paths.config_file, os.environ)
    if args.action == "path":
        print(path)
        return 0
    settings = load_settings(path)
    print(json.dumps(settings_to_dict(settings), indent=2))
    return 0
