"""What a small model needs to name real paths: the workspace's top-level files and examples.

A 135M model copies whatever the prompt shows; with only `read_file(path)` it invented
`path_to_file` on every call. So the system message of a task carries the workspace's top-level
entries (bounded in count and bytes) and example actions built from those real names.

Computed once per task (`loop._Run`): it is part of the cached prefix, so it must stay byte-stable
across the task's steps. Names only, sorted, no sizes or times: a session's next task gets the
same bytes unless a top-level entry was added or removed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from fusion_tui.agent.tools.workspace import Workspace

MAX_ENTRIES = 40
MAX_BYTES = 1200
SCAN_CAP = 2000
"""Directory entries looked at, at most (a huge top level is listed in part)."""
HIDDEN_DIRS = frozenset({"node_modules", "__pycache__"})
TEXT_SUFFIXES = (".py", ".md", ".txt", ".toml", ".json", ".js", ".ts", ".rs", ".go", ".c", ".sh")


@dataclass(frozen=True)
class TopLevel:
    files: tuple[str, ...]
    dirs: tuple[str, ...]
    more: int = 0
    """Entries left out by the bounds."""


def top_level(workspace: Workspace) -> TopLevel:
    """The root's visible entries, sorted, within MAX_ENTRIES and MAX_BYTES."""
    files: list[str] = []
    dirs: list[str] = []
    seen = 0
    try:
        with os.scandir(workspace.root) as it:
            for entry in it:
                seen += 1
                if seen > SCAN_CAP:
                    break
                name = entry.name
                if name.startswith(".") or name in HIDDEN_DIRS or "\n" in name:
                    continue
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                (dirs if is_dir else files).append(name)
    except OSError:
        return TopLevel((), ())
    files.sort(key=str.lower)
    dirs.sort(key=str.lower)
    kept_f: list[str] = []
    kept_d: list[str] = []
    used = 0
    for name, kept, shown in [(d, kept_d, d + "/") for d in dirs] + [(f, kept_f, f) for f in files]:
        if len(kept_f) + len(kept_d) >= MAX_ENTRIES or used + len(shown) + 1 > MAX_BYTES:
            break
        kept.append(name)
        used += len(shown.encode()) + 1
    more = len(files) + len(dirs) - len(kept_f) - len(kept_d) + max(0, seen - SCAN_CAP)
    return TopLevel(tuple(kept_f), tuple(kept_d), more)


def _example_file(top: TopLevel) -> str | None:
    for suffix in TEXT_SUFFIXES:
        for name in top.files:
            if name.lower().endswith(suffix):
                return name
    return top.files[0] if top.files else None


def _act(tool: str, **args: object) -> str:
    return json.dumps({"tool": tool, "args": args}, ensure_ascii=False)


def render(top: TopLevel) -> str:
    """The `### workspace files` and `### examples` sections of a task's system message."""
    names = [d + "/" for d in top.dirs] + list(top.files)
    listing = "\n".join(names) if names else "(the workspace is empty)"
    if top.more:
        listing += f"\n… {top.more} more entries (use list_dir or find)"
    lines = ["### workspace files (top level)", listing, "", "### examples (real paths)"]
    example = _example_file(top)
    if example is not None:
        lines.append(f"read {example}: " + _act("read_file", path=example))
    lines.append("list the workspace: " + _act("list_dir"))
    if top.dirs:
        lines.append(f"list {top.dirs[0]}/: " + _act("list_dir", path=top.dirs[0]))
    if example is not None and "." in example:
        suffix = example.rsplit(".", 1)[1]
        lines.append(f"find .{suffix} files: " + _act("find", pattern=f"*.{suffix}"))
        lines.append(
            f"change {example} (copy `search` exactly from read_file): "
            + _act("edit_file", path=example, search="old line", replace="new line")
        )
    lines.append("read_file takes a file; list_dir takes a folder (never a file).")
    return "\n".join(lines)


def task_prefix(stable_prefix: str, workspace: Workspace) -> str:
    """The daemon's stable prefix plus this workspace's facts: one task's system message."""
    return stable_prefix + "\n\n" + render(top_level(workspace))
