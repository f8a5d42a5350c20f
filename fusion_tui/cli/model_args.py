"""Provides how a command takes a model: the top-level `--model` and a command's own MODEL (never
one overwriting the other unseen), the words of their help, and the progress line of a model
being assembled (`launch`, `inspect`, `doctor`, `models`)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from fusion_tui.models.packaged import Progress, progress_words

MODEL_HELP = "a GGUF path, or coder-1.5b, coder-0.5b or smollm2"


class RootModel(argparse.Action):
    """The top-level `--model`: stored as `model`, and once more as `root_model`, so a command
    that also takes a model of its own can tell when both were given (`model_argument`)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        namespace.model = values
        namespace.root_model = values


def add_model_positional(parser: argparse.ArgumentParser, help_text: str) -> None:
    """A command's own optional MODEL. Its default is `SUPPRESS`: argparse copies every default
    of a subcommand over the top-level namespace, so a plain default would overwrite `--model`
    (`fusion-tui --model X launch` launching the default model)."""
    parser.add_argument(
        "model", nargs="?", default=argparse.SUPPRESS, metavar="MODEL", help=help_text
    )


def model_argument(args: argparse.Namespace) -> tuple[str | None, str]:
    """The model a command was given, as its own argument or as the top-level `--model`: (the
    model or None, "") or (None, why) when the two name different models (exit 2): neither one
    is dropped unseen, an accepted flag is never ignored."""
    model = getattr(args, "model", None)
    top = getattr(args, "root_model", None)
    if top and model != top:
        return None, f"two models given: --model {top} and {model}; give one"
    return model, ""


def progress_line(stream: TextIO) -> Progress:
    """A model assembly's progress for a terminal: one line rewritten in place, or on a pipe a
    line at the start, every quarter and the end (a log stays short)."""
    live = stream.isatty()
    shown: set[tuple[str, int]] = set()

    def show(phase: str, done: int, total: int) -> None:
        quarter = done * 4 // total if total else 4
        if live:
            end = "\n" if done >= total else ""
            print(f"\r  {progress_words(phase, done, total)}", end=end, file=stream, flush=True)
        elif (phase, quarter) not in shown:
            shown.add((phase, quarter))
            print(f"  {progress_words(phase, done, total)}", file=stream, flush=True)

    return show
