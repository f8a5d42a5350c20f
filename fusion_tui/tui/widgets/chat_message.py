"""Provides `ChatMessage`: one message of the chat, streamed through Textual's MarkdownStream.

The stream batches fragments whenever the widget falls behind, so the cost per token stays flat
instead of re-rendering the whole Markdown on every token.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

ROLE_LABELS = {"user": "you", "assistant": "model", "system": "system", "notice": "·"}


class ChatMessage(Vertical):
    """A role label, the Markdown body, and a footnote (telemetry or why a turn stopped)."""

    DEFAULT_CSS = """
    ChatMessage {
        height: auto;
        margin: 0 0 1 0;
        padding: 0 1;
    }
    ChatMessage > .role {
        color: $text-muted;
        text-style: bold;
    }
    ChatMessage.-user > .role { color: $primary; }
    ChatMessage.-assistant > .role { color: $accent; }
    ChatMessage.-notice { padding: 0 1; margin: 0 0 1 0; }
    ChatMessage.-notice > Markdown { color: $text-muted; }
    ChatMessage > Markdown {
        margin: 0;
        padding: 0;
        background: transparent;
    }
    /* code: long lines wrap inside the pane instead of being cut at its edge (Textual's fence
       scrolls sideways with a hidden scrollbar, which reads as cut in a terminal) */
    ChatMessage MarkdownFence { overflow-x: hidden; }
    ChatMessage MarkdownFence > Label { width: 1fr; text-wrap: wrap; }
    ChatMessage > .footnote {
        color: $text-muted;
        display: none;
    }
    ChatMessage > .footnote.-shown { display: block; }
    ChatMessage.-partial > .footnote { color: $warning; }
    """

    def __init__(self, role: str, text: str = "", *, id: str | None = None) -> None:
        super().__init__(id=id, classes=f"-{role}")
        self.role = role
        self._initial = text
        self._text = text
        self._stream: MarkdownStream | None = None

    def compose(self) -> ComposeResult:
        yield Static(ROLE_LABELS.get(self.role, self.role), classes="role")
        yield Markdown(self._initial)
        yield Static("", classes="footnote")

    @property
    def text(self) -> str:
        """Everything written so far (the stream may still be drawing the tail)."""
        return self._text

    async def append(self, fragment: str) -> None:
        if not fragment:
            return
        self._text += fragment
        if self._stream is None:
            self._stream = Markdown.get_stream(self.query_one(Markdown))
        await self._stream.write(fragment)

    async def restart(self) -> None:
        """Drop what was streamed so far (the turn is being sent again elsewhere)."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        self._text = ""
        await self.query_one(Markdown).update("")

    async def finish(self, footnote: str = "", *, partial: bool = False) -> None:
        """Flush the stream and show the footnote; `partial` marks a turn that did not finish."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        self.set_footnote(footnote)
        self.set_class(partial, "-partial")

    def set_footnote(self, footnote: str) -> None:
        note = self.query_one(".footnote", Static)
        note.update(footnote)
        note.set_class(bool(footnote), "-shown")
