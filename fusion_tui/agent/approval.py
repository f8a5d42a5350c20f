"""Approval of writes and shell commands: asked of the user, never of the model.

The grants live in an `ApprovalGate` object the loop holds; nothing in the prompt, the history or
the tool arguments is read to decide. A command prefix granted "always" only covers simple
commands: anything with shell control characters (`;`, `|`, `&`, `$(`, backticks, redirections,
newlines) needs its own approval, so `git status; rm -rf ~` never rides on `git status`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal, Protocol

ApprovalKind = Literal["write", "shell"]

SHELL_CONTROL = (";", "|", "&", "`", "$(", ">", "<", "\n", "\r", "${")


class Decision(Enum):
    ALLOW_ONCE = "allow_once"
    ALLOW_PREFIX = "allow_prefix"
    """Always allow this command prefix for the rest of the session (shell only)."""
    DENY = "deny"


@dataclass(frozen=True)
class ApprovalRequest:
    """What the user is shown: the diff of a write, or the command to run."""

    kind: ApprovalKind
    tool: str
    target: str
    """The path written, or the command line."""
    detail: str = ""
    """Unified diff (writes) or the full command (shell)."""
    prefix: str = ""
    """The prefix an "always allow" decision would grant (shell only)."""
    why: str = ""
    """Why the agent itself asks, when the write is not the model's call but an undo (a failed
    attempt's files put back): without it the user sees an ordinary "Write X?" and cannot tell
    that allowing it takes changes back. Empty for the model's own calls."""


class Approver(Protocol):
    """Asks the user (TUI modal) or applies headless flags."""

    async def decide(self, request: ApprovalRequest) -> Decision: ...


def command_prefix(command: str, words: int = 2) -> str:
    """The first words of a simple command ("git status"), or "" when it is not simple."""
    if not is_simple_command(command):
        return ""
    try:
        tokens = shlex.split(command)
    except ValueError:
        return ""
    return " ".join(tokens[:words])


def is_simple_command(command: str) -> bool:
    return not any(c in command for c in SHELL_CONTROL)


def prefix_matches(prefix: str, command: str) -> bool:
    """Word-wise prefix match on a simple command ("git st" does not match "git status")."""
    if not prefix or not is_simple_command(command):
        return False
    try:
        want = shlex.split(prefix)
        have = shlex.split(command)
    except ValueError:
        return False
    return len(have) >= len(want) and have[: len(want)] == want


@dataclass
class ApprovalGate:
    """Per-session approval state, owned by the app; the model has no handle on it."""

    approver: Approver
    granted_prefixes: list[str] = field(default_factory=list)
    log: list[tuple[ApprovalRequest, Decision]] = field(default_factory=list)

    async def check(self, request: ApprovalRequest) -> bool:
        if request.kind == "shell" and any(
            prefix_matches(p, request.target) for p in self.granted_prefixes
        ):
            self.log.append((request, Decision.ALLOW_ONCE))
            return True
        decision = await self.approver.decide(request)
        if not isinstance(decision, Decision):
            decision = Decision.DENY
        self.log.append((request, decision))
        if decision is Decision.ALLOW_PREFIX:
            if request.kind == "shell" and request.prefix:
                self.granted_prefixes.append(request.prefix)
            return True
        return decision is Decision.ALLOW_ONCE


@dataclass(frozen=True)
class HeadlessApprover:
    """`--yes` allows everything; `--allow-shell PREFIX` (repeatable) allows matching commands."""

    yes: bool = False
    allow_shell: tuple[str, ...] = ()

    async def decide(self, request: ApprovalRequest) -> Decision:
        if self.yes:
            return Decision.ALLOW_ONCE
        if request.kind == "shell" and any(
            prefix_matches(p, request.target) for p in self.allow_shell
        ):
            return Decision.ALLOW_ONCE
        return Decision.DENY


class DenyAll:
    """The safe default when nobody can be asked."""

    async def decide(self, request: ApprovalRequest) -> Decision:
        return Decision.DENY
