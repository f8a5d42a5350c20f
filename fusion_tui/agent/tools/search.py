"""find (glob) and grep (regex): walks that never follow links out and never run unbounded."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from typing import Any

import anyio

from fusion_tui.agent.tools import ToolContext, ToolResult
from fusion_tui.agent.tools.files import read_text
from fusion_tui.agent.tools.workspace import ToolError

SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".tox"})
FIND_CAP = 200
GREP_CAP = 100
GREP_MAX_FILES = 5_000
GREP_MAX_FILE_BYTES = 1024 * 1024
GREP_LINE_CHARS = 400
WALK_CAP = 50_000


def _walk(ctx: ToolContext, start: str) -> Iterator[str]:
    """Relative paths of regular files and links under `start`, links to dirs not entered."""
    resolved = ctx.workspace.resolve(start or ".")
    if not resolved.real.is_dir():
        raise ToolError(f"{resolved.rel} is not a directory")
    seen = 0
    for dirpath, dirnames, filenames in os.walk(resolved.real, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            seen += 1
            if seen > WALK_CAP:
                return
            yield ctx.workspace.display(os.path.join(dirpath, name))


def _glob_match(rel: str, pattern: str) -> bool:
    if "/" not in pattern:
        return fnmatch.fnmatch(os.path.basename(rel), pattern)
    pattern = pattern.removeprefix("./")
    if pattern.startswith("**/"):
        return fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(rel, pattern[3:])
    return fnmatch.fnmatch(rel, pattern)


async def find(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    pattern = args["pattern"]

    def work() -> tuple[list[str], bool]:
        hits: list[str] = []
        for rel in _walk(ctx, args.get("path", ".")):
            if _glob_match(rel, pattern):
                hits.append(rel)
                if len(hits) >= FIND_CAP:
                    return hits, True
        return hits, False

    hits, capped = await anyio.to_thread.run_sync(work)
    if not hits:
        return ToolResult(True, f"no files match {pattern!r}")
    more = f"\n… stopped at {FIND_CAP} matches; narrow the pattern" if capped else ""
    return ToolResult(True, "\n".join(hits) + more)


def _subtrees(name: str, av: Any) -> list[Any]:
    """The nested parse trees of one regex node (groups, alternatives, lookarounds)."""
    if name == "SUBPATTERN":
        return [av[-1]]
    if name == "BRANCH":
        return list(av[1])
    if name in ("ASSERT", "ASSERT_NOT"):
        return [av[1]]
    return []


def _nested_repeat(pattern: str) -> bool:
    """True for a repeat inside an unbounded repeat, e.g. `(a+)+`: Python's backtracking engine
    can take exponential time on such a pattern, and a thread running it cannot be stopped."""
    import importlib

    _parser: Any = importlib.import_module("re._parser")  # the stdlib's own parse tree

    def walk(items: Any, inside: bool) -> bool:
        for op, av in items:
            name = str(op)
            if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                _lo, hi, sub = av
                unbounded = hi == _parser.MAXREPEAT or hi > 64
                if inside or walk(sub, unbounded):
                    return True
                continue
            children = _subtrees(name, av)
            if any(walk(child, inside) for child in children):
                return True
        return False

    try:
        return walk(_parser.parse(pattern), False)
    except Exception:  # an unusual tree: refuse rather than risk a hang
        return True


async def grep(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    try:
        rx = re.compile(args["pattern"])
    except re.error as exc:
        raise ToolError(f"bad regex {args['pattern']!r}: {exc}") from None
    if _nested_repeat(args["pattern"]):
        raise ToolError(
            f"regex {args['pattern']!r} nests a repeat inside a repeat, which can take "
            "exponential time; rewrite it without the outer repeat (e.g. `a+` for `(a+)+`)"
        )
    glob = args.get("glob") or ""

    def work() -> tuple[list[str], str]:
        hits: list[str] = []
        files = 0
        for rel in _walk(ctx, args.get("path", ".")):
            if ctx.cancelled():
                return hits, " (cancelled)"
            if glob and not _glob_match(rel, glob):
                continue
            files += 1
            if files > GREP_MAX_FILES:
                return hits, f"\n… stopped after {GREP_MAX_FILES} files; narrow path or glob"
            try:
                full = ctx.workspace.resolve(rel)
                if full.real.stat().st_size > GREP_MAX_FILE_BYTES:
                    continue
                text, _, _ = read_text(ctx, rel)
            except (ToolError, OSError):
                continue  # binary, unreadable, or a link out of the workspace: skip silently
            for n, line in enumerate(text.splitlines(), 1):
                if rx.search(line[:GREP_LINE_CHARS]):
                    hits.append(f"{rel}:{n}: {line[:GREP_LINE_CHARS].strip()}")
                    if len(hits) >= GREP_CAP:
                        return hits, f"\n… stopped at {GREP_CAP} matches; narrow the pattern"
        return hits, ""

    hits, note = await anyio.to_thread.run_sync(work)
    if not hits:
        return ToolResult(True, f"no matches for {args['pattern']!r}{note}")
    return ToolResult(True, "\n".join(hits) + note)
