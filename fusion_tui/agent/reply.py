"""Reads a model's reply: tool calls in the model's own format, and file edits in code blocks.

Why this format: a coder model such as Qwen2.5-Coder was trained to call tools as
`<tool_call>{"name": ..., "arguments": ...}</tool_call>` and to write code in fenced blocks. Code
squeezed into a JSON string has to be escaped (a small model escapes it twice, or not at all) and
a grammar over a 150k-token vocabulary slows decoding; a fenced block needs neither. So a reply is
free text in which we look for:
- tool calls (`<tool_call>` blocks; a reply, or a JSON code block, that is one bare JSON call
  is read as one too);
- whole files: a line naming the path, then the file's full content in a fenced block (the block
  may lack the path line: the loop then works out which file it is, `edits.py`);
- search/replace edits: inside a fenced block, `<<<<<<< SEARCH` / `=======` / `>>>>>>> REPLACE`.
Whatever else the reply says is its prose: the answer, or the summary of what was done.

Never raises; what cannot be read is a `problem` the model is told about.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([^`\s]*)\s*(\S*)\s*$")
"""A fence line: the fence, its info word (a language or a path), and a path after it."""
_PATH = re.compile(r"^[\w.\-/]+\.[\w]+$|^[\w.\-/]*/[\w.\-]+$")
_SEARCH, _DIVIDER, _REPLACE = "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE"
SHELL_LANGS = frozenset({"bash", "sh", "shell", "console", "zsh", "text", "txt", "plaintext"})
"""Blocks in these languages are shown commands or output, never a file's content."""
PYTHON_WORDS = ("python", "py", "python3")
"""A block's first line that is one of these is its language written a line too low, never
code: a file starting `python` compiles and raises NameError when imported (the 1.5B wrote
one on HumanEval/90)."""
_NOT_PATHS = frozenset({"python", "py", "bash", "sh", "json", "yaml", "text"})


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class FileBlock:
    """A fenced block: a whole file's new content (path None when the reply named none)."""

    path: str | None
    content: str
    lang: str = ""


@dataclass(frozen=True)
class SearchReplace:
    path: str | None
    search: str
    replace: str


Item = ToolCall | FileBlock | SearchReplace


@dataclass
class Reply:
    items: list[Item] = field(default_factory=list)
    prose: str = ""
    problems: list[str] = field(default_factory=list)
    cut_off: bool = False
    """A code block or tool call was still open when the reply ended (the answer hit its cap)."""
    answer: str = ""
    """The prose as the user reads it: where words led into a file's code ("Here is the
    corrected `median` function:") and the code went to the file, a line saying where it is
    stands in its place, or the answer would stop mid-air and run on into the next
    paragraph. The prose itself, without it, is what the loop reads for its rules."""

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [i for i in self.items if isinstance(i, ToolCall)]

    @property
    def edits(self) -> list[FileBlock | SearchReplace]:
        return [i for i in self.items if not isinstance(i, ToolCall)]


def parse_reply(text: str) -> Reply:
    """The tool calls, edits and prose of one reply, in the order written."""
    reply = Reply()
    bare = _bare_call(text)
    if bare is not None:
        reply.items.append(bare)
        return reply
    prose: list[str] = []
    pos = 0
    for m in _TOOL_CALL.finditer(text):
        _blocks(text[pos : m.start()], reply, prose)
        call = _read_call(m.group(1), reply)
        if call is not None:
            reply.items.append(call)
        if not m.group(0).rstrip().endswith("</tool_call>") and call is None:
            reply.cut_off = True
        pos = m.end()
    _blocks(text[pos:], reply, prose)
    reply.prose = "\n".join(line for line in prose if not line.startswith(_CODE_MARK)).strip()
    reply.answer = "\n".join(_shown(line) for line in prose).strip()
    return reply


_CODE_MARK = "\x00code:"
"""A prose line that only marks where a file's code was taken out (the path follows it); the
NUL never comes from a model's text."""


