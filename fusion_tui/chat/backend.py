"""Provides `Backend`: the one interface the UI uses to reach a server and run turns.

The TUI never talks to httpx or the daemon directly; tests hand it a scripted backend.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Protocol

from fusion_tui.chat.events import ReplyEvent
from fusion_tui.status import ServerStatus

StatusCallback = Callable[[ServerStatus], None]


class Backend(Protocol):
    async def start(self, report: StatusCallback) -> ServerStatus:
        """Reach a ready server (launching or adopting the managed one); report each stage."""
        ...

    def reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        """Send `text` as the session's next user message and stream the answer.

        Closing the iterator early (cancel) ends the request; the partial answer is kept.
        """
        ...

    def history(self) -> list[tuple[str, str]]:
        """(role, text) of the current session's messages, for redrawing the chat."""
        ...

    async def close(self) -> None: ...
