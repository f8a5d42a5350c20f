"""Provides `StopWatch`: what `fusion-tui run` keeps and says when SIGTERM or SIGINT stops it.

The agent's finished steps are already on disk (each is saved as it completes) and the turn's
last save runs while the cancellation unwinds (`SessionRunner.run`'s `finally`). What is left
here: a signal that came before the task started (the server was still starting) still keeps
the user's words, and the user is told what the session now holds and how to go on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from fusion_tui.cli.stop_signals import Stopped, until_stopped
from fusion_tui.sessions.model import Session
from fusion_tui.sessions.store import SessionStore, SessionStoreError

T = TypeVar("T")
SaveUnstarted = Callable[[SessionStore, Session, str, str, str], None]


class StopWatch:
    """Remembers the session a run works on, to save and report it after a stop signal."""

    def __init__(self, save_unstarted: SaveUnstarted | None = None) -> None:
        self.save_unstarted = save_unstarted
        self.store: SessionStore | None = None
        self.session: Session | None = None
        self.workspace = ""
        self._messages_before = 0
        self._turns_before = 0

    def seen(self, store: SessionStore, session: Session, workspace: str) -> None:
        self.store, self.session, self.workspace = store, session, workspace
        self._messages_before = len(session.messages)
        self._turns_before = len(session.turns)

    async def run(self, fn: Callable[[], Awaitable[T]]) -> Stopped[T]:
        return await until_stopped(fn)

    def kept(self, signal_name: str, task: str) -> str:
        """Save what is not saved yet, and one line on what the session holds now."""
        session, store = self.session, self.store
        if session is None or store is None:
            return f"stopped by {signal_name} before a session was opened; nothing to keep"
        started = len(session.messages) > self._messages_before
        if not started and self.save_unstarted is not None:
            reason = f"stopped by {signal_name} before the task started"
            self.save_unstarted(store, session, task, self.workspace, reason)
        try:
            saved = store.load(session.id)
        except SessionStoreError as exc:
            return f"stopped by {signal_name}; the session could not be read back: {exc}"
        except Exception as exc:  # a damaged file: say so rather than a traceback
            return f"stopped by {signal_name}; the session file does not load: {exc}"
        new = saved.messages[self._messages_before :]
        steps = sum(1 for m in new if m.role == "tool")
        outcome = saved.turns[-1].outcome if len(saved.turns) > self._turns_before else "unsaved"
        return (
            f"stopped by {signal_name}; session {saved.id} kept the task and {steps} finished "
            f"step(s) ({len(saved.messages)} messages, this turn: {outcome}); continue with "
            f"`fusion-tui run --session {saved.id} TASK`"
        )
