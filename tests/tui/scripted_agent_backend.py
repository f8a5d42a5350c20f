"""An agent-mode Backend that plays a script of reply events: no server, no clock."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import TYPE_CHECKING

from fusion_tui.chat.backend import Backend
from fusion_tui.chat.events import Notice, ReplyDone, ReplyEvent, StreamEnd, TextDelta, ToolBlock
from fusion_tui.server.types import Timings
from tests.tui.scripted_backend import ScriptedBackend

DIFF = """\
--- a/app.py
+++ b/app.py
@@ -1,3 +1,3 @@
 def greet(name):
-    return "hi " + name
+    return f"hello {name}"
 print(greet("x"))
"""

TURN: list[ReplyEvent] = [
    Notice("step 1/8 · 7m59s left"),
    StreamEnd(id_slot=1, timings=Timings(prompt_n=420, cache_n=0, predicted_n=12)),
    ToolBlock("list_dir", {"path": "."}, "app.py\nREADME.md\ntests/", True, 3.0),
    Notice("step 2/8 · 7m58s left"),
    ToolBlock(
        "edit_file",
        {"path": "app.py", "search": '"hi " + name', "replace": 'f"hello {name}"'},
        "edited app.py (1 replacement)",
        True,
        41.0,
        DIFF,
    ),
    ToolBlock("run_shell", {"command": "pytest -q"}, "denied by the user", False, 1250.0),
    TextDelta("Changed the greeting in `app.py`; tests were not run (denied)."),
    StreamEnd(id_slot=1, timings=Timings(prompt_n=35, cache_n=610, predicted_n=30)),
    ReplyDone("completed", note="completed · 4 steps · slot 1 · 610 of 645 prompt tokens cached"),
]


class ScriptedAgentBackend(ScriptedBackend):
    """Plays `turns` (lists of reply events), one per user message."""

    def __init__(self, turns: Sequence[Sequence[ReplyEvent]] = (TURN,)) -> None:
        super().__init__()
        self.turns = [list(t) for t in turns]

    async def reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        self.sent.append(text)
        for event in self.turns.pop(0) if self.turns else [ReplyDone("completed")]:
            yield event


if TYPE_CHECKING:  # mypy checks the scripted backends against the protocol
    _backend: Backend = ScriptedAgentBackend()
