"""Scripted agent turns for live steps and the loop guard: no server, no clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence

from fusion_tui.chat.events import LiveStep, Notice, ReplyDone, ReplyEvent, ToolBlock
from tests.tui.scripted_backend import ScriptedBackend

HOLD = object()
"""In a script: stop here and wait until `release` is set (the turn stays in progress)."""

LIVE_TURN: list[ReplyEvent | object] = [
    Notice("step 1/30 · 9m59s left"),
    LiveStep(1, 30, "waiting", slot=1),
    LiveStep(1, 30, "reading", slot=1, processed=1204, total=3310, prompt_tok_s=310.0),
    ToolBlock(
        "read_file", {"path": "util.py"}, "util.py lines 1-2 of 2\n    1  def add(a, b):", True, 4.0
    ),
    Notice("step 2/30 · 9m41s left"),
    LiveStep(
        2,
        30,
        "writing",
        slot=1,
        kind="file",
        name="util.py",
        predicted_n=31,
        tok_s=12.4,
        body_text="def add(a, b):\n    return a + b\n\n\ndef mul(a, b):",
    ),
    HOLD,
]

GUARD_TURN: list[ReplyEvent | object] = [
    *[
        ToolBlock(
            "list_dir",
            {"path": "hello.txt"},
            "hello.txt: a component of the path is not a directory",
            False,
            1.0,
        )
        for _ in range(3)
    ],
    ToolBlock(
        "list_dir",
        {"path": "hello.txt"},
        '### list_dir not run\nYou called list_dir with {"path": "hello.txt"} 3 times '
        "in a row and got the same error each time.",
        False,
        note="same error 3× · not run again",
    ),
    ToolBlock(
        "list_dir",
        {"path": "hello.txt"},
        "### list_dir not run",
        False,
        note="same error 3× · stuck",
    ),
    ReplyDone(
        "stuck",
        note='stuck · 5 steps · list_dir {"path": "hello.txt"} failed '
        "3 times in a row with the same error",
        partial=True,
    ),
]


class LiveStepBackend(ScriptedBackend):
    """Plays `turns`; at HOLD it waits for `release` (a step still being written)."""

    def __init__(self, turns: Sequence[Sequence[ReplyEvent | object]]) -> None:
        super().__init__()
        self.turns = [list(t) for t in turns]
        self.release = asyncio.Event()

    async def reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        self.sent.append(text)
        for event in self.turns.pop(0) if self.turns else [ReplyDone("completed")]:
            if event is HOLD:
                await self.release.wait()
                continue
            yield event  # type: ignore[misc]
