"""Snapshots of the sessions screen over a fixed store (fixed ids, times and clock; no blink)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tui.test_sessions_screen import SessionsHost, make_store, settle

SIZES = [(80, 24), (160, 48)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_sessions_with_a_damaged_file(
    snap_compare: Any, size: tuple[int, int], tmp_path: Path
) -> None:
    """A centred "Sessions" panel: the search box (empty, focused), then "Benchmark cache reuse"
    (2 msg · 2 min ago), "Fix the parser bug" (1 msg · slot 2 · 1 h ago), "Write the README"
    (0 msg · 2 d ago), each with its workspace and id under it, and last, in the error colour,
    "✗ damaged 20250604-090000-000-dddddd.json" with the JSON error under it. Below the list:
    "4 sessions · 1 unreadable (left untouched; move them away by hand)" and the key hints."""
    app = SessionsHost(make_store(tmp_path))

    async def run_before(pilot: Any) -> None:
        await settle(pilot.app)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_search_narrows_the_list(snap_compare: Any, tmp_path: Path) -> None:
    """120×30: the search box reads "parser" and only "Fix the parser bug" is listed, with the
    note "1 session"."""
    app = SessionsHost(make_store(tmp_path))

    async def run_before(pilot: Any) -> None:
        await settle(pilot.app)
        await pilot.press(*"parser")
        await settle(pilot.app)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 30), run_before=run_before)
