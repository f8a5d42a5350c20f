"""Snapshots of the help screen (keys after the keymap, palette commands, how to remap)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.snapshots.look_support import SIZE_IDS, SIZES, make_app, settle


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_help_lists_keys_and_commands(
    snap_compare: Any, tmp_path: Path, size: tuple[int, int]
) -> None:
    """You should see a rounded box titled "Keys and commands" over the main screen, in
    fusion-dark: sections "Everywhere" (^q, ^p, f1, ?, ^o, esc), "Main screen" (esc, ^l, ^r, ^b,
    ^n, f2) with each binding's id in a dim right-hand column, "Prompt box" (enter, ^j), then at
    160×48 the "Command palette (^p)" table of nine commands with their keys. At 80×24 the box
    scrolls (scrollbar on its right) and no line is cut mid-word."""

    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        await pilot.press("f1")
        await settle(pilot)

    assert snap_compare(make_app(tmp_path), terminal_size=size, run_before=run_before)


def test_help_shows_remapped_keys(snap_compare: Any, tmp_path: Path) -> None:
    """You should see the help box in fusion-light where "Help" reads f9 (not f1) and "server
    log" reads f3 / ^o: the keymap from config is what the help screen shows."""
    from fusion_tui.config import Settings
    from fusion_tui.config.settings import UISettings
    from fusion_tui.tui.app import build_app
    from tests.snapshots.look_support import home
    from tests.tui.scripted_backend import ScriptedBackend

    keys = {"help": "f9", "server-log": "f3,ctrl+o"}
    settings = Settings(ui=UISettings(cursor_blink=False, theme="fusion-light", keys=keys))
    app = build_app(settings, ScriptedBackend(), paths=home(tmp_path))

    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        await pilot.press("f9")
        await settle(pilot)

    assert snap_compare(app, terminal_size=(100, 30), run_before=run_before)