def _shown(line: str) -> str:
    if not line.startswith(_CODE_MARK):
        return line
    path = line[len(_CODE_MARK) :]
    return (
        f"(the code for `{path}` is in the edit above)"
        if path
        else "(the code is in the edit above)"
    )


def _led_into(prose: list[str]) -> bool:
    """The last words before a block end on a colon: they introduce the code (so do they for
    the blocks that follow it with no words between)."""
    for line in reversed(prose):
        if line.strip():
            return line.startswith(_CODE_MARK) or line.rstrip().endswith(":")
    return False


def _bare_call(text: str) -> ToolCall | None:
    """A reply that is nothing but one JSON call: `{"name", "arguments"}` or `{"tool", "args"}`,
    also with a stray fence line before or after it (seen, sampled: the call, then a lone ```)."""
    lines = text.strip().split("\n")
    while lines and FENCE.match(lines[0]) and len(lines) > 1:
        lines = lines[1:]
    while lines and FENCE.match(lines[-1]) and len(lines) > 1:
        lines = lines[:-1]
    s = "\n".join(lines).strip()
    if not (s.startswith("{") and s.endswith("}")):
        return None
    try:
        data = json.loads(s)
    except json.JSONDecodeError:
        return None
    return _as_call(data)


def _as_call(data: Any) -> ToolCall | None:
    if not isinstance(data, dict):
        return None
    name = data.get("name", data.get("tool"))
    args = data.get("arguments", data.get("args", {}))
    if isinstance(args, str):  # some models send the arguments as a JSON string
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return None
    if not isinstance(name, str) or not isinstance(args, dict):
        return None
    return ToolCall(name, args)


def _read_call(body: str, reply: Reply) -> ToolCall | None:
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        reply.problems.append(f"a <tool_call> is not valid JSON ({exc.msg} at char {exc.pos})")
        return None
    call = _as_call(data)
    if call is None:
        reply.problems.append('a <tool_call> must be {"name": ..., "arguments": {...}}')
    return call


def path_of(line: str) -> str | None:
    """The path a line names before a code block: `solution.py`, `**src/a.py**`, `# File: a.py:`
    or `` `a.py` ``; None when the line is prose."""
    s = line.strip().strip("*").strip()
    s = re.sub(r"^#+\s*", "", s)
    s = re.sub(r"^(file(name)?|path)\s*:\s*", "", s, flags=re.I)
    s = s.strip("`*: ").strip()
    if s.startswith("./"):
        s = s[2:]
    if not s or " " in s or s.lower() in _NOT_PATHS or not _PATH.match(s):
        return None
    return s


