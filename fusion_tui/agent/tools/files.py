"""read_file, list_dir, write_file, edit_file: bounded reads, approved atomic writes; the
agent's own undo of a write (a put-back, the removal of a file it created).

A read shows the text exactly, in a code block and without line numbers, so the model can copy
lines back into an edit as they are."""

from __future__ import annotations

import difflib
import os
import stat
from typing import Any

from fusion_tui.agent.approval import ApprovalRequest
from fusion_tui.agent.tools import ToolContext, ToolResult
from fusion_tui.agent.tools.workspace import ToolError

READ_CAP_BYTES = 512 * 1024
"""Never read more than this from one file, whatever the file's size."""
LIST_CAP = 400
WRITE_CAP_BYTES = 2 * 1024 * 1024


def _is_binary(data: bytes) -> bool:
    if b"\x00" in data[:8192]:
        return True
    try:
        data[:8192].decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(data[:8192]) - 4  # a char cut at the sample's end is fine
    return False


def read_text(ctx: ToolContext, path: str) -> tuple[str, int, bool]:
    """(text, file size, truncated) of a text file inside the workspace, or ToolError."""
    resolved = ctx.workspace.resolve(path)
    fd = ctx.workspace.open_read(resolved)
    try:
        size = os.fstat(fd).st_size
        chunks: list[bytes] = []
        got = 0
        while got < READ_CAP_BYTES:
            chunk = os.read(fd, min(65536, READ_CAP_BYTES - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if _is_binary(data):
        raise ToolError(f"{resolved.rel} is a binary file ({size} bytes); not shown")
    return data.decode("utf-8", "replace"), size, size > len(data)


def _cap(ctx: ToolContext, text: str) -> str:
    limit = ctx.max_output_chars
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… [{len(text) - limit} more characters cut; ask for a line range]"


async def read_file(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    text, size, truncated = read_text(ctx, args["path"])
    lines = text.splitlines()
    start = max(1, int(args.get("start_line", 1)))
    end = int(args.get("end_line", len(lines)))
    if start > max(1, len(lines)):
        raise ToolError(
            f"start_line {start} is past the end: {args['path']} has {len(lines)} line(s); "
            "leave out start_line and end_line to read the whole file"
        )
    picked = lines[start - 1 : max(start - 1, end)]
    whole = start == 1 and len(picked) == len(lines)
    head = (
        f"{args['path']}"
        if whole
        else (f"{args['path']} lines {start}-{start + len(picked) - 1} of {len(lines)}")
    )
    if truncated:
        head += f" (file is {size} bytes; only the first {READ_CAP_BYTES} were read)"
    body = "\n".join(picked)
    return ToolResult(True, _cap(ctx, f"{head}\n```\n{body}\n```"))


async def list_dir(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    resolved = ctx.workspace.resolve(args.get("path", ".") or ".")
    if resolved.real.is_file():
        raise ToolError(
            f"{resolved.rel} is a file, not a directory; to see its content call read_file "
            f"with path {resolved.rel}"
        )
    entries: list[str] = []
    with ctx.workspace.open_dir(resolved) as dfd:
        names = sorted(os.listdir(dfd))
        for name in names[:LIST_CAP]:
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                entries.append(name + "/")
            elif stat.S_ISLNK(st.st_mode):
                entries.append(name + "@")
            else:
                entries.append(f"{name}  ({st.st_size} bytes)")
    more = f"\n… {len(names) - LIST_CAP} more entries" if len(names) > LIST_CAP else ""
    listing = "\n".join(entries) if entries else "(empty)"
    return ToolResult(True, _cap(ctx, f"{resolved.rel}/\n{listing}{more}"))


def _diff(path: str, old: str, new: str) -> str:
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"a/{path}",
            tofile=f"b/{path}",
        )
    )


async def _approved_write(
    ctx: ToolContext, tool: str, path: str, old: str, new: str, why: str = ""
) -> str:
    resolved = ctx.workspace.resolve(path)
    data = new.encode("utf-8")
    if len(data) > WRITE_CAP_BYTES:
        raise ToolError(f"content is larger than {WRITE_CAP_BYTES} bytes")
    diff = _diff(resolved.rel, old, new)
    request = ApprovalRequest("write", tool, resolved.rel, detail=diff, why=why)
    if not await ctx.gate.check(request):
        raise ToolError(f"the user denied {tool} on {resolved.rel}; do something else or finish")
    ctx.workspace.write_atomic(resolved, data)
    return diff


def _text_to_overwrite(ctx: ToolContext, path: str) -> str:
    """The file's text before a whole-file write ("" for a new file)."""
    try:
        old, _, truncated = read_text(ctx, path)
    except ToolError as exc:
        if "does not exist" not in str(exc):
            raise
        return ""
    if truncated:
        raise ToolError(f"{path} is too large to overwrite safely")
    return old


def _lines(content: str) -> int:
    return content.count("\n") + (0 if content.endswith("\n") or not content else 1)


async def write_file(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    path, content = args["path"], args["content"]
    diff = await _approved_write(ctx, "write_file", path, _text_to_overwrite(ctx, path), content)
    return ToolResult(True, f"wrote {path} ({_lines(content)} lines)", detail=diff)


async def put_back_file(ctx: ToolContext, path: str, content: str, why: str) -> ToolResult:
    """Write `content` back to `path` as an undo the agent makes, not the model: the approval
    says so (`why`) and shows the diff that takes the attempt's changes back."""
    diff = await _approved_write(ctx, "put_back", path, _text_to_overwrite(ctx, path), content, why)
    return ToolResult(True, f"put {path} back ({_lines(content)} lines)", detail=diff)


def _holds(ctx: ToolContext, path: str, written: str) -> None:
    """Raises `ToolError` unless `path` holds exactly `written`."""
    old, _, truncated = read_text(ctx, path)
    if truncated or old != written:
        raise ToolError(f"{path} changed since the agent wrote it; left as it is")


async def remove_created_file(ctx: ToolContext, path: str, written: str, why: str) -> ToolResult:
    """Remove a file the agent created, as the undo of the attempt that created it: asked like
    any put-back (`why`, the diff that empties it), and only while it holds what the agent
    `written` there, so a file someone else changed since is never lost."""
    resolved = ctx.workspace.resolve(path)
    diff = _diff(resolved.rel, written, "")
    _holds(ctx, path, written)
    request = ApprovalRequest("write", "put_back", resolved.rel, detail=diff, why=why)
    if not await ctx.gate.check(request):
        raise ToolError(f"the user denied removing {resolved.rel}; it stays")
    _holds(ctx, path, written)  # again: the approval may have waited while someone edited it
    ctx.workspace.remove(resolved)
    return ToolResult(True, f"removed {path} (the agent created it)", detail=diff)


async def edit_file(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    path, search, replace = args["path"], args["search"], args["replace"]
    if not search:
        raise ToolError("search is empty; give the exact text to replace")
    old, _, truncated = read_text(ctx, path)
    if truncated:
        raise ToolError(f"{path} is too large to edit safely")
    count = old.count(search)
    if count == 0:
        raise ToolError(f"search text not found in {path}; read the file and copy it exactly")
    if count > 1 and not args.get("all", False):
        raise ToolError(
            f"search text occurs {count} times in {path}; add context to make it unique"
        )
    new = (
        old.replace(search, replace) if args.get("all", False) else old.replace(search, replace, 1)
    )
    diff = await _approved_write(ctx, "edit_file", path, old, new)
    return ToolResult(True, _cap(ctx, diff or "(no change)"), detail=diff)
