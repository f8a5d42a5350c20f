"""Snapshots of the server-log screen, fed from a fixed log file (tests/snapshots/data)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.snapshots.look_support import LOG_FIXTURE, SIZE_IDS, SIZES, home, make_app, settle


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_server_log_tails_the_file(
    snap_compare: Any, tmp_path: Path, size: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """You should see a bold title bar "server log · ~/home/log/llama-server.log", then the last
    lines of the fixed llama-server log ending with "srv  log_server_r: request: POST
    /completion 127.0.0.1 200" at the bottom (newest last, scrolled to the end), and a footer with
    esc Close, f1 Help, ^o Log. At 80×24 long lines are cut at the right edge with a horizontal
    scrollbar showing there is more; at 160×48 every line fits."""
    monkeypatch.setenv("HOME", str(tmp_path))
    paths = home(tmp_path)
    paths.log_dir.mkdir(parents=True)
    shutil.copy(LOG_FIXTURE, paths.log_dir / "llama-server.log")

    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        await pilot.press("ctrl+o")
        await settle(pilot)

    assert snap_compare(make_app(tmp_path), terminal_size=size, run_before=run_before)


def test_server_log_before_the_server_ever_ran(
    snap_compare: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """You should see the title bar and, instead of an empty pane, a muted explanation: "No log
    yet at ~/home/log/llama-server.log." and that an external server logs elsewhere."""
    monkeypatch.setenv("HOME", str(tmp_path))

    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        await pilot.press("ctrl+o")
        await settle(pilot)

    assert snap_compare(make_app(tmp_path), terminal_size=(80, 24), run_before=run_before)
