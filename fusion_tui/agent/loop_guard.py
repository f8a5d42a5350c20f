"""Stops an agent that repeats the same failing call (a small model can loop on one error).

The rule, counted over consecutive tool calls:
- a call (same tool, same arguments) that failed with the same error `LIMIT` times in a row is
  not run again: the model gets a corrective message instead (`Verdict.block`);
- one more identical call after that ends the task with the outcome `stuck`.
Any other call (different tool, arguments or error, or a success) starts the count afresh.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from fusion_tui.agent.events import first_line

LIMIT = 3
"""Identical failures in a row before the call is refused."""

Verdict = Literal["run", "block", "stuck"]


def call_key(tool: str, args: dict[str, Any]) -> str:
    """The identity of a call: tool and arguments, key order ignored."""
    return tool + " " + json.dumps(args, sort_keys=True, ensure_ascii=False)


@dataclass
class LoopGuard:
    """The current run of identical failing calls."""

    limit: int = LIMIT
    key: str = ""
    error: str = ""
    failures: int = 0
    blocked: int = 0

    def check(self, tool: str, args: dict[str, Any]) -> Verdict:
        """What to do with this call before it runs."""
        if call_key(tool, args) != self.key or self.failures < self.limit:
            return "run"
        self.blocked += 1
        return "block" if self.blocked == 1 else "stuck"

    def record(self, tool: str, args: dict[str, Any], ok: bool, error: str) -> None:
        """The result of a call that ran."""
        key = call_key(tool, args)
        if ok:
            self.key, self.error, self.failures, self.blocked = "", "", 0, 0
        elif key == self.key and error == self.error:
            self.failures += 1
        else:
            self.key, self.error, self.failures, self.blocked = key, error, 1, 0

    def corrective(self, tool: str, args: dict[str, Any]) -> str:
        """The message the model gets instead of a fourth run."""
        shown = json.dumps(args, ensure_ascii=False)
        return (
            f"### {tool} not run\nYou called {tool} with {shown} {self.failures} times in a row "
            f"and got the same error each time: {first_line(self.error)}\n"
            "It was not run again. Do something different: fix the arguments (use a path from "
            "the workspace files), try another tool, or finish with what you know. "
            "Calling it again unchanged ends the task."
        )

    def stuck_reason(self, tool: str, args: dict[str, Any]) -> str:
        shown = json.dumps(args, ensure_ascii=False)
        return (
            f"{tool} {shown} failed {self.failures} times in a row with the same error "
            f"({first_line(self.error)}) and was called again after a warning"
        )
