"""The loop guard: a call repeated since the workspace last changed is refused, whatever its
result; a second repeat ends the task `stuck` (here with fresh attempts off: with a retry left,
a task stuck before it wrote anything starts over, `test_agent_retry.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fusion_tui.agent.approval import HeadlessApprover
from fusion_tui.agent.events import RepeatBlocked, TaskOutcome, ToolFinished
from fusion_tui.agent.loop import AgentConfig, run_task
from fusion_tui.agent.loop_guard import LoopGuard
from tests.fakes.clock import FakeClock
from tests.unit.test_agent_fakes import Say, Script, act, edit, make_deps

NO_RETRIES = AgentConfig(retries=0)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "hello.txt").write_text("hi\n")
    return tmp_path


async def test_a_repeated_read_is_refused_once_and_then_ends_stuck(ws: Path) -> None:
    clock = FakeClock()
    script = Script(clock, [act("read_file", path="hello.txt")] * 3)
    events: list[Any] = []
    res = await run_task(
        "read it", session_id="s", config=NO_RETRIES, deps=make_deps(ws, script, events=events)
    )
    ran = [e for e in events if isinstance(e, ToolFinished)]
    assert len(ran) == 1 and ran[0].ok  # a successful call is a loop too when it is repeated
    blocked = [e for e in events if isinstance(e, RepeatBlocked)]
    assert [(b.step, b.stuck, b.times) for b in blocked] == [(2, False, 2), (3, True, 3)]
    # the model saw the corrective message in place of a second result
    assert "read_file" in script.bodies[2]["prompt"]
    assert "was not run: you made this exact call before" in script.bodies[2]["prompt"]
    assert res.outcome == "stuck" and res.steps == 3
    assert "read_file" in res.error
    assert isinstance(events[-1], TaskOutcome) and events[-1].outcome == "stuck"


async def test_a_repeated_failing_call_carries_its_error(ws: Path) -> None:
    clock = FakeClock()
    script = Script(clock, [act("list_dir", path="hello.txt")] * 3)
    events: list[Any] = []
    res = await run_task(
        "list it", session_id="s", config=NO_RETRIES, deps=make_deps(ws, script, events=events)
    )
    blocked = [e for e in events if isinstance(e, RepeatBlocked)]
    assert "not a directory" in blocked[0].error
    assert res.outcome == "stuck"


async def test_a_changed_call_after_the_warning_runs_and_the_task_goes_on(ws: Path) -> None:
    clock = FakeClock()
    script = Script(
        clock,
        [act("list_dir", path="hello.txt")] * 2
        + [act("read_file", path="hello.txt"), act("finish", summary="it says hi")],
    )
    events: list[Any] = []
    res = await run_task("t", session_id="s", deps=make_deps(ws, script, events=events))
    assert res.outcome == "completed" and res.summary == "it says hi"
    assert [e.stuck for e in events if isinstance(e, RepeatBlocked)] == [False]
    assert [e.ok for e in events if isinstance(e, ToolFinished)] == [False, True]


async def test_a_write_that_changes_a_file_lets_a_read_run_again(ws: Path) -> None:
    clock = FakeClock()
    script = Script(
        clock,
        [
            act("read_file", path="hello.txt"),
            # a reply that writes and then reads: the write runs first, then the read
            Say(edit("hello.txt", "hello\n").text + "\n" + act("read_file", path="hello.txt").text),
            act("finish", summary="greets"),
        ],
    )
    events: list[Any] = []
    deps = make_deps(ws, script, approver=HeadlessApprover(yes=True), events=events)
    res = await run_task("greet", session_id="s", deps=deps)
    assert res.outcome == "completed" and res.changed == ["hello.txt"]
    reads = [e for e in events if isinstance(e, ToolFinished) and e.name == "read_file"]
    assert len(reads) == 2 and "hello" in reads[1].result
    assert not [e for e in events if isinstance(e, RepeatBlocked)]
    assert (ws / "hello.txt").read_text() == "hello\n"


async def test_writing_the_same_text_again_is_a_repeat(ws: Path) -> None:
    clock = FakeClock()
    script = Script(clock, [edit("hello.txt", "hi\n")] * 3)
    events: list[Any] = []
    res = await run_task(
        "fix hello.txt",
        session_id="s",
        config=NO_RETRIES,
        deps=make_deps(ws, script, events=events),
    )
    assert res.outcome == "stuck"
    assert "already holds exactly this text" in script.bodies[1]["prompt"]
    assert [e.stuck for e in events if isinstance(e, RepeatBlocked)] == [False, True]
    assert not [e for e in events if isinstance(e, ToolFinished)]  # nothing was written


def test_guard_refuses_any_call_seen_since_the_last_change() -> None:
    g = LoopGuard()
    assert g.check("read_file", {"path": "a"}) == "run"
    g.record("read_file", {"path": "a"}, True, "text of a")
    assert g.check("read_file", {"path": "b"}) == "run"
    assert g.check("read_file", {"path": "a"}) == "block"
    assert (g.error, g.times) == ("text of a", 2)
    assert g.check("read_file", {"path": "a"}) == "stuck"
    assert g.times == 3
    g.changed()
    assert g.check("read_file", {"path": "a"}) == "run"


def test_guard_keys_ignore_argument_order() -> None:
    g = LoopGuard()
    g.record("grep", {"pattern": "x", "path": "src"}, False, "no match")
    assert g.check("grep", {"path": "src", "pattern": "x"}) == "block"
    assert g.error == "error: no match"


async def test_the_same_refused_reply_again_and_again_ends_stuck(ws: Path) -> None:
    (ws / "sol.py").write_text("def f(s):\n    raise NotImplementedError\n")
    clock = FakeClock()
    call = Say('```json\n{"name": "f", "arguments": {"s": "x"}}\n```')  # the function "called"
    script = Script(clock, [call] * 3)
    events: list[Any] = []
    res = await run_task("implement f in sol.py", session_id="s", config=NO_RETRIES,
                         deps=make_deps(ws, script, events=events))  # fmt: skip
    assert "f is not a tool: it is a function in sol.py" in script.bodies[1]["prompt"]
    assert "was not run: you made this exact call before" in script.bodies[2]["prompt"]
    assert (res.outcome, res.steps) == ("stuck", 3)


async def test_the_same_refused_edit_again_and_again_ends_stuck(ws: Path) -> None:
    (ws / "sol.py").write_text("def f(s):\n    raise NotImplementedError\n")
    clock = FakeClock()
    body_only = Say("```python\n    return s\n```")  # refused: it would not compile
    script = Script(clock, [body_only] * 3)
    res = await run_task(
        "implement f in sol.py", session_id="s", config=NO_RETRIES, deps=make_deps(ws, script)
    )
    assert "Not written: a code block did not say which file" in script.bodies[1]["prompt"]
    assert "Your reply is word for word one you gave before" in script.bodies[2]["prompt"]
    assert (res.outcome, res.steps) == ("stuck", 3)
