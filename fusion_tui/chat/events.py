"""Provides the events a reply streams to its consumer (the TUI or `fusion-tui run --json`)."""

from __future__ import annotations

from dataclasses import dataclass

from fusion_tui.server.types import PromptProgress, StreamEnd, TextDelta


@dataclass(frozen=True)
class Notice:
    """Something the user should know while a reply is pending ("waiting for slot 2")."""

    text: str


@dataclass(frozen=True)
class ReplyDone:
    """The turn ended. `outcome` is completed, cancelled, error, ...; `note` says what it cost."""

    outcome: str
    note: str = ""
    partial: bool = False


ReplyEvent = TextDelta | PromptProgress | StreamEnd | Notice | ReplyDone

__all__ = ["Notice", "PromptProgress", "ReplyDone", "ReplyEvent", "StreamEnd", "TextDelta"]
