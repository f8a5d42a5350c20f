"""Provides the session store's errors, one class per refusal.

Why a module of their own: the store and the cross-process lock both refuse with
`SessionLocked`, and the lock sits below the store; one definition here lets the lock raise the
very error the store's callers catch, instead of a second class the store translates.
"""

from __future__ import annotations


class SessionStoreError(Exception):
    """The store could not do what was asked (I/O failure, refusal); the message says why."""


class SessionNotFound(SessionStoreError):
    """No session file with that id."""


class SessionLocked(SessionStoreError):
    """Another process has the session open to write; the message names it and says what to do."""

    def __init__(self, session_id: str, pid: int | None) -> None:
        who = f"another fusion-tui (pid {pid})" if pid else "another fusion-tui"
        super().__init__(
            f"session {session_id} is open in {who}; it was not changed here. Close it there "
            "first, or start a new session"
        )
        self.session_id = session_id
        self.pid = pid
