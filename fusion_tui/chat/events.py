"""Provides the events a reply streams to its consumer (the TUI or `fusion-tui run --json`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fusion_tui.chat.live_step import LiveStep
from fusion_tui.server.types import StreamEnd, TextDelta
from fusion_tui.slots.progress import Progress


@dataclass(frozen=True)
class Notice:
    """Something the user should know while a reply is pending ("waiting for slot 2")."""

    text: str


@dataclass(frozen=True)
class Compacted(Notice):
    """The session's older turns were replaced in the prompt by a summary (the session file and
    the screen keep them): `turns` summarised, prompt tokens `before` → `after`."""

    turns: int = 0
    before: int = 0
    after: int = 0


@dataclass(frozen=True)
class EndpointMoved(Notice):
    """The session moved to another endpoint; `text` names both and the cold cost.
    Headless `chat` says it on stderr in both output modes."""

    endpoint: str = ""
    moved_from: str = ""


@dataclass(frozen=True)
class AnswerRestarted(Notice):
    """The stream broke mid-answer, its endpoint is gone and the turn is sent again on another
    one: the answer shown so far is dropped (the new answer replaces it)."""


@dataclass(frozen=True)
class ReplyDone:
    """The turn ended. `outcome` is completed, cancelled, error, ...; `note` says what it cost."""

    outcome: str
    note: str = ""
    partial: bool = False


@dataclass(frozen=True)
class ToolBlock:
    """An agent tool call that finished: drawn as a collapsible block in the chat."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    result: str = ""
    ok: bool = True
    duration_ms: float = 0.0
    diff: str = ""
    """The unified diff of a write, or the full command of a shell call (for the UI only)."""
    note: str = ""
    """Shown in the title instead of the duration (a call the loop guard did not run)."""


@dataclass(frozen=True)
class TurnEndpoint:
    """The endpoint this turn runs on (sent only when several endpoints are configured)."""

    label: str


ReplyEvent = (
    TextDelta | StreamEnd | Notice | ReplyDone | Progress | ToolBlock | LiveStep | TurnEndpoint
)

__all__ = [
    "AnswerRestarted",
    "Compacted",
    "EndpointMoved",
    "LiveStep",
    "Notice",
    "Progress",
    "ReplyDone",
    "ReplyEvent",
    "StreamEnd",
    "TextDelta",
    "ToolBlock",
    "TurnEndpoint",
]
