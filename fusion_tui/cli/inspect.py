"""Provides `register` and `run` for `fusion-tui inspect [MODEL]`: header facts, KV estimate,
fitted context, swaFull verdict and prefix-reuse class, as a table or one JSON object. MODEL (or
`--model`) is a GGUF path or a short name; without one, the model a launch would serve."""

from __future__ import annotations

import argparse
import json

from fusion_tui.cli.common import Context, Subparsers, positive
from fusion_tui.cli.model_args import (
    MODEL_HELP,
    add_model_positional,
    model_argument,
    progress_line,
)
from fusion_tui.fit.inspect import format_report, inspect_model
from fusion_tui.fit.kv import CACHE_TYPES, KVConfigError
from fusion_tui.gguf.reader import GGUFError
from fusion_tui.server.connect import ModelNotFound, choose_model, prepare_model

EXIT_BAD_INPUT = 2


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "inspect", help="read a GGUF header and size its KV cache for a launch"
    )
    add_model_positional(p, f"{MODEL_HELP} (or --model; default: the model a launch serves)")
    p.add_argument("--ctx", type=positive, default=None, help="total context (-c); default: fit")
    p.add_argument("--parallel", type=positive, default=1, help="slots (-np)")
    p.add_argument("--ubatch", type=positive, default=512, help="micro-batch (-ub)")
    types = sorted(CACHE_TYPES)
    p.add_argument("--cache-type-k", default="f16", choices=types)
    p.add_argument("--cache-type-v", default="f16", choices=types)
    p.add_argument("--kv-unified", action="store_true", help="one KV pool shared by all slots")
    p.add_argument("--swa-full", default="auto", choices=["auto", "on", "off"])
    p.add_argument("--flash-attn", default="auto", choices=["auto", "on", "off"])
    p.add_argument("--min-ctx", type=positive, default=2048)
    p.add_argument(
        "--draft", metavar="DRAFT.gguf", help="a speculative draft model: its cache is counted too"
    )
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")


def run(args: argparse.Namespace, ctx: Context) -> int:
    named, clash = model_argument(args)
    if clash:
        print(f"fusion-tui inspect: {clash}", file=ctx.err)
        return EXIT_BAD_INPUT
    try:
        choice = choose_model(ctx.settings, named)
        model = prepare_model(choice, progress_line(ctx.err))
    except ModelNotFound as exc:
        print(f"fusion-tui inspect: {exc.message}", file=ctx.err)
        return EXIT_BAD_INPUT
    try:
        report = inspect_model(
            model,
            ctx=args.ctx,
            parallel=args.parallel,
            ubatch=args.ubatch,
            type_k=args.cache_type_k,
            type_v=args.cache_type_v,
            kv_unified=args.kv_unified,
            swa_full_mode=args.swa_full,
            flash_attn=args.flash_attn,
            min_ctx=args.min_ctx,
            draft_model=args.draft,
        )
    except (GGUFError, KVConfigError) as exc:
        print(f"fusion-tui inspect: {named or model}: {exc}", file=ctx.err)
        return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps(report, indent=2), file=ctx.out)
    else:
        print(format_report(report), file=ctx.out)
    return 0
