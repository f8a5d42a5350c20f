"""Live steps, core: request sent, prompt progress with a rate, the action forming, the tracker."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fusion_tui.agent.events import (
    AgentEvent,
    PromptProgressed,
    RequestSent,
    StepDraft,
    StepStarted,
    ToolStarted,
)
from fusion_tui.agent.loop import run_task
from fusion_tui.agent.reply_draft import read_draft
from fusion_tui.agent.request import DRAFT_INTERVAL_S
from fusion_tui.chat.agent_backend import reply_events
from fusion_tui.chat.live_step import LiveStep, LiveStepTracker
from fusion_tui.server.types import PromptProgress, StreamEnd, StreamEvent, TextDelta, Timings
from tests.fakes.clock import FakeClock
from tests.unit.test_agent_fakes import make_deps

CALL = (
    '<tool_call>\n{"name": "edit_file", "arguments": '
    '{"path": "util.py", "search": "a\\\\b \\"q\\"", "replace": "ü"}}\n</tool_call>'
)
FILE = "Here is the fix.\n\nsolution.py\n```python\ndef f():\n    return 1\n```\nDone."


def test_every_prefix_of_a_call_reads_as_a_call_whose_arguments_grow() -> None:
    start = CALL.index("{")
    seen_name_at = None
    last_path = ""
    for i in range(start, len(CALL)):
        draft = read_draft(CALL[:i])
        assert draft.kind == "call"
        if draft.name is not None:
            assert draft.name == "edit_file"
            seen_name_at = seen_name_at or i
        path = draft.args.get("path", "")
        assert isinstance(path, str) and "util.py".startswith(path)
        assert len(path) >= len(last_path)
        last_path = path
    assert seen_name_at == CALL.index("edit_file") + len("edit_file") + 1  # a cut name is none
    inner = CALL[start : CALL.rindex("}") + 1]
    assert read_draft(CALL[: -len("</tool_call>")]).args == json.loads(inner)["arguments"]
    assert read_draft(CALL).kind == "prose"  # closed: what follows is prose again


def test_a_file_block_reads_as_its_path_and_its_code_so_far() -> None:
    cut = FILE.index("return 1") + len("return")
    draft = read_draft(FILE[:cut])
    assert (draft.kind, draft.name, draft.body) == ("file", "solution.py", "def f():\n    return")
    assert read_draft(FILE[: FILE.index("```") + 3]).kind == "file"
    assert read_draft(FILE[: FILE.index("solution.py") + 4]) == read_draft(
        "Here is the fix.\n\nsolu"
    )
    assert read_draft(FILE).kind == "prose" and read_draft(FILE).body == FILE
    unnamed = read_draft("```python\nx = 1")
    assert (unnamed.kind, unnamed.name, unnamed.body) == ("file", None, "x = 1")
    assert read_draft("```py src/a.py\nx").name == "src/a.py"


class Streamer:
    """A completion that reports prompt progress, then streams one token per clock tick."""

    def __init__(self, clock: FakeClock, replies: list[str], tick: float = 0.05) -> None:
        self.clock, self.replies, self.tick = clock, replies, tick

    def __call__(self, body: dict[str, Any]) -> AsyncIterator[StreamEvent]:
        return self._gen(self.replies.pop(0))

    async def _gen(self, text: str) -> AsyncIterator[StreamEvent]:
        for done in (0, 600, 1200):
            yield PromptProgress(total=1200, cache=0, processed=done, time_ms=0.0)
            self.clock.advance(1.0)
        for ch in text:
            self.clock.advance(self.tick)
            yield TextDelta(ch)
        yield StreamEnd(id_slot=1, timings=Timings(prompt_n=1200, cache_n=0, predicted_n=9))


async def test_the_loop_reports_waiting_reading_and_the_reply_forming(tmp_path: Path) -> None:
    clock = FakeClock()
    events: list[Any] = []
    read = '<tool_call>\n{"name": "read_file", "arguments": {"path": "hello.py"}}\n</tool_call>'
    done = "It prints hi."
    (tmp_path / "hello.py").write_text("print('hi')\n")
    deps = make_deps(tmp_path, Streamer(clock, [read, done]), events=events)  # type: ignore[arg-type]
    await run_task("what does hello.py print?", session_id="s", deps=deps)
    sent = [e for e in events if isinstance(e, RequestSent)]
    assert [(e.step, e.purpose, e.id_slot) for e in sent] == [(1, "step", -1), (2, "step", 1)]
    progress = [e for e in events if isinstance(e, PromptProgressed) and e.step == 1]
    assert [p.processed for p in progress] == [0, 600, 1200]
    assert progress[0].tok_s is None and progress[-1].tok_s == 600.0
    drafts = [e for e in events if isinstance(e, StepDraft) and e.step == 1]
    assert drafts[-1].done and drafts[-1].predicted_n == len(read)
    calls = [d for d in drafts if d.kind == "call"]
    assert calls[-1].name == "read_file" and calls[-1].args == {"path": "hello.py"}
    assert drafts[-1].tok_s == pytest.approx(1 / 0.05)
    # throttled: one draft per DRAFT_INTERVAL_S of stream time, plus the last one
    assert len(drafts) <= len(read) * 0.05 / DRAFT_INTERVAL_S + 2
    assert any(d.kind == "call" and d.name is None for d in drafts)  # before the name was whole
    final = [e for e in events if isinstance(e, StepDraft) and e.step == 2][-1]
    assert (final.kind, final.body) == ("prose", "It prints hi.")


def test_the_tracker_folds_events_into_one_live_block() -> None:
    t = LiveStepTracker()
    states: list[LiveStep] = []
    events: list[AgentEvent] = [
        StepStarted(3, 30, 60_000),
        RequestSent(3, "step", 1, 4000),
        PromptProgressed(3, 3310, 0, 1204, 310.0),
        StepDraft(3, "step", "util.py\n```\ndef a", "file", "util.py", {}, "def a", 14, 12.5),
        StepDraft(
            3,
            "step",
            '<tool_call>{"name": "read_file", "arguments": {"path": "ut',
            "call",
            "read_file",
            {"path": "ut"},
            "",
            20,
            12.5,
        ),
        ToolStarted(3, "read_file", {"path": "util.py"}),
    ]
    for event in events:
        states += t.fold(event)
    assert [s.title() for s in states] == [
        "step 3/30 · waiting for the server",
        "step 3/30 · waiting for slot 1",
        "step 3/30 · reading 1,204 of 3,310 tokens · 310 tok/s",
        "step 3/30 · writing util.py · 14 tokens · 12.5 tok/s",
        "step 3/30 · calling read_file · 20 tokens · 12.5 tok/s",
        "step 3/30 · running read_file",
    ]
    assert states[3].body() == "def a"
    assert states[4].body() == "read_file(path=ut)"
    assert states[5].body() == "read_file(path=util.py)"
    answer = StepDraft(4, "step", "Added mul.", "prose", None, {}, "Added mul.", 9, None)
    t.fold(StepStarted(4, 30, 50_000))
    (state,) = t.fold(answer)
    assert state.slot == 1
    assert state.title() == "step 4/30 · writing the answer · 9 tokens"
    assert state.body() == "Added mul."


def test_reply_events_pass_the_new_events_only_through_the_tracker() -> None:
    assert reply_events(RequestSent(1, "step", -1, 10)) == []
    assert reply_events(StepDraft(1, "step", "{", "prose", None, {}, "{", 1, None)) == []


def test_a_refused_call_becomes_a_failed_block_with_the_guards_note() -> None:
    from fusion_tui.agent.events import RepeatBlocked
    from fusion_tui.chat.events import Notice, ToolBlock

    msg = "### list_dir not run\n..."
    out = reply_events(RepeatBlocked(4, "list_dir", {"path": "x"}, "x is not a dir", 3, msg))
    assert out[0] == Notice("step 4: list_dir repeated · not run again")
    assert out[1] == ToolBlock(
        "list_dir", {"path": "x"}, msg, False, note="made 3× · not run again"
    )
    stuck = RepeatBlocked(5, "list_dir", {"path": "x"}, "x is not a dir", 3, msg, stuck=True)
    block = reply_events(stuck)[1]
    assert isinstance(block, ToolBlock) and block.note.endswith("· stuck")
    # a whole reply given again is named for what it is, not by the guard's hash of it
    again = RepeatBlocked(6, "reply", {"sha256": "03fb3d69e9c01a92"}, "", 2, msg)
    assert reply_events(again)[0] == Notice("step 6: the same edits repeated · not run again")
    assert reply_events(again)[1] == ToolBlock(
        "the same edits", {}, msg, False, note="made 2× · not run again"
    )


def test_a_long_file_shows_only_its_last_lines() -> None:
    code = "\n".join(f"line {i}" for i in range(1, 31))
    state = LiveStep(1, 30, "writing", kind="file", name="big.py", body_text=code)
    shown = state.body().split("\n")
    assert shown[0] == "…" and shown[1:] == [f"line {i}" for i in range(23, 31)]
