"""Snapshots of the main screen after a finished turn, in a dark and a light theme."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.snapshots.look_support import SIZE_IDS, SIZES, make_app, settle


@pytest.mark.parametrize("theme", ["fusion-dark", "fusion-light"])
@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_main_screen_theme(
    snap_compare: Any, tmp_path: Path, size: tuple[int, int], theme: str
) -> None:
    """You should see, in the named theme (fusion-dark: near-black blue-grey with sky-blue and
    amber; fusion-light: off-white with ink blue and burnt orange), the question "sort words by
    length?" under a "you" label, the model's answer with an inline `sorted`, a highlighted
    Python code block and a closing sentence, the footnote "slot 2 · 30 of 42 prompt tokens
    cached", the prompt box, the status line, and a footer with ^r Sessions, ^b Slots, f1 Help,
    ^o Log and ^p Commands at the right. No toast covers anything."""

    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        await pilot.press(*"sort words by length?", "enter")
        await settle(pilot)

    assert snap_compare(make_app(tmp_path, theme=theme), terminal_size=size, run_before=run_before)
