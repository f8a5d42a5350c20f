"""Provides what every command module shares: the `Context` a command runs in, the `Command`
shape, and the argument helpers (one copy each)."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol, TextIO

from fusion_tui.config import Settings, load_settings
from fusion_tui.config.loader import config_path
from fusion_tui.paths import AppPaths

Subparsers = Any
"""The object `ArgumentParser.add_subparsers()` returns (argparse keeps its type private)."""


class Command(Protocol):
    """A command module: `register` adds its parser, `run` does the work and returns the exit
    code (0 done, 1 failed, 2 bad input)."""

    def register(self, subparsers: Subparsers) -> None: ...

    def run(self, args: argparse.Namespace, ctx: Context) -> int: ...


@dataclass
class Context:
    """Where a command runs: the app's folders, its settings (read on first use), and the
    streams it writes to (tests pass their own)."""

    paths: AppPaths
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)

    @property
    def config_file(self) -> Path:
        return config_path(self.paths.config_file, os.environ)

    @cached_property
    def settings(self) -> Settings:
        """The config file's settings (`ConfigError`: main says where and exits 2)."""
        return load_settings(self.config_file)


def non_negative(text: str) -> int:
    """An argparse `type=` for a whole number of at least 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def positive(text: str) -> int:
    """An argparse `type=` for a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value
