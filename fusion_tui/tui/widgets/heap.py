"""Keeps the cyclic garbage collector's full passes short while a chat grows.

A full pass of CPython's collector walks every tracked object, and each Textual Markdown block is
a widget of about 325 of them: at a 10,000-token answer a pass took 130 ms on a quiet core and
270 ms on a loaded one, the worst event-loop stall `bench/stream_ui.py` saw (layout was second).
The blocks of finished messages live as long as the chat, so the chat view moves what is alive to
the permanent generation (`gc.freeze`) right after a full pass, which is short because that pass
only walks what is new since the last one. Objects frozen alive and dropped later (render caches,
mostly) stay in memory until the chat is cleared or the view goes away, when everything is
handed back: about 1 MB per 2,000 streamed tokens, measured.
Textual itself pauses the collector for the same reason while it scrolls (`PAUSE_GC_ON_SCROLL`).
"""

from __future__ import annotations

import gc

_holders = 0


def hold() -> None:
    """A chat view is mounted: from now on `settle` freezes what is alive."""
    global _holders
    _holders += 1
    settle()


def settle() -> None:
    """Collect what is not frozen yet (a short pass) and freeze what survives."""
    if _holders:
        gc.collect()
        gc.freeze()


def refresh() -> None:
    """Many frozen objects were dropped (the chat was cleared): free them, freeze the rest."""
    if _holders:
        gc.unfreeze()
        settle()


def release() -> None:
    """A chat view is gone: the last one hands every frozen object back to the collector."""
    global _holders
    _holders = max(0, _holders - 1)
    if not _holders:
        gc.unfreeze()
