"""`chat.agent_backend`: what the chat shows for each agent event, and the end line."""

from __future__ import annotations

from fusion_tui.agent.events import (
    PromptProgressed,
    RequestDone,
    StepStarted,
    TaskOutcome,
    TokenDelta,
    ToolFinished,
    WorkerEvent,
)
from fusion_tui.agent.prompt import PromptPacker
from fusion_tui.agent.session_run import TurnReport
from fusion_tui.agent.task import TaskResult
from fusion_tui.chat.agent_backend import outcome_note, reply_events
from fusion_tui.chat.events import Notice, Progress, ToolBlock
from fusion_tui.server.template import TemplateFrame
from fusion_tui.server.types import StreamEnd
from fusion_tui.sessions.model import Session

DONE = RequestDone(1, "step", 2, 40, 600, 12, 150.0, 88.5, 900.0, 2400)
TOOL = ToolFinished(1, "edit_file", {"path": "a.py"}, True, "edited", 41.0, "--- a\n+++ b\n")


def test_steps_progress_and_requests() -> None:
    assert reply_events(StepStarted(2, 8, 125_000)) == [Notice("step 2/8 · 2m05s left")]
    assert reply_events(PromptProgressed(1, 900, 300, 450, 75.0)) == [Progress(450, 900, 300, 75.0)]
    [end] = reply_events(DONE)
    assert isinstance(end, StreamEnd) and end.id_slot == 2
    assert (end.timings.prompt_n, end.timings.cache_n, end.timings.predicted_n) == (40, 600, 12)
    cut = RequestDone(1, "step", 2, 0, 0, 0, None, 0.0, 5.0, 10, ended="cancelled")
    assert reply_events(cut) == []


def test_tools_become_blocks_and_json_tokens_are_not_prose() -> None:
    assert reply_events(TOOL) == [
        ToolBlock("edit_file", {"path": "a.py"}, "edited", True, 41.0, "--- a\n+++ b\n")
    ]
    [block] = reply_events(WorkerEvent(2, "s/w2", TOOL))
    assert isinstance(block, ToolBlock) and block.name == "worker 2 · edit_file"
    assert reply_events(TokenDelta(1, '{"tool"')) == []
    assert reply_events(TaskOutcome("completed", "done", 3, "s")) == []


def test_the_end_line_says_what_vouches_for_the_change() -> None:
    packer = PromptPacker(TemplateFrame.chatml(), "SYS")
    result = TaskResult("completed", "", 2, "s", packer, [DONE], changed=["a.py"],
                        checked="not tested")  # fmt: skip
    note = outcome_note(TurnReport("completed", Session.new(), result))
    assert note.endswith("· changed a.py · not tested"), note
