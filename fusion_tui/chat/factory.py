"""Provides `make_backend`: the one place a backend is chosen and built.

The CLI's app command, the app at start and on a relaunch (F2), and the tests all come here, so
agent mode (a workspace) and its approver cannot be lost on the way: the caller hands in the
approver it will answer with, and nothing is patched afterwards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from fusion_tui.agent.approval import Approver
from fusion_tui.chat.agent_backend import AgentBackend
from fusion_tui.chat.backend import Backend
from fusion_tui.chat.endpoint_turns import FailoverAsker
from fusion_tui.chat.local import LocalBackend
from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths


class BackendFactory(Protocol):
    """`make_backend` or anything shaped like it (tests pass their own)."""

    def __call__(
        self,
        settings: Settings,
        paths: AppPaths,
        *,
        workspace: Path | str | None = None,
        model: str | None = None,
        resume: str | None = None,
        approver: Approver | None = None,
    ) -> Backend: ...


def make_backend(
    settings: Settings,
    paths: AppPaths,
    *,
    workspace: Path | str | None = None,
    model: str | None = None,
    resume: str | None = None,
    approver: Approver | None = None,
) -> Backend:
    """Agent mode when `workspace` is given (each message is an agent task there, writes and
    commands asked of `approver`, denied when None), else the plain chat.

    `resume`: None a new session, "" the latest, else a session id. Raises `SessionStoreError`
    / `ValueError` for a session that cannot be resumed and `ToolError` for a bad workspace.
    """
    if workspace:
        return AgentBackend(
            settings, paths, workspace, model=model, resume=resume, approver=approver
        )
    backend = LocalBackend(settings, paths, model=model, resume=resume)
    if isinstance(approver, FailoverAsker):  # the TUI asks before a session changes endpoint
        backend.ask_failover = approver.ask_failover
    return backend
