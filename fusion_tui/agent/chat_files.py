"""The files a task is about, put in front of the model in its first message (as aider does).

Why: a model that must call `read_file` before it can change a file often does not (it wrote a
new file blind, with an invented signature), and every read is a round trip that costs a full
step. So the task's first message carries the files it names — by path, or by a base name that
is unique in the workspace — and, in a small workspace, every source file. The rest of the
workspace is listed by name, so the model can ask for more with a tool.

The files are read once per task, in the task's user message (not the system message), so the
system prompt stays the same bytes for every task of every workspace and its cache is shared.
A long Python file is shown in part when the task or the failing tests name some of its
definitions (`file_view.py`): a small model gives back what it is shown. A long test file is
shown in part too, some of its tests in full and the rest by name (`test_view.py`): it is read
before the first token.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fusion_tui.agent.checks import failing_tests, is_test_file, own_frames
from fusion_tui.agent.file_view import (
    FileView,
    foreign_modules,
    in_part,
    without_uses,
    words_of,
    words_of_tests,
)
from fusion_tui.agent.test_view import part_of_tests
from fusion_tui.agent.tools.workspace import ToolError, Workspace

SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache",
     ".pytest_cache", ".ruff_cache", "dist", "build", ".tox", ".idea", ".vscode"}
)  # fmt: skip
SOURCE_SUFFIXES = (
    ".py", ".pyi", ".js", ".ts", ".tsx", ".jsx", ".rs", ".go", ".c", ".h", ".cc", ".cpp", ".hpp",
    ".java", ".kt", ".rb", ".php", ".sh", ".lua", ".swift", ".cs", ".toml", ".cfg", ".ini",
    ".md", ".txt", ".json", ".yaml", ".yml", ".html", ".css", ".sql",
)  # fmt: skip
MAX_LISTED = 400
"""Files walked at most; a bigger workspace is listed in part."""
SMALL_WORKSPACE_FILES = 12
SMALL_WORKSPACE_CHARS = 24_000
"""A workspace with at most this many source files and characters goes into the chat whole."""
LANGS = {
    ".py": "python", ".js": "javascript", ".ts": "typescript", ".rs": "rust", ".go": "go",
    ".sh": "bash", ".c": "c", ".cpp": "cpp", ".java": "java", ".rb": "ruby", ".json": "json",
    ".toml": "toml", ".yaml": "yaml", ".yml": "yaml", ".md": "markdown",
}  # fmt: skip

ReadText = Callable[[str], str]
"""Reads a workspace file's text (bounded, refusing binaries: `ToolError`)."""


