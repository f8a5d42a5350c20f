"""Provides `Welcome`: the first screen's block in an empty chat, saying what to do.

It names the model and its slots (from the server status, as they become known), how to send,
and the keys for sessions, the slot map, the launch wizard and help (after the user's keymap).
The chat view removes it when the first message is drawn. Clock-free, so snapshots are stable.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.widgets import Static

from fusion_tui.status import ServerStatus

KeyFor = Callable[[str], str]

KEYS = [
    ("sessions", "resume a saved session"),
    ("new-session", "start a new session"),
    ("toggle-slot-map", "show or hide the slot map"),
    ("launch-model", "launch another model (the wizard)"),
    ("help", "every key and command"),
    ("command-palette", "the command palette"),
]
"""(binding id, what it does), in the order shown."""


def server_line(status: ServerStatus) -> str:
    if status.state == "ready":
        return f"Model  {status.model} · {status.slots} slots × {status.n_ctx:,} ctx"
    if status.state == "error":
        return "Model  the server did not start: F2 picks a model, F5 tries again"
    return f"Model  {status.model or 'starting'} · {status.state}…"


def welcome_text(status: ServerStatus, key_for: KeyFor, workspace: str | None = None) -> str:
    what = (
        f"Agent mode in {workspace}: each message is a task the model carries out there."
        if workspace
        else "Type a message and press Enter to send; Ctrl+J adds a new line."
    )
    rows = [f"  {key_for(binding_id) or '-':<6} {text}" for binding_id, text in KEYS]
    return "\n".join(["Welcome to fusion-tui", server_line(status), what, "", *rows])


class Welcome(Static):
    """The block an empty chat shows; `update_status` redraws it as the server comes up."""

    DEFAULT_CSS = """
    Welcome {
        height: auto;
        margin: 0 0 1 0;
        padding: 0 1;
        border-left: thick $accent;
        color: $text-muted;
    }
    """

    def __init__(
        self, status: ServerStatus, key_for: KeyFor, *, workspace: str | None = None
    ) -> None:
        super().__init__(welcome_text(status, key_for, workspace), markup=False, id="welcome")
        self.key_for = key_for
        self.workspace = workspace

    def update_status(self, status: ServerStatus) -> None:
        self.update(welcome_text(status, self.key_for, self.workspace))
