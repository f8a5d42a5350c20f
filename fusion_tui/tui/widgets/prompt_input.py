"""Provides `PromptInput`: the multi-line prompt box. Enter sends; ctrl+j adds a line.

A paste in a terminal without bracketed paste arrives as a burst of keys with Enter (and Tab)
between the lines. An Enter or Tab that comes within `PASTE_GAP_S` of the key before it is part
of such a burst: it goes into the box as a new line (a tab), so the whole paste lands as one
message that the user sends with Enter. An Enter after a pause, however short a person makes it,
sends. A bracketed paste arrives as one `Paste` event and is inserted as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea

from fusion_tui.clock import Clock
from fusion_tui.tui.key_clock import KeyClock, pasted_text


class PromptInput(TextArea):
    """A TextArea that posts `Submitted` on Enter instead of inserting a newline."""

    DEFAULT_CSS = """
    PromptInput {
        height: auto;
        min-height: 3;
        max-height: 10;
        border: tall $border-blurred;
    }
    PromptInput:focus { border: tall $border; }
    """

    BINDINGS = [
        Binding("ctrl+j", "newline", "New line", id="prompt-newline", show=False),
    ]

    @dataclass
    class Submitted(Message):
        """The user sent a prompt. Handled by `on_prompt_input_submitted`."""

        prompt_input: PromptInput
        text: str

        @property
        def control(self) -> PromptInput:
            return self.prompt_input

    @dataclass
    class SendWhenFree(Message):
        """Send what the box holds as soon as the turn allows: the user typed it into a modal
        and ended it with Enter there."""

        prompt_input: PromptInput

        @property
        def control(self) -> PromptInput:
            return self.prompt_input

    def __init__(self, *, id: str | None = None, clock: Clock | None = None) -> None:
        super().__init__(id=id, soft_wrap=True, show_line_numbers=False, tab_behavior="focus")
        self.border_title = "message · enter to send · ctrl+j new line"
        self.key_clock = KeyClock(clock)
        """When keys came (tests inject a clock)."""
        self._burst_at: float | None = None
        """When the last key of the current run of text keys came."""

    def on_key(self, event: events.Key) -> None:
        """Enter sends. `prevent_default` keeps TextArea's own key handler (which would insert a
        newline) from running; every other key goes on to it untouched.

        The new-line keys are handled here too, in the box's own key order: as a binding they
        ran after the app's round trip, so in a fast burst the text typed after Ctrl+J landed
        before its new line (and an Enter right after sent the text without it)."""
        at = self.key_clock.of(event)
        pasted = pasted_text(event.key, at, self._burst_at)
        if event.key in self.newline_keys():
            event.stop()
            event.prevent_default()
            self.action_newline()
            self._burst_at = at
            return
        if pasted is not None:  # a paste without bracketed paste
            event.stop()
            event.prevent_default()
            self.insert(pasted)
            self._burst_at = at
            return
        self._burst_at = at if event.is_printable else None
        if event.key != "enter":
            return
        event.stop()
        event.prevent_default()
        self.submit()

    def submit(self) -> None:
        """Send what the box holds (nothing when it holds only blanks), and empty it."""
        text = self.text.strip()
        if text:
            self.post_message(self.Submitted(self, text))
            self.clear()

    def give_back(self, text: str) -> None:
        """Put a message that could not go back in the box, the cursor at its end, where the
        user's next keys belong."""
        self.load_text(text)
        self.move_cursor(self.document.end)

    def newline_keys(self) -> list[str]:
        keymap = getattr(self.app, "keymap", None) or {}
        keys = keymap.get("prompt-newline", "ctrl+j")
        return [k.strip() for k in keys.split(",") if k.strip() and k.strip() != "enter"]

    def action_newline(self) -> None:
        self.insert("\n")
