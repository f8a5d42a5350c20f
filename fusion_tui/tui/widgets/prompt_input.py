"""Provides `PromptInput`: the multi-line prompt box. Enter sends; ctrl+j adds a line."""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea


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

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, soft_wrap=True, show_line_numbers=False, tab_behavior="focus")
        self.border_title = "message · enter to send · ctrl+j new line"

    def on_key(self, event: events.Key) -> None:
        """Enter sends. `prevent_default` keeps TextArea's own key handler (which would insert a
        newline) from running; every other key goes on to it untouched.

        The new-line keys are handled here too, in the box's own key order: as a binding they
        ran after the app's round trip, so in a fast burst the text typed after Ctrl+J landed
        before its new line (and an Enter right after sent the text without it)."""
        if event.key in self.newline_keys():
            event.stop()
            event.prevent_default()
            self.action_newline()
            return
        if event.key != "enter":
            return
        event.stop()
        event.prevent_default()
        text = self.text.strip()
        if text:
            self.post_message(self.Submitted(self, text))
            self.clear()

    def newline_keys(self) -> list[str]:
        keymap = getattr(self.app, "keymap", None) or {}
        keys = keymap.get("prompt-newline", "ctrl+j")
        return [k.strip() for k in keys.split(",") if k.strip() and k.strip() != "enter"]

    def action_newline(self) -> None:
        self.insert("\n")
