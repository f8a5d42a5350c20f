"""Provides `KeyClock`: when a key came, to tell a burst of keys from a deliberate press.

Two places need it. The approval modal and the failover dialog pop up while the user may be
typing the next message: keys already on their way must not answer them. The prompt box gets a
paste without bracketed paste as a burst of keys with Enter between the lines: those Enters are
new lines, not "send". A terminal delivers a paste (and keys queued while the app was busy) with
the driver's arrival stamps microseconds apart; a person's keys come tens of milliseconds apart
at the fastest.

A key's time is its arrival stamp (`events.Key.time`, taken when the driver read it, so a key
handled late is still judged by when it came); tests inject a `Clock` instead.
"""

from __future__ import annotations

import sys
import time

from textual import events

from fusion_tui.clock import Clock

PASTE_GAP_S = 0.015
"""A key closer than this to the previous one belongs to the same burst (a paste, or keys queued
together). Fast typing is 60-150 ms a key; an Enter rolled onto the last letter faster is rare."""

BURST_KEYS = {"enter": "\n", "tab": "\t"}
"""Keys that are text, not a command, inside a burst of pasted keys (a paste without bracketed
paste): the prompt box and the guarded modals read them alike."""


def pasted_text(key: str, at: float, last: float | None) -> str | None:
    """The text `key`, come at `at`, stands for when it follows the key at `last` within
    `PASTE_GAP_S` (a new line, a tab); None when it is the key it names."""
    in_burst = last is not None and 0 <= at - last <= PASTE_GAP_S
    return BURST_KEYS.get(key) if in_burst else None


APPROVAL_GRACE_S = 0.5
"""The approval modal and the failover dialog (`GuardedModal`) take no decision within this long
of appearing, nor within this long of a key they took as typing: the user has seen the modal and
stopped typing."""

_STAMP = time.perf_counter if sys.platform == "win32" else time.monotonic
"""The clock Textual stamps events with."""


class KeyClock:
    """Key times, from the events' own stamps or (tests) an injected clock."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock

    def now(self) -> float:
        return self.clock.now() if self.clock is not None else _STAMP()

    def of(self, event: events.Key) -> float:
        return self.clock.now() if self.clock is not None else event.time
