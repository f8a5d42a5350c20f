"""The closest real paths to one the model got wrong, for the "does not exist" error.

A small model reads an error better than a rule: `src/helo.py does not exist; closest: hello.py,
src/help.py` gets the next call right where a bare "does not exist" got the same call again.
Bounded: at most SCAN_CAP paths are looked at, and `difflib` ranks them.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

SCAN_CAP = 2000
SHOWN = 4
SKIP = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".tox"})


def workspace_paths(root: Path, cap: int = SCAN_CAP) -> list[str]:
    """Relative paths below `root` (directories end in "/"), breadth first, at most `cap`."""
    out: list[str] = []
    queue = [""]
    while queue and len(out) < cap:
        rel = queue.pop(0)
        try:
            with os.scandir(os.path.join(root, rel) if rel else root) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name in SKIP or (entry.name.startswith(".") and entry.is_dir()):
                continue
            path = f"{rel}/{entry.name}" if rel else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            out.append(path + "/" if is_dir else path)
            if is_dir:
                queue.append(path)
            if len(out) >= cap:
                break
    return out


def closest_paths(root: Path, missing: str, n: int = SHOWN) -> list[str]:
    """Up to `n` real paths like `missing`: the same file name first, then difflib's ranking."""
    paths = workspace_paths(root)
    want = missing.strip("/")
    base = os.path.basename(want).lower()
    same_name = [p for p in paths if os.path.basename(p.rstrip("/")).lower() == base]
    ranked = difflib.get_close_matches(want, [p.rstrip("/") for p in paths], n=n, cutoff=0.5)
    by_base = difflib.get_close_matches(
        base, [os.path.basename(p.rstrip("/")) for p in paths], n=n, cutoff=0.6
    )
    from_base = [p for p in paths if os.path.basename(p.rstrip("/")) in by_base]
    picked: list[str] = []
    in_order = [p for r in ranked for p in paths if p.rstrip("/") == r]
    for p in [*same_name, *in_order, *from_base]:
        if p not in picked:
            picked.append(p)
    return picked[:n]


def missing_message(root: Path, rel: str) -> str:
    """`X does not exist; closest: a, b` (or what the top level holds when nothing is close)."""
    close = closest_paths(root, rel)
    if close:
        return f"{rel} does not exist; closest real paths: {', '.join(close)}"
    top = [p for p in workspace_paths(root, cap=200) if "/" not in p.rstrip("/")][:8]
    if top:
        return f"{rel} does not exist; the workspace top level holds: {', '.join(top)}"
    return f"{rel} does not exist; the workspace is empty"
