"""File and search tools: ranges, caps, binary files, exact edits with a diff, approval."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusion_tui.agent.approval import ApprovalGate, Decision, DenyAll, HeadlessApprover
from fusion_tui.agent.tools import ToolContext
from fusion_tui.agent.tools.files import READ_CAP_BYTES, edit_file, list_dir, read_file, write_file
from fusion_tui.agent.tools.search import GREP_CAP, find, grep
from fusion_tui.agent.tools.workspace import ToolError, Workspace
from tests.unit.test_agent_fakes import Recorder


def ctx(root: Path, approver: object = None) -> ToolContext:
    return ToolContext(Workspace(root), ApprovalGate(approver or HeadlessApprover(yes=True)))


async def test_read_file_line_range(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    res = await read_file(ctx(tmp_path), {"path": "a.txt", "start_line": 3, "end_line": 4})
    assert res.ok
    assert res.text.splitlines() == ["a.txt lines 3-4 of 10", "```", "line 3", "line 4", "```"]


async def test_read_file_refuses_binary_and_caps_huge(tmp_path: Path) -> None:
    (tmp_path / "b.bin").write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    with pytest.raises(ToolError, match="binary"):
        await read_file(ctx(tmp_path), {"path": "b.bin"})
    (tmp_path / "big.txt").write_text("x" * 80 + "\n" * 1 + ("y" * 99 + "\n") * 20_000)
    res = await read_file(ctx(tmp_path), {"path": "big.txt"})
    assert f"only the first {READ_CAP_BYTES} were read" in res.text
    assert len(res.text) < 17_000 and "more characters cut" in res.text


async def test_list_dir_marks_dirs_and_links(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("12345")
    (tmp_path / "l").symlink_to(tmp_path / "f")
    res = await list_dir(ctx(tmp_path), {})
    assert res.text.splitlines()[1:] == ["d/", "f  (5 bytes)", "l@"]


async def test_edit_file_exact_replace_returns_a_diff(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("a = 1\nb = 2\n")
    res = await edit_file(ctx(tmp_path), {"path": "m.py", "search": "b = 2", "replace": "b = 3"})
    assert (tmp_path / "m.py").read_text() == "a = 1\nb = 3\n"
    assert "-b = 2" in res.text and "+b = 3" in res.text and "--- a/m.py" in res.text


async def test_edit_file_refuses_missing_and_ambiguous_search(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("x\nx\n")
    with pytest.raises(ToolError, match="not found"):
        await edit_file(ctx(tmp_path), {"path": "m.py", "search": "y", "replace": "z"})
    with pytest.raises(ToolError, match="occurs 2 times"):
        await edit_file(ctx(tmp_path), {"path": "m.py", "search": "x", "replace": "z"})
    await edit_file(ctx(tmp_path), {"path": "m.py", "search": "x", "replace": "z", "all": True})
    assert (tmp_path / "m.py").read_text() == "z\nz\n"


async def test_write_needs_approval_and_shows_the_diff(tmp_path: Path) -> None:
    rec = Recorder(Decision.DENY)
    with pytest.raises(ToolError, match="denied"):
        await write_file(ctx(tmp_path, rec), {"path": "new/n.txt", "content": "hello\n"})
    assert not (tmp_path / "new").exists()
    assert rec.asked[0].kind == "write" and "+hello" in rec.asked[0].detail
    rec2 = Recorder(Decision.ALLOW_ONCE)
    await write_file(ctx(tmp_path, rec2), {"path": "new/n.txt", "content": "hello\n"})
    assert (tmp_path / "new" / "n.txt").read_text() == "hello\n"


async def test_read_only_tools_never_ask(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("needle\n")
    c = ctx(tmp_path, DenyAll())
    assert (await read_file(c, {"path": "a.txt"})).ok
    assert (await grep(c, {"pattern": "needle"})).text == "a.txt:1: needle"
    assert (await find(c, {"pattern": "*.txt"})).text == "a.txt"
    assert c.gate.log == []


async def test_grep_is_capped_and_skips_binary(tmp_path: Path) -> None:
    (tmp_path / "many.txt").write_text("hit\n" * 500)
    (tmp_path / "bin.dat").write_bytes(b"hit\x00" * 10)
    res = await grep(ctx(tmp_path), {"pattern": "hit"})
    assert len(res.text.splitlines()) == GREP_CAP + 1 and "stopped at" in res.text
    assert "bin.dat" not in res.text
    with pytest.raises(ToolError, match="bad regex"):
        await grep(ctx(tmp_path), {"pattern": "("})


async def test_find_glob_with_directories(tmp_path: Path) -> None:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "m.py").write_text("")
    (tmp_path / "top.py").write_text("")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.py").write_text("")
    res = await find(ctx(tmp_path), {"pattern": "**/*.py"})
    assert res.text.splitlines() == ["top.py", "src/pkg/m.py"]
    res = await find(ctx(tmp_path), {"pattern": "*.py", "path": "src"})
    assert res.text == "src/pkg/m.py"
