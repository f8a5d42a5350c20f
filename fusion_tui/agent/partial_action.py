"""Reads a step's action while the model is still writing it: lenient parsing of partial JSON.

The grammar makes every reply `{"tool": NAME, "args": {...}}`, so a prefix of it is JSON cut
anywhere: inside a string, after a key, after a colon or a comma, in the middle of `true`.
`parse_partial` closes what is open and tries a few completions, so the UI can show the tool name
and the arguments as they arrive ("edit_file(path=util.py, replace=def add(…").
Never raises; a prefix it cannot read yields no tool and no arguments.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

MAX_CHARS = 64_000
"""Longer drafts are read only in their first MAX_CHARS characters (a display, not a parse)."""


@dataclass(frozen=True)
class PartialAction:
    tool: str | None = None
    """The tool name, once the model has written it completely."""
    args: dict[str, Any] = field(default_factory=dict)
    """The arguments so far; the last string may be cut short."""

    @property
    def summary(self) -> str | None:
        """The finish summary so far (None for other tools)."""
        value = self.args.get("summary")
        return value if self.tool == "finish" and isinstance(value, str) else None


def _scan(text: str) -> tuple[list[str], bool, bool]:
    """(open brackets, inside a string, the string's last char is an escape backslash)."""
    stack: list[str] = []
    in_str = escaped = False
    for ch in text:
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
    return stack, in_str, escaped


def _complete(text: str) -> Any:
    """The JSON value `text` is a prefix of, completed as little as possible; None if none."""
    stack, in_str, escaped = _scan(text)
    closers = "".join(reversed(stack))
    if in_str:
        body = text[:-1] if escaped else text
        cut = body.rfind("\\u")  # a \u escape cut short
        if cut >= 0 and len(body) - cut < 6:
            body = body[:cut]
        heads = [body + '"']
    else:
        heads = [text.rstrip()]
    candidates = []
    for head in heads:
        candidates += [head, head + ": null", head + "null"]
        stripped = head.rstrip().rstrip(",:").rstrip()
        candidates.append(stripped)
        for sep in (",", "{", "["):  # a cut literal or number: drop back to the last boundary
            i = head.rfind(sep)
            if i >= 0:
                candidates.append(head[: i + (sep != ",")])
    for cand in candidates:
        try:
            return json.loads(cand + closers)
        except ValueError:
            continue
    return None


def parse_partial(text: str) -> PartialAction:
    """The action in a (possibly unfinished) reply, as far as it can be read."""
    data = _complete(text[:MAX_CHARS].strip())
    if not isinstance(data, dict):
        return PartialAction()
    tool = data.get("tool")
    args = data.get("args")
    tool_done = isinstance(tool, str) and _tool_closed(text, tool)
    shown = {k: v for k, v in args.items() if v is not None} if isinstance(args, dict) else {}
    return PartialAction(tool if tool_done else None, shown)


def _tool_closed(text: str, tool: str) -> bool:
    """The tool name's closing quote has been written (a cut name is not a name yet)."""
    needle = json.dumps(tool)
    at = text.find('"tool"')
    return at >= 0 and needle in text[at + 6 :]
