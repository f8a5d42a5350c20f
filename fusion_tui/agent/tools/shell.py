"""run_shell: an approved command in the workspace, its own timeout, capped output, group kill.

The command runs in a new session (its own process group) so a timeout or the user's cancel kills
everything it started, not just the shell. Output keeps the head and the tail and says how much
was dropped in between, so a flood never reaches the prompt.
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import Process

from fusion_tui.agent.approval import ApprovalRequest, command_prefix
from fusion_tui.agent.tools import ToolContext, ToolResult
from fusion_tui.agent.tools.workspace import ToolError

MAX_TIMEOUT_S = 1800.0
MIN_TIMEOUT_S = 1.0
KILL_GRACE_S = 1.0
DRAIN_GRACE_S = 0.3
HEAD_BYTES = 6 * 1024
TAIL_BYTES = 6 * 1024


class CappedOutput:
    """Head and tail of a byte stream, with a count of what was dropped."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self._head_cap, self._tail_cap = head, tail
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self._tail_cap:
                del self.tail[: len(self.tail) - self._tail_cap]

    def text(self) -> str:
        dropped = self.total - len(self.head) - len(self.tail)
        out = self.head.decode("utf-8", "replace")
        if dropped > 0:
            out += f"\n… [{dropped} bytes of output dropped] …\n"
        out += self.tail.decode("utf-8", "replace")
        return out.replace("\x00", "\\0")


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _kill_group(proc: Process) -> None:
    _signal_group(proc.pid, signal.SIGTERM)
    with anyio.move_on_after(KILL_GRACE_S):
        await proc.wait()
    _signal_group(proc.pid, signal.SIGKILL)
    if proc.returncode is None:
        await proc.wait()


async def run_shell(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    command: str = args["command"]
    if not command.strip():
        raise ToolError("command is empty")
    timeout = float(args.get("timeout_s", ctx.shell_timeout_s))
    timeout = max(MIN_TIMEOUT_S, min(timeout, MAX_TIMEOUT_S))
    request = ApprovalRequest(
        "shell", "run_shell", command, detail=command, prefix=command_prefix(command)
    )
    if not await ctx.gate.check(request):
        raise ToolError("the user denied this command; do something else or finish")
    return await run_command(ctx, command, timeout)


def within_task(ctx: ToolContext, timeout: float) -> tuple[float, bool]:
    """The timeout a command gets: its own, or the time left to the task's ceiling when that is
    shorter (at least a second); and whether the task's limit is what bounds it. Tests of code
    that loops forever would otherwise hold the task past its limit for their whole timeout."""
    left = max(MIN_TIMEOUT_S, ctx.time_left())
    return (left, True) if left < timeout else (timeout, False)


@dataclass(frozen=True)
class Executed:
    """A finished command: its exit code (None when it timed out) and its capped output."""

    exit: int | None
    output: str
    timeout: float
    at_task_limit: bool = False
    """The timeout was the time left to the task's ceiling, shorter than the command's own."""

    @property
    def how_it_timed_out(self) -> str:
        if self.at_task_limit:
            return f"stopped at the task's time limit after {self.timeout:.0f} s"
        return f"timed out after {self.timeout:.0f} s"

    @property
    def ok(self) -> bool:
        return self.exit == 0


async def run_command(ctx: ToolContext, command: str, timeout: float) -> ToolResult:
    """Run `command` in the workspace with no approval asked (`run_shell` asks first)."""
    done = await execute(ctx, command, timeout)
    if done.exit is None:
        head = f"{done.how_it_timed_out}; the process group was killed"
    else:
        head = f"exit code {done.exit}"
    return ToolResult(done.ok, f"$ {command}\n{head}\n{done.output}".rstrip())


async def execute(ctx: ToolContext, command: str, timeout: float) -> Executed:
    """Run `command` in its own process group in the workspace: for `run_shell` once approved,
    and for the test command the user gave the task; never past the task's ceiling."""
    timeout, at_task_limit = within_task(ctx, timeout)
    env = dict(os.environ, PAGER="cat", GIT_PAGER="cat", TERM="dumb")
    out = CappedOutput()
    proc = await anyio.open_process(
        ["/bin/sh", "-c", command],
        cwd=ctx.workspace.root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )
    timed_out = False
    try:
        async with anyio.create_task_group() as tg:
            drained = anyio.Event()

            async def pump() -> None:
                try:
                    assert proc.stdout is not None
                    async for chunk in proc.stdout:
                        out.add(chunk)
                finally:
                    drained.set()

            tg.start_soon(pump)
            with anyio.move_on_after(timeout) as scope:
                await proc.wait()
            timed_out = scope.cancelled_caught
            if not timed_out:  # a background child may hold the pipe open: don't wait for it
                with anyio.move_on_after(DRAIN_GRACE_S):
                    await drained.wait()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            # kill the whole group: on timeout, on cancel, and stragglers left in the background
            if proc.returncode is None:
                await _kill_group(proc)
            else:
                _signal_group(proc.pid, signal.SIGKILL)
            await proc.aclose()
    return Executed(None if timed_out else proc.returncode, out.text(), timeout, at_task_limit)
