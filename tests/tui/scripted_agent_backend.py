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


STATS_DIFF = """\
--- a/stats.py
+++ b/stats.py
@@ -1,3 +1,3 @@
 def mean(values):
     \"\"\"The arithmetic mean of a non-empty list of numbers.\"\"\"
-    return sum(values) / (len(values) - 1)
+    return sum(values) / len(values)
"""
FAILED = """\
FAILED test_stats.py::test_mean - assert 3.3333333333333335 == 2.5
1 failed, 1 passed in 0.02s"""
TEST_CMD = "pytest -q test_stats.py"


def fix_with_tests() -> list[ReplyEvent]:
    """A task run with a test command, as the agent backend shows it: the failing tests first,
    the step, the write with its diff, the tests passing, the answer and the end line (the
    events go through the backend's own `reply_events`)."""
    from fusion_tui.agent import events as ev
    from fusion_tui.chat.agent_backend import reply_events

    agent: list[ev.AgentEvent] = [
        ev.TestRan(0, TEST_CMD, False, 1, FAILED, 0, 640.0),
        ev.StepStarted(1, 30, 7_199_000),
        ev.RequestDone(1, "step", 0, 1211, 0, 96, 29_800.0, 9.1, 41_000.0, 3890),
        ev.ToolStarted(1, "write_file", {"path": "stats.py"}),
        ev.ToolFinished(
            1, "write_file", {"path": "stats.py"}, True, "wrote stats.py", 2.0, STATS_DIFF
        ),
        ev.TestRan(1, TEST_CMD, True, 0, "2 passed in 0.01s", 1, 610.0),
    ]
    shown = [out for e in agent for out in reply_events(e)]
    return [
        *shown,
        TextDelta("`mean` divided by one less than the count; it now divides by the count."),
        ReplyDone(
            "completed",
            note="completed · 1 step · slot 0 · 0 of 1,211 prompt tokens cached · changed stats.py",
        ),
    ]


def no_change() -> list[ReplyEvent]:
    """A change task that ended without a change: the end line says so."""
    return [
        Notice("step 1/30 · 119m59s left"),
        Notice("step 2/30 · 119m40s left"),
        TextDelta("I would divide by `len(values)`."),
        ReplyDone("no_change", note="no_change · 2 steps · no file was changed", partial=True),
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