def _blocks(text: str, reply: Reply, prose: list[str]) -> None:
    """Fenced blocks of a stretch of text into `reply.items`; the rest into `prose`."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            prose.append(lines[i])
            i += 1
            continue
        fence, info, extra = m.group(1), m.group(2), m.group(3)
        if _stray_opener(lines, i):
            i += 1  # the block opens on the next line
            continue
        fenced_path = _fenced_path(lines, i)
        if fenced_path:
            prose.append(lines[i + 1])  # the path, above the block that follows
            i += fenced_path
            continue
        path = path_of(extra) or (path_of(info) if "." in info or "/" in info else None)
        lang = "" if path_of(info) else info.lower()
        if path is None:
            path = _path_above(prose)
        body: list[str] = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence[0] * len(fence):
            body.append(lines[j])
            j += 1
        if j >= len(lines) and not "".join(body).strip():
            i += 1  # a lone fence at the end: a stray mark, nothing cut off, and not shown
            continue  # (the 1.5B closed its answer with one: an empty code block under it)
        if j >= len(lines):
            reply.cut_off = True
            reply.problems.append(
                "your reply ended inside a code block (it was cut off); nothing of that block "
                "was written"
            )
            return
        edits = len(reply.edits)
        _one_block(path, lang, body, reply)
        if len(reply.edits) > edits and _led_into(prose):
            prose.append(_CODE_MARK + (reply.edits[-1].path or ""))
        i = j + 1


def _stray_opener(lines: list[str], i: int) -> bool:
    """A bare fence right above a fence that names a language: the bare one is a stray mark and
    the block opens below it. The 1.5B coder wrote `read_file("bottle_song.py")`, a lone ```,
    then ```python and the file on an Exercism task; read as one block, the file began with
    "```python", did not parse, and was refused as a block that names no file, every attempt."""
    if lines[i].strip() not in ("```", "~~~") or i + 1 >= len(lines):
        return False
    below = FENCE.match(lines[i + 1])
    return below is not None and bool(below.group(2)) and path_of(below.group(2)) is None


def _fenced_path(lines: list[str], i: int) -> int:
    """How many lines to step over when the fence at `i` only wraps the path of the block after
    it (the 1.5B coder wrote "```json", the path, then "```python" and the file, on an
    Exercism task): 2 when the next fence opens the file's block, 3 when a closing fence comes
    first; 0 when the fence opens a block of its own."""
    if i + 2 >= len(lines) or path_of(lines[i + 1]) is None:
        return 0
    after = FENCE.match(lines[i + 2])
    if after is None:
        return 0
    if after.group(2):  # an opening fence (it names a language): the file's block
        return 2
    opens_next = i + 3 < len(lines) and FENCE.match(lines[i + 3]) is not None
    return 3 if opens_next else 0


_MENTION = re.compile(r"`([\w.\-/]+\.\w+)`")


def _path_above(prose: list[str]) -> str | None:
    """The path on the last non-empty prose line right above a block (a line that is only the
    path is taken out of the prose), or the one file that line names in backticks ("Here is the
    corrected `stats.py`:"). The marks of code taken out are not lines of the reply."""
    lines = [i for i, line in enumerate(prose) if not line.startswith(_CODE_MARK)]
    for at in reversed(lines[-3:]):
        line = prose[at]
        if not line.strip():
            continue
        path = path_of(line)
        if path is not None:
            del prose[at]
            return path
        named = set(_MENTION.findall(line))
        return named.pop() if len(named) == 1 else None
    return None


def _one_block(path: str | None, lang: str, body: list[str], reply: Reply) -> None:
    if any(line.strip() == _SEARCH for line in body):
        _search_replace(path, body, reply)
        return
    call = _bare_call("\n".join(body)) if path is None and lang in ("", "json") else None
    if call is not None:  # a call written as a JSON block, as small models often do
        reply.items.append(call)
        return
    if lang in SHELL_LANGS and path is None:
        return  # a command or its output, shown
    if body and lang in ("", *PYTHON_WORDS) and body[0].strip().lower() in PYTHON_WORDS:
        lang, body = body[0].strip().lower(), body[1:]  # "```" then "python" on a line of its own
    named = path_of(body[0]) if body and body[0].lstrip().startswith("#") else None
    if named is not None and path in (None, named):
        path, body = named, body[1:]  # "# todo.py" atop the code: the path, not a line of it
    content = "\n".join(body)
    reply.items.append(FileBlock(path, content + "\n" if content else "", lang))


def _search_replace(path: str | None, body: list[str], reply: Reply) -> None:
    state, search, replace = "", [], []  # type: tuple[str, list[str], list[str]]
    for line in body:
        mark = line.strip()
        if mark == _SEARCH:
            state, search, replace = "search", [], []
        elif mark == _DIVIDER and state == "search":
            state = "replace"
        elif mark.startswith(_REPLACE[:7]) and state == "replace":
            reply.items.append(SearchReplace(path, _joined(search), _joined(replace)))
            state = ""
        elif state == "search":
            search.append(line)
        elif state == "replace":
            replace.append(line)
    if state:
        reply.problems.append("a SEARCH/REPLACE block was not closed with >>>>>>> REPLACE")


def _joined(lines: list[str]) -> str:
    return "\n".join(lines) + "\n" if lines else ""
