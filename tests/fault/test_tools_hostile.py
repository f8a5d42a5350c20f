"""Agent tools under hostile conditions the unit tests leave out: FIFOs, catastrophic regexes,
commands that ignore SIGTERM, binary floods, stragglers, and a swap during the approval wait.

Cases that could hang the test process itself run in a subprocess with a deadline, so a
regression fails the test instead of freezing the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from fusion_tui.agent.approval import ApprovalGate, ApprovalRequest, Decision, HeadlessApprover
from fusion_tui.agent.tools import ToolContext
from fusion_tui.agent.tools.files import edit_file, read_file, write_file
from fusion_tui.agent.tools.shell import run_shell
from fusion_tui.agent.tools.workspace import ToolError, Workspace
from fusion_tui.server.process.pids import is_alive

ROOT = Path(__file__).resolve().parents[2]


def ctx(root: Path, approver: object | None = None) -> ToolContext:
    gate = ApprovalGate(approver or HeadlessApprover(yes=True))  # type: ignore[arg-type]
    return ToolContext(Workspace(root), gate)


async def gone(pid: int) -> bool:
    """True once `pid` is dead (SIGKILL is delivered asynchronously; allow up to 5 s)."""
    for _ in range(100):
        if not is_alive(pid):
            return True
        await anyio.sleep(0.05)
    return False


def run_isolated(workspace: Path, body: str, deadline: float = 20.0) -> str:
    """Run `body` (async code using `c`, a ToolContext on `workspace`) in a fresh interpreter."""
    code = (
        textwrap.dedent(
            """
        import asyncio, sys
        from fusion_tui.agent.approval import ApprovalGate, HeadlessApprover
        from fusion_tui.agent.tools import ToolContext
        from fusion_tui.agent.tools.files import read_file
        from fusion_tui.agent.tools.search import find, grep
        from fusion_tui.agent.tools.workspace import ToolError, Workspace
        c = ToolContext(Workspace(sys.argv[1]), ApprovalGate(HeadlessApprover(yes=True)))
        async def main():
        """
        )
        + textwrap.indent(textwrap.dedent(body), "    ")
        + "\nasyncio.run(main())\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(workspace)],
            capture_output=True,
            text=True,
            timeout=deadline,
            cwd=ROOT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the tool did not return within {deadline:g} s (it hangs)")
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_fifo_in_the_workspace_never_blocks_read_or_grep(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "a.txt").write_text("needle here\n")
    out = run_isolated(
        tmp_path,
        """
        try:
            await read_file(c, {"path": "pipe"})
            print("read: returned")
        except ToolError as exc:
            print("read:", exc)
        print("grep:", (await grep(c, {"pattern": "needle"})).text)
        """,
    )
    assert "read: pipe is not a regular file" in out
    assert "grep: a.txt:1: needle here" in out


def test_a_catastrophic_regex_does_not_hang_grep(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a" * 60 + "b\n")
    out = run_isolated(
        tmp_path,
        """
        try:
            print((await grep(c, {"pattern": "(a+)+$"})).text)
        except ToolError as exc:
            print("refused:", exc)
        """,
        deadline=5.0,
    )
    assert out.strip()


async def test_a_command_that_ignores_sigterm_is_killed_at_its_timeout(tmp_path: Path) -> None:
    res = await run_shell(
        ctx(tmp_path),
        {
            "command": "trap '' TERM; echo $$ > me.pid; while :; do sleep 0.1; done",
            "timeout_s": 1,
        },
    )
    assert not res.ok and "timed out after 1 s" in res.text
    assert await gone(int((tmp_path / "me.pid").read_text()))


async def test_a_binary_flood_is_capped_text(tmp_path: Path) -> None:
    res = await run_shell(ctx(tmp_path), {"command": "head -c 3000000 /dev/urandom"})
    assert res.ok and "bytes of output dropped" in res.text
    assert len(res.text) < 14_000 and "\x00" not in res.text


async def test_an_endless_line_is_capped_and_stopped(tmp_path: Path) -> None:
    res = await run_shell(ctx(tmp_path), {"command": "yes | tr -d '\\n'", "timeout_s": 1})
    assert not res.ok and "timed out" in res.text
    assert len(res.text) < 14_000


async def test_stdin_is_closed_and_a_background_straggler_is_killed(tmp_path: Path) -> None:
    res = await run_shell(ctx(tmp_path), {"command": "cat; sleep 30 & echo $! > bg.pid; echo ok"})
    assert res.ok and res.text.endswith("ok")
    assert await gone(int((tmp_path / "bg.pid").read_text()))


async def test_a_huge_single_line_file_is_capped(tmp_path: Path) -> None:
    (tmp_path / "one.min.js").write_text("x" * 3_000_000)
    res = await read_file(ctx(tmp_path), {"path": "one.min.js"})
    assert res.ok and len(res.text) < 17_000 and "more characters cut" in res.text


@pytest.mark.parametrize("tool", ["write", "edit"])
async def test_binary_files_are_never_rewritten(tmp_path: Path, tool: str) -> None:
    blob = b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 10
    (tmp_path / "prog").write_bytes(blob)
    with pytest.raises(ToolError, match="binary"):
        if tool == "write":
            await write_file(ctx(tmp_path), {"path": "prog", "content": "text"})
        else:
            await edit_file(ctx(tmp_path), {"path": "prog", "search": "ELF", "replace": "X"})
    assert (tmp_path / "prog").read_bytes() == blob


class SwapWhileAsked:
    """Approves, but swaps the file's folder for a link out of the workspace while it is asked
    (the user's think time is the widest window between the check and the write)."""

    def __init__(self, folder: Path, outside: Path) -> None:
        self.folder = folder
        self.outside = outside
        self.asked: list[ApprovalRequest] = []

    async def decide(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request)
        self.folder.rename(self.folder.with_name("moved"))
        self.folder.symlink_to(self.outside)
        return Decision.ALLOW_ONCE


async def test_a_folder_swapped_during_the_approval_wait_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "src").mkdir(parents=True)
    outside.mkdir()
    (root / "src" / "app.py").write_text("x = 1\n")
    (outside / "app.py").write_text("SECRET = 1\n")
    approver = SwapWhileAsked(root / "src", outside)
    with pytest.raises(ToolError, match="symbolic link appeared"):
        await edit_file(
            ctx(root, approver), {"path": "src/app.py", "search": "x = 1", "replace": "x = 2"}
        )
    assert len(approver.asked) == 1
    assert (outside / "app.py").read_text() == "SECRET = 1\n"
    assert (root / "moved" / "app.py").read_text() == "x = 1\n"
    assert sorted(os.listdir(outside)) == ["app.py"]
