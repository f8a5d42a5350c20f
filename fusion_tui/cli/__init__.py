"""Provides `main`: the `fusion-tui` command. The TUI by default; headless subcommands for scripts.

Subcommand names, flags and `--json` fields are an interface: scripts depend on them.

One module per command, all of one shape (`common.Command`):

    def register(subparsers) -> None   # add_parser(NAME, ...) and its flags
    def run(args, ctx) -> int          # ctx: common.Context (paths, settings, out, err)

Adding a command is one file: write `fusion_tui/cli/<name>.py` with those two functions and add
it to `COMMANDS` below. The TUI itself is `app.py`, the command that runs when none is named; the
flags before the command (`--model`, `--resume`, `--workspace`) belong to it and are read by
`run` and `serve` too. Nothing here imports Textual until the TUI command runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from fusion_tui import __version__
from fusion_tui.cli import (
    app,
    chat,
    config,
    doctor,
    inspect,
    launch,
    models,
    run,
    serve,
    sessions,
    status,
    stop,
)
from fusion_tui.cli.common import Command, Context
from fusion_tui.cli.shell import QuietBrokenPipe, needs_terminal
from fusion_tui.config import ConfigError
from fusion_tui.paths import AppPaths
from fusion_tui.server.errors import ServerError

COMMANDS: dict[str, Command] = {
    "launch": launch,
    "status": status,
    "stop": stop,
    "config": config,
    "inspect": inspect,
    "sessions": sessions,
    "run": run,
    "chat": chat,
    "serve": serve,
    "doctor": doctor,
    "models": models,
}
"""Subcommands in the order `--help` lists them."""

DEFAULT: Command = app
"""What runs without a subcommand: the TUI."""

NEEDS_NO_SETTINGS = frozenset({"config", "doctor", "models"})
"""Commands that read the config file themselves (they must work when it is broken)."""

ROOT_FLAG_READERS = {
    "--model": (
        "root_model",
        frozenset({None, "launch", "inspect", "run", "chat", "serve", "doctor"}),
    ),
    "--resume": ("resume", frozenset({None})),
    "--workspace": ("app_workspace", frozenset({None, "run"})),
}
"""Which commands read each flag before the command (None: the TUI); given to any other, the
flag is refused rather than silently ignored."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fusion-tui",
        description="Coding sessions with a local llama-server that keep its KV cache warm.",
    )
    parser.add_argument("--version", action="version", version=f"fusion-tui {__version__}")
    app.add_root_arguments(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS.values():
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None, *, paths: AppPaths | None = None) -> int:
    """The command; a reader that goes away (`| head`) ends it quietly, as Unix tools do."""
    with QuietBrokenPipe() as outcome:
        outcome.code = _main(argv, paths)
    return outcome.code


def _main(argv: Sequence[str] | None, paths: AppPaths | None) -> int:
    args = build_parser().parse_args(argv)
    if args.command is None and (refusal := needs_terminal()):
        print(refusal, file=sys.stderr)
        return 2
    if refusal := _unread_root_flag(args):
        print(f"fusion-tui: {refusal}", file=sys.stderr)
        return 2
    ctx = Context(paths or AppPaths.default())
    command = DEFAULT if args.command is None else COMMANDS[args.command]
    try:
        if args.command not in NEEDS_NO_SETTINGS:
            _ = ctx.settings  # a broken config stops every command here, before any work
        return command.run(args, ctx)
    except ConfigError as exc:
        print(f"fusion-tui: config error: {exc}", file=sys.stderr)
        print("The file was left as it is; fix it and run again.", file=sys.stderr)
        return 2
    except ServerError as exc:  # a start failure is one paragraph (what, cause, next step)
        print(f"fusion-tui: {getattr(exc, 'message', '') or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _unread_root_flag(args: argparse.Namespace) -> str:
    """Why a flag before the command cannot be honoured by that command, or ""."""
    for flag, (dest, readers) in ROOT_FLAG_READERS.items():
        if getattr(args, dest, None) is not None and args.command not in readers:
            names = "the app" + "".join(f", `{c}`" for c in sorted(r for r in readers if r))
            return f"{flag} does nothing with `{args.command}` (read by {names}); leave it out"
    return ""
