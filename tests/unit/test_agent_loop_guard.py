"""The loop guard: a repeated identical failing call is refused, then the task ends `stuck`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fusion_tui.agent.events import RepeatBlocked, TaskOutcome, ToolFinished
from fusion_tui.agent.loop import run_task
from fusion_tui.agent.loop_guard import LoopGuard
from tests.fakes.clock import FakeClock
from tests.unit.test_agent_fakes import Script, act, make_deps


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "hello.txt").write_text("hi\n")
    return tmp_path


async def test_fourth_identical_failure_is_not_run_and_a_fifth_ends_stuck(ws: Path) -> None:
    clock = FakeClock()
    script = Script(clock, [act("list_dir", path="hello.txt")] * 5)
    events: list[Any] = []
    res = await run_task("list it", session_id="s", deps=make_deps(ws, script, events=events))
    ran = [e for e in events if isinstance(e, ToolFinished)]
    assert len(ran) == 3 and all(not e.ok for e in ran)
    blocked = [e for e in events if isinstance(e, RepeatBlocked)]
    assert [(b.step, b.stuck, b.failures) for b in blocked] == [(4, False, 3), (5, True, 3)]
    assert "not a directory" in blocked[0].error
    # the model saw the corrective message in place of a fourth result
    assert "list_dir not run" in script.bodies[4]["prompt"]
    assert "3 times in a row" in script.bodies[4]["prompt"]
    assert res.outcome == "stuck" and res.steps == 5
    assert "list_dir" in res.error and "not a directory" in res.error
    assert isinstance(events[-1], TaskOutcome) and events[-1].outcome == "stuck"


async def test_a_changed_call_after_the_warning_runs_and_the_task_goes_on(ws: Path) -> None:
    clock = FakeClock()
    script = Script(
        clock,
        [act("list_dir", path="hello.txt")] * 4
        + [act("read_file", path="hello.txt"), act("finish", summary="it says hi")],
    )
    events: list[Any] = []
    res = await run_task("t", session_id="s", deps=make_deps(ws, script, events=events))
    assert res.outcome == "completed" and res.summary == "it says hi"
    assert [e.stuck for e in events if isinstance(e, RepeatBlocked)] == [False]
    assert [e.ok for e in events if isinstance(e, ToolFinished)] == [False, False, False, True]


def test_guard_counts_only_identical_calls_with_the_same_error() -> None:
    g = LoopGuard()
    for _ in range(2):
        g.record("read_file", {"path": "a"}, False, "a does not exist")
    g.record("read_file", {"path": "a"}, False, "a is a directory")  # another error: afresh
    assert g.failures == 1
    g.record("read_file", {"path": "a"}, False, "a is a directory")
    g.record("read_file", {"path": "a"}, False, "a is a directory")
    assert g.check("read_file", {"path": "b"}) == "run"
    assert g.check("read_file", {"path": "a"}) == "block"
    assert g.check("read_file", {"path": "a"}) == "stuck"
    g.record("read_file", {"path": "a"}, True, "")
    assert g.check("read_file", {"path": "a"}) == "run"
