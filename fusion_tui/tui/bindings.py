"""Provides the binding ids, the app's global and main-screen bindings, and the user keymap.

Every user-facing binding has an id; `ui.keys` in config.yaml maps ids to keys (for example
`help: f9` or `server-log: ctrl+o,f3`), applied with `App.set_keymap`. The ids live here so the
config docs, the help screen and the code agree.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from textual.app import App
from textual.binding import Binding, BindingType

# --- ids ----------------------------------------------------------------------------------------
HELP = "help"
HELP_QUESTION = "help-question"
COMMAND_PALETTE = "command-palette"
QUIT = "quit"
SERVER_LOG = "server-log"
NEW_SESSION = "new-session"
SESSIONS = "sessions"
LAUNCH_MODEL = "launch-model"
TOGGLE_SLOT_MAP = "toggle-slot-map"
CLOSE = "close"
# defined beside their widgets, listed here so a keymap may name them
CANCEL = "cancel"
FOCUS_PROMPT = "focus-prompt"
PROMPT_NEWLINE = "prompt-newline"
SCROLL_CHAT_UP = "scroll-chat-up"
SCROLL_CHAT_DOWN = "scroll-chat-down"

APP_BINDINGS: list[BindingType] = [
    Binding("ctrl+q", "quit", "Quit", show=False, priority=True, id=QUIT),
    Binding("ctrl+p", "command_palette", "Commands", show=False, priority=True, id=COMMAND_PALETTE),
    Binding("f1", "toggle_help", "Help", priority=True, id=HELP),  # also closes the modal
    # `?` is never a priority key: a focused prompt box takes it as text (a fast burst or a
    # paste without bracketed paste reaches the app before the box has drawn the keys before it,
    # so "is the box empty?" cannot be asked there); elsewhere it opens help
    Binding("question_mark", "toggle_help", "Help", show=False, key_display="?", id=HELP_QUESTION),
    Binding("ctrl+o", "toggle_server_log", "Log", id=SERVER_LOG),
]
"""Global keys: they work on every screen."""

MAIN_SCREEN_BINDINGS: list[BindingType] = [
    Binding("ctrl+r", "app.open_sessions", "Sessions", id=SESSIONS),
    Binding("ctrl+b", "app.toggle_slot_map", "Slots", id=TOGGLE_SLOT_MAP),
    Binding("ctrl+n", "app.new_session", "New session", show=False, id=NEW_SESSION),
    Binding("f2", "app.open_wizard", "Launch model", show=False, id=LAUNCH_MODEL),
    # priority: the prompt box (a TextArea) would take them to move its cursor a page, and a
    # box of a few lines has no page to move; the chat, while the user types, does
    Binding("pageup", "scroll_chat(-1)", "Scroll up", show=False, priority=True, id=SCROLL_CHAT_UP),
    Binding(
        "pagedown", "scroll_chat(1)", "Scroll down", show=False, priority=True, id=SCROLL_CHAT_DOWN
    ),
]
"""Keys that matter on the main screen (added to `MainScreen.BINDINGS`)."""

CLOSE_BINDING = Binding("escape", "close", "Close", id=CLOSE)
"""Closes the help and server-log screens."""

KNOWN_IDS: dict[str, str] = {
    QUIT: "quit the app",
    COMMAND_PALETTE: "open the command palette",
    HELP: "show or hide the help screen",
    HELP_QUESTION: "the same, when the focus is not in a text box",
    SERVER_LOG: "show or hide the server log",
    SESSIONS: "resume a session",
    TOGGLE_SLOT_MAP: "show or hide the slot map",
    NEW_SESSION: "start a new session",
    LAUNCH_MODEL: "launch a model (the wizard)",
    CLOSE: "close the help or log screen",
    CANCEL: "cancel the streaming reply",
    FOCUS_PROMPT: "move the focus to the prompt box",
    PROMPT_NEWLINE: "a new line in the prompt box",
    SCROLL_CHAT_UP: "scroll the chat up a page, even while you type",
    SCROLL_CHAT_DOWN: "scroll the chat down a page",
}
"""Every id a keymap may name, with what it does (for messages and docs)."""

_KEY = re.compile(r"^[a-z0-9_+]+$|^[^\s,]$")


def keymap_from_settings(keys: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The usable part of `ui.keys` and one-line problems for the rest (unknown ids, bad keys)."""
    keymap: dict[str, str] = {}
    problems: list[str] = []
    for binding_id, value in keys.items():
        if binding_id not in KNOWN_IDS:
            problems.append(
                f"ui.keys.{binding_id}: no such binding id (known: {', '.join(sorted(KNOWN_IDS))})"
            )
            continue
        parts = [p.strip() for p in str(value).split(",")]
        if not parts or not all(p and _KEY.match(p) for p in parts):
            problems.append(
                f"ui.keys.{binding_id}: {value!r} is not a key list such as 'ctrl+o' or 'f3,ctrl+o'"
            )
            continue
        keymap[binding_id] = ",".join(parts)
    return keymap, problems


def describe(binding: Binding) -> str:
    """The long description of a binding for the help screen (the footer shows the short one)."""
    long = KNOWN_IDS.get(binding.id or "")
    return long[0].upper() + long[1:] if long else binding.description


@dataclass(frozen=True)
class KeyRow:
    """One line of the help screen's key table."""

    keys: str
    description: str
    binding_id: str


def key_rows(
    app: App[Any], bindings: Iterable[BindingType], keymap: Mapping[str, str]
) -> list[KeyRow]:
    """The bindings that have an id and a description, with their keys after the keymap."""
    rows: list[KeyRow] = []
    for item in bindings:
        if not isinstance(item, Binding) or not item.id or not item.description:
            continue
        remapped = keymap.get(item.id)
        if remapped is None and item.key_display:
            shown = item.key_display
        else:
            keys = (remapped or item.key).split(",")
            shown = " / ".join(
                app.get_key_display(dataclasses.replace(item, key=k.strip(), key_display=None))
                for k in keys
            )
        rows.append(KeyRow(shown, describe(item), item.id))
    return rows
