"""Reads a step's reply while the model is still writing it, for the live step in the chat.

A reply is free text (`reply.py`): prose, files in fenced code blocks (a path line above), and
`<tool_call>` blocks. A prefix of it is cut anywhere, so the draft says what is being written at
its end: a file ("writing solution.py", the code so far), a tool call ("calling read_file", its
arguments as far as they can be read: the JSON is cut anywhere too, so `_complete` closes what is
open and tries a few completions), or prose. Never raises.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from fusion_tui.agent.events import DraftKind
from fusion_tui.agent.reply import FENCE, path_of

MAX_CHARS = 64_000
"""Longer drafts are read only in their last MAX_CHARS characters (a display, not a parse)."""
_CLOSE = "</tool_call>"
_NAME = re.compile(r'"(?:name|tool)"\s*:\s*"([^"\\]+)"')


@dataclass(frozen=True)
class Draft:
    """What the end of a reply in progress is."""

    kind: DraftKind = "prose"
    name: str | None = None
    """The file's path or the tool's name, once written whole (None: not yet, or none given)."""
    args: dict[str, Any] = field(default_factory=dict)
    """A call's arguments so far (the last string may be cut short)."""
    body: str = ""
    """What to show: the code written so far, or the prose."""


def read_draft(text: str) -> Draft:
    """What `text`, a reply cut anywhere, is writing at its end."""
    text = text[-MAX_CHARS:]
    opened, closed = text.rfind("<tool_call>"), text.rfind("</tool_call>")
    if opened > closed:
        return _call(text[opened + len("<tool_call>") :])
    block = _open_block(text)
    if block is not None:
        return block
    return Draft("prose", body=text.strip())


def _call(body: str) -> Draft:
    body = body.rstrip()
    for k in range(len(_CLOSE) - 1, 0, -1):  # the closing tag, cut short
        if body.endswith(_CLOSE[:k]):
            body = body[:-k]
            break
    name = _NAME.search(body)
    data = _complete(body.strip())
    args = {}
    if isinstance(data, dict):
        raw = data.get("arguments", data.get("args"))
        if isinstance(raw, dict):
            args = {k: v for k, v in raw.items() if v is not None}
    return Draft("call", name.group(1) if name else None, args)


def _open_block(text: str) -> Draft | None:
    """The fenced block still open at the end of `text`: its path and its code so far."""
    lines = text.split("\n")
    fence: str | None = None
    start = 0
    for i, line in enumerate(lines):
        m = FENCE.match(line)
        if m is None:
            continue
        if fence is None:
            fence, start = m.group(1), i
        elif line.strip() == fence[0] * len(fence):
            fence = None
    if fence is None:
        return None
    m = FENCE.match(lines[start])
    assert m is not None
    path = path_of(m.group(3)) or (path_of(m.group(2)) if "." in m.group(2) else None)
    above = [line for line in lines[:start] if line.strip()]
    if path is None and above:
        path = path_of(above[-1])
    return Draft("file", path, body="\n".join(lines[start + 1 :]))


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
