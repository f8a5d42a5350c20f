"""Provides `fusion-tui config path|show`: where the config file is, and what it says."""

from __future__ import annotations

import argparse
import json

from fusion_tui.cli.common import Context, Subparsers
from fusion_tui.config import load_settings, settings_to_dict


def register(subparsers: Subparsers) -> None:
    config = subparsers.add_parser("config", help="where the config file is, and what it says")
    config.add_argument("action", choices=["path", "show"])


def run(args: argparse.Namespace, ctx: Context) -> int:
    path = ctx.config_file
    if args.action == "path":
        print(path, file=ctx.out)
        return 0
    settings = load_settings(path)
    print(json.dumps(settings_to_dict(settings), indent=2), file=ctx.out)
    return 0
