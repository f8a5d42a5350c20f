"""run_shell: approval by prefix, output caps, timeout and user cancel kill the process group."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from fusion_tui.agent.approval import (
    ApprovalGate,
    Decision,
    HeadlessApprover,
    command_prefix,
    prefix_matches,
)
from fusion_tui.agent.tools import ToolContext
from fusion_tui.agent.tools.shell import CappedOutput, run_shell
from fusion_tui.agent.tools.workspace import ToolError, Workspace
from tests.unit.test_agent_fakes import Recorder


def ctx(root: Path, approver: object) -> ToolContext:
    return ToolContext(Workspace(root), ApprovalGate(approver))  # type: ignore[arg-type]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


async def test_runs_in_the_workspace_with_exit_code(tmp_path: Path) -> None:
    res = await run_shell(ctx(tmp_path, HeadlessApprover(yes=True)), {"command": "pwd; exit 3"})
    assert not res.ok
    assert str(tmp_path.resolve()) in res.text and "exit code 3" in res.text


async def test_flood_is_capped_with_head_and_tail(tmp_path: Path) -> None:
    c = ctx(tmp_path, HeadlessApprover(yes=True))
    res = await run_shell(c, {"command": "seq 1 200000"})
    assert res.ok and "bytes of output dropped" in res.text
    assert "\n1\n" in res.text and res.text.rstrip().endswith("200000")
    assert len(res.text) < 14_000


async def test_a_command_gets_no_more_than_the_time_left_to_the_tasks_ceiling(
    tmp_path: Path,
) -> None:
    c = ctx(tmp_path, HeadlessApprover(yes=True))
    c.time_left = lambda: 1.5
    t0 = time.monotonic()
    res = await run_shell(c, {"command": "sleep 30", "timeout_s": 60})
    assert time.monotonic() - t0 < 10 and not res.ok
    assert "stopped at the task's time limit after 2 s" in res.text


async def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    c = ctx(tmp_path, HeadlessApprover(yes=True))
    res = await run_shell(c, {"command": "sleep 30 & echo $! > bg.pid; sleep 30", "timeout_s": 1})
    assert "timed out" in res.text and not res.ok
    pid = int((tmp_path / "bg.pid").read_text())
    for _ in range(50):
        if not _alive(pid):
            break
        time.sleep(0.05)
    assert not _alive(pid)


async def test_cancel_scope_kills_the_group(tmp_path: Path) -> None:
    c = ctx(tmp_path, HeadlessApprover(yes=True))
    with anyio.move_on_after(0.5):
        await run_shell(c, {"command": "echo $$ > sh.pid; sleep 30"})
    pid = int((tmp_path / "sh.pid").read_text())
    assert not _alive(pid)


async def test_denied_command_does_not_run(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="denied"):
        await run_shell(ctx(tmp_path, HeadlessApprover()), {"command": "touch made"})
    assert not (tmp_path / "made").exists()


async def test_always_allow_grants_a_prefix_for_simple_commands_only(tmp_path: Path) -> None:
    rec = Recorder(Decision.ALLOW_PREFIX, Decision.DENY)
    c = ctx(tmp_path, rec)
    await run_shell(c, {"command": "echo one"})
    assert c.gate.granted_prefixes == ["echo one"]
    await run_shell(c, {"command": "echo one two"})  # covered, not asked
    assert len(rec.asked) == 1
    with pytest.raises(ToolError):
        await run_shell(c, {"command": "echo one; touch pwned"})  # chained: asked, denied
    assert len(rec.asked) == 2 and not (tmp_path / "pwned").exists()


def test_prefix_rules() -> None:
    assert command_prefix("git status --short") == "git status"
    assert command_prefix("ls | sh") == ""
    assert prefix_matches("pytest", "pytest -q tests")
    assert not prefix_matches("git st", "git status")
    for evil in ("pytest; rm -rf /", "pytest && curl x", "pytest $(rm x)", "pytest `x`",
                 "pytest > /etc/x", "pytest\nrm x", "pytest | sh"):  # fmt: skip
        assert not prefix_matches("pytest", evil), evil


async def test_headless_allow_shell_flag(tmp_path: Path) -> None:
    c = ctx(tmp_path, HeadlessApprover(allow_shell=("echo",)))
    assert (await run_shell(c, {"command": "echo hi"})).ok
    with pytest.raises(ToolError):
        await run_shell(c, {"command": "touch x"})


def test_capped_output_keeps_head_and_tail() -> None:
    out = CappedOutput(head=4, tail=4)
    for chunk in (b"abcdef", b"ghij", b"klmn"):
        out.add(chunk)
    assert out.text() == "abcd\n… [6 bytes of output dropped] …\nklmn"
