"""Provides `Backend`: the one interface the UI uses to reach a server, run turns and keep sessions.

The TUI never talks to httpx, the daemon or the session store directly; tests hand it a scripted
backend. Everything the screens ask is here, typed, so a rename is a mypy error rather than a
"not available" notice at run time. What a backend cannot do it says by returning `None` (the
optional views) or by raising `Unavailable` with a sentence for the user.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncGenerator, Callable
from typing import NamedTuple, Protocol

from fusion_tui.chat.events import ReplyEvent
from fusion_tui.server.connect import Connection
from fusion_tui.server.errors import ServerError
from fusion_tui.server.types import SlotState
from fusion_tui.sessions.model import Message
from fusion_tui.sessions.store import SessionEntry
from fusion_tui.status import ServerStatus

StatusCallback = Callable[[ServerStatus], None]


class Said(NamedTuple):
    """One message of the session as the chat redraws it; `partial_reason` marks a turn cut
    short ("cancelled", "error", ...), as the session file keeps it, None for a whole one."""

    role: str
    text: str
    partial_reason: str | None = None


def said(message: Message) -> Said:
    """A stored message as the chat shows it (its cancel mark kept)."""
    reason = (message.partial_reason or "unfinished") if message.partial else None
    return Said(message.role, message.content, reason)


class Unavailable(ServerError):
    """This backend cannot do that (no owned server, no sessions); the message says so."""


class SessionCatalog(Protocol):
    """The saved sessions, for the sessions screen. Blocking file I/O: call it from a thread."""

    def list(self) -> builtins.list[SessionEntry]:
        """Every session file, newest first; damaged ones listed with their reason."""
        ...

    def search(self, text: str) -> builtins.list[SessionEntry]:
        """Sessions whose messages contain `text`."""
        ...

    def rename(self, session_id: str, title: str) -> object: ...

    def remove(self, session_id: str) -> None: ...


class SlotView(Protocol):
    """What the slot map reads: the server's slots and who holds them."""

    async def slots(self) -> builtins.list[SlotState]:
        """`/slots` now (`ServerError` when it cannot be read)."""
        ...

    def slot_owners(self) -> dict[int, str]:
        """Slot id → who holds it: this session's title, or "side"."""
        ...

    def prompt_totals(self) -> dict[int, int]:
        """Prompt length of the request in flight per slot (the slot map's progress total)."""
        ...

    def session_on_slot(self, slot: int) -> str | None:
        """The session that most likely holds `slot` on this server, if any."""
        ...

    def sessions_on_disk(self) -> builtins.list[str]:
        """Titles of the sessions whose slot is saved on disk and in no slot now."""
        ...


class Backend(Protocol):
    # --- turns ---------------------------------------------------------------------------------

    async def start(self, report: StatusCallback) -> ServerStatus:
        """Reach a ready server (launching or adopting the managed one); report each stage."""
        ...

    def reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        """Send `text` as the session's next user message and stream the answer.

        Closing the iterator early (cancel) ends the request; the partial answer is kept.
        """
        ...

    async def read_ahead(self) -> None:
        """The user started typing the next message: prepare what its turn will need (the plain
        chat: the session's slot, and the next prompt's opening read into it). Called once per
        keystroke run; cheap to call again; never raises for a server that is not there."""
        ...

    def history(self) -> builtins.list[Said]:
        """The current session's messages with their cancel marks, for redrawing the chat."""
        ...

    async def close(self) -> None:
        """Release the server (stopping the daemon this process launched unless kept)."""
        ...

    # --- sessions ------------------------------------------------------------------------------

    async def new_session(self) -> str | None:
        """Leave the current session (saved, its slot kept warm) for a fresh one; a note."""
        ...

    async def open_session(self, session_id: str) -> str | None:
        """Leave the current session for a saved one (`SessionStoreError` if unreadable)."""
        ...

    def sessions(self) -> SessionCatalog | None:
        """The saved sessions, or None when this backend keeps none."""
        ...

    def current_session_id(self) -> str | None:
        """The open session's id (a relaunch resumes it), or None when it is not kept."""
        ...

    async def make_title(self) -> str | None:
        """Name the session after its first turn (a side call); None when nothing came of it."""
        ...

    async def compact(self) -> str | None:
        """Summarise the session's older turns in the prompt now (a side call); the notice, or
        None when there is nothing to compact (`Unavailable`: this backend cannot)."""
        ...

    # --- the server ----------------------------------------------------------------------------

    async def stop_server(self) -> str | None:
        """Save what can be saved and stop the managed daemon (`Unavailable`: not ours). None:
        the session's server was stopped; a sentence: what was done while the session's own
        endpoint keeps serving (a remote endpoint: only the server here stops)."""
        ...

    async def adopt(self, conn: Connection) -> ServerStatus:
        """Relaunch onto a connection made elsewhere (the launch wizard) instead of `start`."""
        ...

    def slot_view(self) -> SlotView | None:
        """The slot map's source once connected, or None when this backend has no slots."""
        ...

    async def died_of_sigill(self) -> bool:
        """After a failed turn: the managed server this app launched died of SIGILL with
        repacking on (`sigill_recovery`); a relaunch now starts it with `--no-repack`."""
        ...
