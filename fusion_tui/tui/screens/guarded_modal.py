"""Provides `GuardedModal`: a modal that pops up mid-typing and must not be answered by typing.

The approval modal and the failover dialog both appear while the user may be typing the next
message. So no typed character answers them: letters (and space) are text, kept in `typed` and
handed back to the prompt box when the modal closes (shown meanwhile in the modal's typed note).
Decisions take deliberate keys (the subclass's Ctrl+ binding, Enter on the focused button, Esc)
or a click, and none counts within `APPROVAL_GRACE_S` of the modal appearing or of a key it
took as typing, so an Enter or Esc still on its way from the prompt box decides nothing. An
Enter that ends what was typed here (no Tab or arrow since) is the end of a message, not an
answer: the text is sent as the user's next message once the turn allows (`send_typed`). Seen
in a trial: a message typed as the test run's approval popped up, ended with Enter 0.5 s later,
pressed Deny, and the task ended "not tested".

A paste is text too: a bracketed paste (`Paste`) is kept whole, and in a paste that arrives as
a burst of keys an Enter or Tab right after the key before it is a new line (a tab) of the text,
by the prompt box's rule (`key_clock.pasted_text`). Seen in a trial: a two-line task pasted
while the approval was up lost its line break and was queued to send at the first line's end.
"""

from __future__ import annotations

from typing import ClassVar, TypeVar

from textual import events
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Static

from fusion_tui.clock import Clock
from fusion_tui.tui.key_clock import APPROVAL_GRACE_S, KeyClock, pasted_text

R = TypeVar("R")

PASSING_KEYS = {"tab", "shift+tab", "left", "right", "up", "down"}
"""Keys that only move between the buttons: always let through, never counted as typing."""


class GuardedModal(ModalScreen[R]):
    """Typing is kept, not obeyed; decisions only once the modal is up and the keys are quiet.

    A subclass composes a `Static` with id `TYPED_ID` (hidden until something is typed; its
    CSS gives it `display: none` and `.-shown` `display: block`)."""

    TYPED_ID: ClassVar[str] = "typed"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "app.focus_previous", show=False),
        Binding("right", "app.focus_next", show=False),
    ]

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__()
        self.key_clock = KeyClock(clock)
        self.shown_at = self.key_clock.now()
        self.typed = ""
        """Text typed while the modal was up: it goes back to the prompt box."""
        self.send_typed = False
        """The user ended `typed` with Enter: it is sent as their next message."""
        self._typed_at: float | None = None
        self._moved = False
        """A Tab or arrow came after the last key typed: an Enter now presses a button."""

    def on_mount(self) -> None:
        """(Textual calls every class's `on_mount` along the MRO: a subclass's need not call
        this one.)"""
        self.shown_at = self.key_clock.now()

    def settled(self, at: float) -> bool:
        """The modal has been up, and the keyboard quiet, for the grace period."""
        since_typing = at - self._typed_at if self._typed_at is not None else float("inf")
        return at - self.shown_at >= APPROVAL_GRACE_S and since_typing >= APPROVAL_GRACE_S

    def too_soon_for_a_click(self) -> bool:
        """A click right as the modal appeared was meant for what was under it."""
        return self.key_clock.now() - self.shown_at < APPROVAL_GRACE_S

    def on_key(self, event: events.Key) -> None:
        """Before the bindings (which run once the key has bubbled past this screen): text
        is kept for the prompt, and a decision key within the grace period is dropped."""
        at = self.key_clock.of(event)
        pasted = pasted_text(event.key, at, self._typed_at)
        if pasted is not None and self.typed:  # a paste without bracketed paste
            self._take_typing(event, at, self.typed + pasted)
            return
        if event.key in PASSING_KEYS:
            self._moved = True
            return
        if event.is_printable and event.character:
            self._take_typing(event, at, self.typed + event.character)
        elif event.key == "enter" and self.typed.strip() and not self._moved:
            self.send_typed = True
            self._take_typing(event, at, self.typed)
        elif event.key == "backspace" and self.typed:
            self._take_typing(event, at, self.typed[:-1])
        elif not self.settled(at):
            self._take_typing(event, at, self.typed)

    def on_paste(self, event: events.Paste) -> None:
        """A bracketed paste is text for the prompt box, kept whole (its new lines too)."""
        self._take_typing(event, self.key_clock.now(), self.typed + event.text)

    def _take_typing(self, event: events.Key | events.Paste, at: float, typed: str) -> None:
        event.stop()
        event.prevent_default()
        self._typed_at = at
        self._moved = False
        self.typed = typed
        how = "sent as your next message" if self.send_typed else "back to your message"
        note = self.query_one(f"#{self.TYPED_ID}", Static)
        note.update(f"typed here, {how} after this: “{typed}”")
        note.set_class(bool(typed), "-shown")
