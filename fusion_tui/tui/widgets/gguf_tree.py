"""Provides `GGUFTree`: a file tree for picking a model, showing folders and `.gguf` files."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from textual.widgets import DirectoryTree


class GGUFTree(DirectoryTree):
    """A file tree that shows folders and `.gguf` files only (no hidden entries)."""

    def filter_paths(self, paths: Iterable[Path]) -> Iterable[Path]:
        return [p for p in paths if not p.name.startswith(".") and _dir_or_gguf(p)]


def _dir_or_gguf(path: Path) -> bool:
    try:
        return path.is_dir() or path.suffix.lower() == ".gguf"
    except OSError:
        return False
