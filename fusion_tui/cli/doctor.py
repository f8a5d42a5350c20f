"""Provides `fusion-tui doctor [--json] [--no-start]`: what works on this machine, and the fix for
what does not (the checks live in `doctor_checks.py`, the one-token start in `doctor_start.py`).

Exit 0 only when everything needed works; `--json` prints a list of
`{"name", "ok", "detail", "fix"}` objects.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import anyio

from fusion_tui.cli.common import Context, Subparsers
from fusion_tui.cli.doctor_checks import format_checks, passed, run_checks
from fusion_tui.cli.model_args import progress_line
from fusion_tui.models.packaged import Progress
from fusion_tui.paths import AppPaths


def register(sub: Subparsers) -> None:
    p = sub.add_parser("doctor", help="check this machine: server binary, CPU, model, config...")
    p.add_argument("--json", action="store_true", help="a JSON list of checks on stdout")
    p.add_argument(
        "--no-start", action="store_true", help="skip the one-token start of llama-server"
    )


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Reads the config itself: a file that does not parse is one of its checks."""
    model = getattr(args, "model", None)
    checks = anyio.run(_checks, ctx.paths, model, progress_line(ctx.err), not args.no_start)
    if args.json:
        print(json.dumps([c.to_json() for c in checks], ensure_ascii=False, indent=1), file=ctx.out)
    else:
        print(format_checks(checks), file=ctx.out)
    return 0 if passed(checks) else 1


async def _checks(paths: AppPaths, model: str | None, progress: Progress, start: bool) -> list[Any]:
    return await run_checks(paths, os.environ, model=model, progress=progress, start=start)
