"""Provides `ToolCallBlock`: one agent tool call in the chat, as a collapsible block.

The title says what ran, whether it worked and how long it took; the body holds the arguments,
the result the model saw, and (for writes and shell calls) the diff or the full command. A block
with a diff starts expanded, since that is what the user wants to check; the others start folded.
"""

from __future__ import annotations

import json

from rich.text import Text
from textual.markup import escape
from textual.widgets import Collapsible, Static

from fusion_tui.chat.events import ToolBlock

RESULT_LINES = 40
"""Lines of a result shown in the block (the rest is summarized; the model saw it all)."""


def format_duration(ms: float) -> str:
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.1f} s"


def short_args(args: dict[str, object], width: int = 48) -> str:
    """`path=src/app.py, start_line=3`: the arguments on one line, cut to `width`."""
    parts = []
    for key, value in args.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{key}={' '.join(str(shown).split())}")
    line = ", ".join(parts)
    return line if len(line) <= width else line[: width - 1] + "…"


def block_title(block: ToolBlock) -> str:
    mark = "✓" if block.ok else "✗"
    tail = block.note or format_duration(block.duration_ms)
    return f"{mark} {block.name}({short_args(block.args)}) · {tail}"


def capped(text: str, lines: int = RESULT_LINES) -> str:
    rows = text.splitlines()
    if len(rows) <= lines:
        return text.rstrip("\n") or "(empty)"
    return "\n".join(rows[:lines]) + f"\n… {len(rows) - lines} more line(s)"


def diff_text(diff: str) -> Text:
    """A unified diff with added lines green, removed lines red, hunk headers dim."""
    out = Text()
    for row in diff.rstrip("\n").splitlines():
        if row.startswith(("+++", "---")):
            style = "bold"
        elif row.startswith("+"):
            style = "green"
        elif row.startswith("-"):
            style = "red"
        elif row.startswith("@@"):
            style = "cyan"
        else:
            style = ""
        out.append(row + "\n", style=style)
    out.rstrip()
    return out


class ToolCallBlock(Collapsible):
    """A tool call block: title line, then arguments, result and diff when expanded."""

    DEFAULT_CSS = """
    ToolCallBlock {
        height: auto;
        margin: 0 1 1 1;
        padding: 0 0 0 1;
        background: $surface;
        border-top: none;
        border-left: outer $success 60%;
    }
    ToolCallBlock.-failed { border-left: outer $error 70%; }
    ToolCallBlock .tool-heading { color: $text-muted; text-style: bold; }
    ToolCallBlock .tool-body { color: $text; margin: 0 0 1 0; }
    ToolCallBlock .tool-body.-last { margin: 0; }
    """

    def __init__(self, block: ToolBlock, *, collapsed: bool | None = None) -> None:
        self.block = block
        fold = not block.diff if collapsed is None else collapsed
        args = json.dumps(block.args, ensure_ascii=False, indent=1) if block.args else "(none)"
        children: list[Static] = [
            Static("arguments", classes="tool-heading"),
            Static(args, classes="tool-body", markup=False),
            Static("result", classes="tool-heading"),
            Static(capped(block.result), classes="tool-body", markup=False),
        ]
        if block.diff:
            heading = "command" if block.name == "run_shell" else "diff"
            body = block.diff if heading == "command" else diff_text(block.diff)
            children += [Static(heading, classes="tool-heading"), Static(body, classes="tool-body")]
        children[-1].add_class("-last")
        super().__init__(
            *children,
            title=escape(block_title(block)),
            collapsed=fold,
            classes="" if block.ok else "-failed",
        )