def workspace_files(workspace: Workspace, limit: int = MAX_LISTED) -> list[str]:
    """The workspace's files (relative paths, sorted), hidden and tool folders left out."""
    found: list[str] = []
    for top, dirs, files in os.walk(workspace.root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        rel = os.path.relpath(top, workspace.root)
        for name in sorted(files):
            if name.startswith(".") or "\n" in name:
                continue
            found.append(name if rel == "." else f"{rel}/{name}")
            if len(found) >= limit:
                return found
    return found


def _path_words(task: str) -> set[str]:
    words = set(re.findall(r"[\w./\-]+", task))
    return words | {w.rstrip(".,:;") for w in words}


def named_unlisted(task: str, files: list[str]) -> list[str]:
    """Relative paths the task names that the walk left out (a hidden folder such as `.docs/`,
    or a tool folder): a file the user names is one they want the model to see."""
    return sorted(
        w for w in _path_words(task)
        if "/" in w and "." in w.rsplit("/", 1)[-1] and w not in files
        and not w.startswith(("/", "../")) and "/../" not in w
    )  # fmt: skip


def fix_target(task: str, shown: list[str]) -> str | None:
    """The one file shown with a task that a fix goes to: the one that is not a test, or else
    the one such file the task names; None when that is not one file."""
    code = [p for p in shown if not is_test_file(p)]
    if len(code) == 1:
        return code[0]
    named = [p for p in named_in(task, shown) if p in code]
    return named[0] if len(named) == 1 else None


def named_in(task: str, files: list[str]) -> list[str]:
    """Files the task names: by relative path, or by a base name only one file has."""
    words = _path_words(task)
    by_base: dict[str, list[str]] = {}
    for f in files:
        by_base.setdefault(f.rsplit("/", 1)[-1], []).append(f)
    picked = [f for f in files if f in words]
    for w in sorted(words):
        same = by_base.get(w, [])
        if len(same) == 1 and same[0] not in picked:
            picked.append(same[0])
    return picked


def file_block(path: str, text: str) -> str:
    """A file as the chat shows it: its path, then its text in a fenced block."""
    lang = LANGS.get(os.path.splitext(path)[1], "")
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{path}\n```{lang}\n{body}```"


@dataclass(frozen=True)
class ChatFiles:
    """What the task's first message shows: files with their text, and the other files' names."""

    shown: dict[str, str]
    others: list[str]
    held: tuple[str, ...] = ()
    """Files the chat already shows above, unchanged since: named, not shown again."""
    views: dict[str, FileView] = field(default_factory=dict)
    """Long Python files shown in part (`file_view.in_part`): path → what was shown."""
    test_parts: dict[str, str] = field(default_factory=dict)
    """Long test files shown in part (`test_view.part_of_tests`): path → the text shown.
    Nothing is written through them: the tests are not the code to change."""

    def without(self, held: list[str]) -> ChatFiles:
        """These files left out of the text: the session's history already holds them as
        they are, and showing them again on every task would grow the prompt by their size."""
        shown = {p: t for p, t in self.shown.items() if p not in held}
        return ChatFiles(shown, self.others, tuple(held), self.views, self.test_parts)

    def block(self, path: str) -> str:
        """The file as the chat shows it: whole, or in part."""
        view = self.views.get(path)
        text = self.shown[path] if view is None else view.text
        return file_block(path, self.test_parts.get(path, text))

    def render(self) -> str:
        parts: list[str] = []
        if self.shown:
            parts.append("Files in the workspace that you may change:")
            parts.extend(self.block(path) for path in self.shown)
        if self.held:
            parts.append("Shown earlier in this chat, unchanged since: " + ", ".join(self.held))
        if self.others:
            parts.append("Other files (ask for one with read_file):\n" + "\n".join(self.others))
        return "\n\n".join(parts)


def view_of(path: str, text: str, words: set[str] | None) -> FileView | None:
    """A long Python file that is not a test, shown in part: the definitions `words` name (the
    task's, the failing tests') in full, the others by name (`file_view.py`); None: whole."""
    if words is None or not path.endswith(".py") or is_test_file(path):
        return None
    return in_part(text, words)


def choose(
    task: str,
    files: list[str],
    read: ReadText,
    budget_chars: int,
    words: set[str] | None = None,
    failed: str = "",
) -> ChatFiles:
    """The files for the task's first message, within `budget_chars` of text; with `words`
    (the task's), long files shown in part (`view_of`), at the size of the part, chosen by the
    words of the test files shown and of `failed`, the output of a test run that failed before
    the first step: of its failing tests only, when it names them, and of the workspace's own
    frames, less what the tests use of modules from elsewhere (`real.split(quote(s))` in a
    frame's source line named the copy's `split`)."""
    sources = [f for f in files if f.lower().endswith(SOURCE_SUFFIXES)]
    wanted = named_in(task, files)
    texts: dict[str, str] = {}
    views: dict[str, FileView] = {}
    test_parts: dict[str, str] = {}
    failing = failing_tests(failed)

    def text_of(path: str) -> str | None:
        if path not in texts:
            try:
                texts[path] = read(path)
            except (ToolError, OSError):
                return None
        return texts[path]

    def size_of(path: str) -> int | None:
        """The characters the file takes in the chat (None: it cannot be read)."""
        text = text_of(path)
        if text is None:
            return None
        if path not in views and (view := view_of(path, text, words)) is not None:
            views[path] = view
        if is_test_file(path) and path.endswith(".py") and path not in test_parts:
            test_parts[path] = part_of_tests(text, failing) or text
        if path in views:
            return len(views[path].text)
        return len(test_parts.get(path, text))

    small = len(sources) <= SMALL_WORKSPACE_FILES
    if words is not None:  # what the tests shown use is what the task is about
        tests = [p for p in (sources if small else wanted) if is_test_file(p)]
        local = {n.removesuffix(".py") for f in files if f.endswith(".py") for n in (
            Path(f).name, Path(f).parts[0])}  # fmt: skip
        test_texts = [t for t in map(text_of, tests) if t]
        foreign = set().union(*(foreign_modules(t, local) for t in test_texts))
        words = words.union(
            words_of(without_uses(own_frames(failed), foreign)),
            *(words_of_tests(t, local, failing) for t in test_texts),
        )
    if small:
        total = sum(n for n in map(size_of, sources) if n is not None)
        if total <= min(SMALL_WORKSPACE_CHARS, budget_chars):
            wanted += [f for f in sources if f not in wanted]
    shown: dict[str, str] = {}
    used = 0
    for path in wanted:
        size = size_of(path)
        if size is None or used + size > budget_chars:
            continue
        shown[path] = texts[path]
        used += size
    others = [f for f in files if f not in shown]
    parts = {p: t for p, t in test_parts.items() if p in shown and t != texts[p]}
    return ChatFiles(shown, others, views={p: v for p, v in views.items() if p in shown},
                     test_parts=parts)  # fmt: skip
