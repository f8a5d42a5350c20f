"""Stops an agent that repeats itself (a small model can read one file twelve times, or write
the same file ten times), whether the repeated call failed or succeeded.

The rule, within one task:
- a call (same tool, same arguments) that was already made since the workspace last changed is
  not run again: its result cannot differ, so the model is told so instead (`block`);
- a second repeat after that warning ends the task with the outcome `stuck`.
A write that changes a file clears what was seen (a read may now show something new); a write
that changes nothing is recorded like any call, so writing the same text twice is a repeat.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from fusion_tui.agent.events import first_line

Verdict = Literal["run", "block", "stuck"]


def call_key(tool: str, args: dict[str, Any]) -> str:
    """The identity of a call: tool and arguments, key order ignored."""
    return tool + " " + json.dumps(args, sort_keys=True, ensure_ascii=False)


@dataclass
class LoopGuard:
    """The calls made since the workspace last changed, and the repeats refused so far."""

    seen: dict[str, str] = field(default_factory=dict)
    """Call key → the first line of its result."""
    made: dict[str, int] = field(default_factory=dict)
    """Call key → how often it was made since the last change, refused repeats included."""
    blocked: int = 0
    error: str = ""
    """The refused call's earlier result (first line)."""
    times: int = 0
    """How often the refused call was made, this time included."""

    def check(self, tool: str, args: dict[str, Any]) -> Verdict:
        """What to do with this call before it runs."""
        key = call_key(tool, args)
        if key not in self.seen:
            return "run"
        self.error = self.seen[key]
        self.made[key] = self.times = self.made.get(key, 1) + 1
        self.blocked += 1
        return "block" if self.blocked == 1 else "stuck"

    def record(self, tool: str, args: dict[str, Any], ok: bool, text: str) -> None:
        """The result of a call that ran."""
        status = "" if ok else "error: "
        self.seen[call_key(tool, args)] = status + first_line(text)

    def changed(self) -> None:
        """A file was changed: earlier reads and runs may now give something else."""
        self.seen.clear()
        self.made.clear()
        self.blocked = 0

    def corrective(self, tool: str, args: dict[str, Any]) -> str:
        """The message the model gets instead of the repeated call's result."""
        if tool == "reply":
            return (
                "Your reply is word for word one you gave before, and nothing has changed "
                f"since, so it was not used again (it got: {self.error}). Do something "
                "different. Repeating it again ends the task."
            )
        shown = json.dumps(args, ensure_ascii=False)
        if len(shown) > 300:
            shown = shown[:299] + "…"
        return (
            f"{tool} {shown} was not run: you made this exact call before and nothing has "
            f"changed since, so its result is the same ({self.error}). Do something different: "
            "change the files, use what you already know, or give your answer. "
            "Repeating a call again ends the task."
        )

    def stuck_reason(self, tool: str, args: dict[str, Any]) -> str:
        return f"the model repeated {tool} after being told its result could not change"
