"""Key bursts as a terminal delivers them: every key queued at once, no waiting between keys.

`pilot.press` waits for the app to be idle after each key, so it never shows the race a fast
typist or a paste without bracketed paste causes: the app handles key N+1 (its priority
bindings) before the focused prompt box has drawn key N.
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.app import App

NAMED = {
    "?": "question_mark",
    " ": "space",
    "!": "exclamation_mark",
    "/": "slash",
    ".": "full_stop",
    ",": "comma",
    ":": "colon",
    "(": "left_parenthesis",
    ")": "right_parenthesis",
    "\r": "enter",
}


def burst(app: App[Any], *parts: str) -> None:
    """Queue one key event per character of each part (`\\r` is Enter), as the driver would;
    a part such as "ctrl+j" is that one key."""
    driver = app._driver  # the same entry point Pilot uses, minus its waits
    assert driver is not None
    for part in parts:
        pairs: list[tuple[str, str | None]]
        if part.startswith("ctrl+"):
            pairs = [(part, None)]
        else:
            pairs = [(NAMED.get(c, c), "\r" if c == "\r" else c) for c in part]
        for key, char in pairs:
            event = events.Key(key, char)
            event.set_sender(app)
            driver.send_message(event)
