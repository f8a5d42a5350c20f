"""The agent's tools: file, search and shell, all confined to the workspace.

`TOOLS` maps a name to its spec and its async runner; `run_tool` turns every failure into a
`ToolResult(ok=False)` the model can read, so no exception from a tool reaches the loop.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fusion_tui.agent.approval import ApprovalGate
from fusion_tui.agent.tools.workspace import ToolError, Workspace


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    text: str
    """What the model sees (already capped)."""
    detail: str = ""
    """Extra for the UI only: the diff of an edit, the full command."""


@dataclass
class ToolContext:
    """What a tool may use. The task's deadline is absent: a tool sees only how many seconds it
    may still run (`time_left`), so a command that hangs ends with the task instead of holding
    it past its limit, and no tool can act on the deadline itself."""

    workspace: Workspace
    gate: ApprovalGate
    cancelled: Callable[[], bool] = field(default=lambda: False)
    shell_timeout_s: float = 120.0
    time_left: Callable[[], float] = field(default=lambda: math.inf)
    """Seconds until the task's ceiling (infinite outside a task)."""
    max_output_chars: int = 16_000


Runner = Callable[[ToolContext, dict[str, Any]], Awaitable[ToolResult]]

__all__ = ["Runner", "ToolContext", "ToolError", "ToolResult", "Workspace"]
