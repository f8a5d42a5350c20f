"""The step loop against a scripted server: tools, pins, repair, ceiling, finalization, cancel."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from fusion_tui.agent.deadline import CancelToken
from fusion_tui.agent.events import (
    RequestDone,
    StepFailed,
    TaskOutcome,
    ToolFinished,
    ToolStarted,
)
from fusion_tui.agent.loop import run_task
from fusion_tui.agent.task import AgentConfig
from fusion_tui.agent.tools import ToolResult
from fusion_tui.agent.tools.registry import RUNNERS
from tests.fakes.clock import FakeClock
from tests.unit.test_agent_fakes import FakeSlots, Say, Script, act, make_deps

HOUR = 3600.0
PAST_CEILING = 2 * HOUR - 60
"""Past the steps' ceiling (the task's two hours less the summary's five minutes), a minute
before the task's end."""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "hello.py").write_text("print('hi')\n")
    (tmp_path / "src").mkdir()
    return tmp_path


async def test_multi_step_loop_runs_tools_and_pins_the_first_slot(ws: Path) -> None:
    clock = FakeClock(start=1000.0)
    script = Script(
        clock,
        [act("list_dir"), act("read_file", path="hello.py"), act("finish", summary="done: 1 file")],
    )
    events: list[Any] = []
    slots = FakeSlots()
    res = await run_task(
        "list the files", session_id="s1", deps=make_deps(ws, script, events=events, slots=slots)
    )
    assert res.outcome == "completed"
    assert res.summary == "done: 1 file"
    assert res.steps == 3
    assert [b["id_slot"] for b in script.bodies] == [-1, 2, 2]
    assert slots.pins == {"s1": 2}
    # free text in the model's own format: no grammar, and cut where it would invent a result
    assert all(b["cache_prompt"] is True and "json_schema" not in b for b in script.bodies)
    assert all(b["stop"] == ["<tool_response>"] for b in script.bodies)
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [(e.name, e.ok) for e in finished] == [("list_dir", True), ("read_file", True)]
    assert "hello.py" in finished[0].result and "print('hi')" in finished[1].result
    assert isinstance(events[-1], TaskOutcome) and events[-1].outcome == "completed"
    # the tool results reach the next prompt
    assert "print('hi')" in script.bodies[2]["prompt"]


async def test_consecutive_requests_extend_the_previous_prompt_exactly(ws: Path) -> None:
    clock = FakeClock(start=1000.0)
    script = Script(
        clock,
        [
            act("list_dir"),
            Say("<tool_call>not json at all</tool_call>"),  # sent back on the same slot
            act("find", pattern="*.py"),
            act("grep", pattern="print"),
            act("finish", summary="ok"),
        ],
    )
    res = await run_task("look around", session_id="s", deps=make_deps(ws, script))
    assert res.outcome == "completed"
    prompts = [b["prompt"] for b in script.bodies]
    for prev, cur in itertools.pairwise(prompts):
        assert cur.startswith(prev), "a request rewrote bytes of the previous prompt"
    # the stable prefix (system message with the tools) opens every request
    assert all(p.startswith(prompts[0].split("<|im_start|>user")[0]) for p in prompts)
    assert all('"name": "read_file"' in p for p in prompts)
    # the fake server reused the previous prompt and its output: nothing already held is re-read
    outputs = [act("list_dir").text, "<tool_call>not json at all</tool_call>"]
    for i, out in enumerate(outputs, start=1):
        assert res.requests[i].cache_n == len(prompts[i - 1]) + len(out)


async def test_invalid_step_gets_one_repair_on_the_same_slot(ws: Path) -> None:
    clock = FakeClock(start=1000.0)
    script = Script(
        clock,
        [act("list_dir"), act("nope"), act("finish", summary="fixed")],
    )
    res = await run_task("t", session_id="s", deps=make_deps(ws, script))
    assert res.outcome == "completed"
    assert [r.purpose for r in res.requests] == ["step", "step", "step"]
    assert script.bodies[2]["id_slot"] == script.bodies[1]["id_slot"] == 2
    assert (
        "there is no tool 'nope'; the tools are find, grep, list_dir" in script.bodies[2]["prompt"]
    )


async def test_unusable_replies_are_sent_back_and_kept_in_the_transcript(ws: Path) -> None:
    clock = FakeClock(start=1000.0)
    garbled, cut = "<tool_call>garbage one</tool_call>", "here it is\n```python\ndef f("
    script = Script(clock, [Say(garbled), Say(cut), act("finish", summary="x")])
    events: list[Any] = []
    res = await run_task("t", session_id="s", deps=make_deps(ws, script, events=events))
    failed = [e for e in events if isinstance(e, StepFailed)]
    assert [e.raw for e in failed] == [garbled, cut]
    assert "is not valid JSON" in failed[0].error and "cut off" in failed[1].error
    said = [m.text for m in res.packer.messages if m.role == "assistant"]
    assert said[:2] == [garbled, cut]
    assert "Reply again in the format of the system message" in script.bodies[1]["prompt"]
    assert res.outcome == "completed" and res.steps == 3


async def test_steps_that_keep_failing_end_with_error(ws: Path) -> None:
    clock = FakeClock(start=1000.0)
    script = Script(clock, [Say("<tool_call>bad</tool_call>")] * 6)
    config = AgentConfig(max_failed_steps=3, retries=0)
    res = await run_task("t", session_id="s", deps=make_deps(ws, script), config=config)
    assert res.outcome == "error" and "3 replies in a row could not be used" in res.error
    assert res.steps == 3


async def test_steps_that_keep_failing_start_the_task_over_while_retries_are_left(
    tmp_path: Path,
) -> None:
    from fusion_tui.agent.approval import HeadlessApprover
    from fusion_tui.agent.events import Retried
    from tests.unit.test_agent_fakes import edit

    (tmp_path / "sol.py").write_text("def f(x):\n    raise NotImplementedError\n")
    clock = FakeClock(start=1000.0)
    cut = Say("```python\ndef f(x):\n    if x == 1:\n        return 2\n    if x == 2:")
    fixed = "def f(x):\n    return x + 1\n"
    script = Script(clock, [cut, cut, cut, edit("sol.py", fixed)])
    events: list[Any] = []
    deps = make_deps(tmp_path, script, approver=HeadlessApprover(yes=True), events=events)
    config = AgentConfig(max_failed_steps=3, retries=1)
    res = await run_task("implement f in sol.py", session_id="s", deps=deps, config=config)
    assert (res.outcome, res.changed) == ("completed", ["sol.py"])
    retried = [e for e in events if isinstance(e, Retried)]
    assert len(retried) == 1 and "3 replies in a row could not be used" in retried[0].reason
    assert script.bodies[3]["prompt"] == script.bodies[0]["prompt"]  # the task's own prompt
    assert script.bodies[3]["temperature"] != script.bodies[0]["temperature"]  # sampled anew


async def test_a_file_given_back_as_it_is_but_for_blank_lines_is_no_change(tmp_path: Path) -> None:
    from fusion_tui.agent.approval import HeadlessApprover
    from tests.unit.test_agent_fakes import edit

    stub = "\ndef f(x):\n    raise NotImplementedError\n"
    (tmp_path / "sol.py").write_text(stub)
    clock = FakeClock(start=1000.0)
    script = Script(
        clock, [edit("sol.py", stub.strip()), edit("sol.py", "def f(x):\n    return 1\n")]
    )
    deps = make_deps(tmp_path, script, approver=HeadlessApprover(yes=True))
    res = await run_task("implement f in sol.py", session_id="s", deps=deps)
    assert "sol.py already holds exactly this text" in script.bodies[1]["prompt"]
    assert (res.outcome, res.changed, res.steps) == ("completed", ["sol.py"], 2)


async def test_ceiling_while_waiting_for_the_first_byte_runs_the_summary_step(ws: Path) -> None:
    clock = FakeClock(start=1000.0)
    script = Script(
        clock,
        [act("list_dir"), Say(hang_before=PAST_CEILING), act("finish", summary="partial: listed")],
    )
    cancel = CancelToken()
    res = await run_task("t", session_id="s", deps=make_deps(ws, script), cancel=cancel)
    assert res.outcome == "time_ceiling"
    assert res.summary == "partial: listed"
    summary_req = res.requests[-1]
    assert summary_req.purpose == "summary" and summary_req.ended == "ok"
    assert res.requests[1].ended == "time_ceiling"
    assert script.bodies[-1]["id_slot"] == 2  # same slot
    assert "The time limit was reached" in script.bodies[-1]["prompt"]
    assert script.closed == 3  # the abandoned stream was closed
    assert not cancel.cancelled


async def test_ceiling_while_streaming(ws: Path) -> None:
    clock = FakeClock(start=1000.0)
    script = Script(clock, [Say('<tool_call>\n{"name": "list_', hang_after=PAST_CEILING), Say("s")])
    res = await run_task("t", session_id="s", deps=make_deps(ws, script))
    assert res.outcome == "time_ceiling" and res.summary == "s"
    # the partial output stays in the transcript, so the summary prompt extends the last one
    partial = script.bodies[0]["prompt"] + '<tool_call>\n{"name": "list_'
    assert script.bodies[1]["prompt"].startswith(partial)


async def test_ceiling_while_a_tool_runs_lets_the_tool_finish(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock(start=1000.0)

    async def slow_tool(ctx: Any, args: dict[str, Any]) -> ToolResult:
        clock.advance(PAST_CEILING)  # the tool outlives the steps' ceiling
        return ToolResult(True, "slow result")

    monkeypatch.setitem(RUNNERS, "list_dir", slow_tool)
    script = Script(clock, [act("list_dir"), act("finish", summary="after tool")])
    events: list[Any] = []
    res = await run_task("t", session_id="s", deps=make_deps(ws, script, events=events))
    tool = next(e for e in events if isinstance(e, ToolFinished))
    assert tool.ok and tool.result == "slow result"
    assert res.outcome == "time_ceiling" and res.summary == "after tool"
    assert "slow result" in script.bodies[-1]["prompt"]


async def test_a_tool_that_outlives_the_tasks_end_leaves_no_time_for_a_summary(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock(start=1000.0)

    async def slow_tool(ctx: Any, args: dict[str, Any]) -> ToolResult:
        clock.advance(2.5 * HOUR)
        return ToolResult(True, "slow result")

    monkeypatch.setitem(RUNNERS, "list_dir", slow_tool)
    script = Script(clock, [act("list_dir")])
    res = await run_task("t", session_id="s", deps=make_deps(ws, script))
    assert res.outcome == "time_ceiling" and len(script.bodies) == 1  # the deadline holds


async def test_a_summary_that_overruns_the_tasks_end_keeps_the_reason_and_its_words(
    ws: Path,
) -> None:
    clock = FakeClock(start=1000.0)
    script = Script(
        clock,
        [Say(hang_before=PAST_CEILING), Say('{"tool": "finish", "args": {"summ', hang_after=600)],
    )
    res = await run_task("t", session_id="s", deps=make_deps(ws, script))
    assert res.outcome == "time_ceiling"
    assert res.summary == '{"tool": "finish", "args": {"summ'
    assert res.requests[-1].purpose == "summary" and res.requests[-1].ended == "deadline"
    assert not res.packer.awaiting_reply  # the unanswered question left the transcript
    assert "The time limit was reached" not in res.packer.messages[-1].text


async def test_user_cancel_closes_the_stream(ws: Path) -> None:
    clock = FakeClock(start=1000.0)
    cancel = CancelToken()
    script = Script(clock, [Say("{", hang_after=1.0, on_start=None)])
    script.replies[0].on_start = cancel.cancel
    res = await run_task("t", session_id="s", deps=make_deps(ws, script), cancel=cancel)
    assert res.outcome == "cancelled"
    assert script.closed == 1
    assert res.requests[-1].ended == "cancelled"


async def test_ceiling_and_cancel_together_reads_as_time_ceiling(ws: Path) -> None:
    clock = FakeClock(start=1000.0)
    cancel = CancelToken()

    def both() -> None:
        clock.advance(3 * HOUR)  # the ceiling fires ...
        cancel.cancel()  # ... and the user presses Esc in the same instant

    script = Script(clock, [Say(hang_after=0, on_start=both), act("finish", summary="s")])
    res = await run_task("t", session_id="s", deps=make_deps(ws, script), cancel=cancel)
    assert res.outcome == "time_ceiling"
    assert res.requests[0].ended == "time_ceiling"
    assert len(script.bodies) == 1  # the user's cancel still skips the summary request


async def test_step_limit_runs_the_summary_and_reports_max_steps(ws: Path) -> None:
    clock = FakeClock(start=1000.0)
    calls = [act("list_dir"), act("find", pattern="*.py"), act("grep", pattern="x")]
    script = Script(clock, [*calls, act("finish", summary="stopped at limit")])
    res = await run_task(
        "t", session_id="s", deps=make_deps(ws, script), config=AgentConfig(max_steps=3)
    )
    assert res.outcome == "max_steps" and res.summary == "stopped at limit"
    assert res.steps == 3


async def test_server_error_ends_with_error(ws: Path) -> None:
    from fusion_tui.server.errors import ServerUnreachable

    clock = FakeClock(start=1000.0)

    def broken(body: dict[str, Any]) -> Any:
        async def gen() -> Any:
            raise ServerUnreachable("nothing answers at 127.0.0.1:1")
            yield  # pragma: no cover

        return gen()

    script = Script(clock, [])
    deps = make_deps(ws, script)
    deps.completion = broken
    events: list[Any] = []
    deps.on_event = events.append
    res = await run_task("t", session_id="s", deps=deps)
    assert res.outcome == "error" and "nothing answers" in res.error
    assert isinstance(events[-2], RequestDone) and events[-2].ended == "error"


async def test_tool_events_carry_args_and_duration(ws: Path) -> None:
    clock = FakeClock(start=1000.0)
    script = Script(clock, [act("read_file", path="missing.txt"), act("finish", summary="done")])
    events: list[Any] = []
    await run_task("t", session_id="s", deps=make_deps(ws, script, events=events))
    started = next(e for e in events if isinstance(e, ToolStarted))
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert started.args == {"path": "missing.txt"}
    assert not finished.ok and "does not exist" in finished.result
    assert finished.duration_ms >= 0
    assert "<tool_response>\nread_file failed:" in script.bodies[1]["prompt"]


async def test_a_refused_edit_keeps_the_file_and_the_model_tries_again(tmp_path: Path) -> None:
    from fusion_tui.agent.approval import HeadlessApprover
    from tests.unit.test_agent_fakes import edit

    (tmp_path / "sol.py").write_text("def f(x):\n    raise NotImplementedError\n")
    clock = FakeClock(start=1000.0)
    fixed = "def f(x):\n    return x + 1\n"
    script = Script(clock, [Say("```python\n    return x + 1\n```"), edit("sol.py", fixed)])
    deps = make_deps(tmp_path, script, approver=HeadlessApprover(yes=True))
    res = await run_task("implement f in sol.py", session_id="s", deps=deps)
    assert (res.outcome, res.steps, res.changed) == ("completed", 2, ["sol.py"])
    assert "sol.py was kept as it is" in script.bodies[1]["prompt"]
    assert (tmp_path / "sol.py").read_text() == fixed


async def test_a_fix_given_with_an_unchanged_test_file_completes(tmp_path: Path) -> None:
    from fusion_tui.agent.approval import HeadlessApprover

    (tmp_path / "calc.py").write_text("def sub(a, b):\n    return a + b\n")
    (tmp_path / "test_calc.py").write_text("from calc import sub\n")
    clock = FakeClock(start=1000.0)
    both = (
        "calc.py\n```python\ndef sub(a, b):\n    return a - b\n```\n\n"
        "test_calc.py\n```python\nfrom calc import sub\n```"
    )
    script = Script(clock, [Say(both)])
    deps = make_deps(tmp_path, script, approver=HeadlessApprover(yes=True))
    res = await run_task("fix calc.py", session_id="s", deps=deps)
    assert (res.outcome, res.steps, res.changed) == ("completed", 1, ["calc.py"])


async def test_words_that_led_into_the_code_are_followed_by_where_it_went(
    tmp_path: Path,
) -> None:
    from fusion_tui.agent.approval import HeadlessApprover
    from tests.unit.test_agent_fakes import edit

    (tmp_path / "sol.py").write_text("def f(x):\n    raise NotImplementedError\n")
    clock = FakeClock(start=1000.0)
    reply = edit("sol.py", "def f(x):\n    return x + 1\n", prose="Here is the fixed function:")
    deps = make_deps(tmp_path, Script(clock, [reply]), approver=HeadlessApprover(yes=True))
    res = await run_task("implement f in sol.py", session_id="s", deps=deps)
    assert (res.outcome, res.changed) == ("completed", ["sol.py"])
    where = "(the code for `sol.py` is in the edit above)"
    assert res.summary == f"Here is the fixed function:\n\n{where}"


async def test_a_task_out_of_time_with_failing_tests_says_so_to_the_summary_and_the_user(
    tmp_path: Path,
) -> None:
    """The 1.5B, asked for its summary at the ceiling, wrote "The tests passed after the
    correction" over tests that failed: the request now says they fail, and so does the reason."""
    from fusion_tui.agent.approval import HeadlessApprover
    from tests.unit.test_agent_fakes import edit

    (tmp_path / "sol.py").write_text("def f():\n    return 0\n")
    clock = FakeClock(start=1000.0)
    script = Script(
        clock,
        [
            edit("sol.py", "def f():\n    return 1\n"),
            Say(hang_before=PAST_CEILING),
            Say("f returns 1; the test still fails."),
        ],
    )
    deps = make_deps(tmp_path, script, approver=HeadlessApprover(yes=True))
    config = AgentConfig(test_cmd="python3 -c 'raise SystemExit(1)'")
    res = await run_task("make f right", session_id="s", deps=deps, config=config)
    assert res.outcome == "time_ceiling"
    assert "the tests still fail (exit code 1)" in script.bodies[-1]["prompt"].rsplit("user", 1)[1]
    assert res.error.startswith("the tests still fail (exit code 1)")
    assert res.summary == "f returns 1; the test still fails."


async def test_a_summary_that_says_failing_tests_pass_is_not_passed_on(tmp_path: Path) -> None:
    """Told that the tests still failed, the 1.5B summed up "I ran the tests again after the
    fix and they passed": the user gets the reason, not the claim."""
    from fusion_tui.agent.approval import HeadlessApprover
    from tests.unit.test_agent_fakes import edit

    (tmp_path / "sol.py").write_text("def f():\n    return 0\n")
    clock = FakeClock(start=1000.0)
    claim = "I ran the tests again after the fix and they passed."
    script = Script(clock, [edit("sol.py", "def f():\n    return 1\n"),
                            Say(hang_before=PAST_CEILING), Say(claim)])  # fmt: skip
    deps = make_deps(tmp_path, script, approver=HeadlessApprover(yes=True))
    config = AgentConfig(test_cmd="python3 -c 'raise SystemExit(1)'")
    res = await run_task("make f right", session_id="s", deps=deps, config=config)
    assert (res.outcome, res.summary) == ("time_ceiling", "")
    assert res.error.startswith("the tests still fail (exit code 1)")


async def test_out_of_time_in_a_fresh_attempt_the_summary_hears_the_earlier_ones_failed(
    tmp_path: Path,
) -> None:
    """Seen on Exercism's state-of-tic-tac-toe: an attempt failed 4 tests and was undone, the
    fresh one ran into the ceiling before it wrote, and the summary, told only that time was up,
    said "the function correctly determined the state of the game"."""
    from fusion_tui.agent.approval import HeadlessApprover
    from tests.unit.test_agent_fakes import edit

    (tmp_path / "sol.py").write_text("def f():\n    return 0\n")
    clock = FakeClock(start=1000.0)
    wrong = edit("sol.py", "def f():\n    return 1\n")
    script = Script(clock, [wrong, wrong, Say(hang_before=PAST_CEILING), Say("f is not finished.")])
    deps = make_deps(tmp_path, script, approver=HeadlessApprover(yes=True))
    config = AgentConfig(test_cmd="python3 -c 'raise SystemExit(1)'")
    res = await run_task("make f right", session_id="s", deps=deps, config=config)
    assert res.outcome == "time_ceiling"
    asked = script.bodies[-1]["prompt"].rsplit("user", 1)[1]
    assert "the 1 attempt(s) before this one failed the checks and were undone" in asked


async def test_tests_that_hang_are_stopped_at_the_tasks_ceiling(tmp_path: Path) -> None:
    """Code that loops forever made camicia's tests hang: the run took its own 300 s timeout and
    held a 300 s task to 316 s. A check now gets no more than the time left to the ceiling."""
    import time

    from fusion_tui.agent.approval import HeadlessApprover
    from fusion_tui.agent.events import TestRan
    from tests.unit.test_agent_fakes import edit

    (tmp_path / "sol.py").write_text("def f():\n    return 0\n")
    clock = FakeClock(start=1000.0)
    two_s_before_ceiling = 2 * HOUR - 300 - 2
    first = edit("sol.py", "def f():\n    while True:\n        pass\n")
    script = Script(
        clock,
        [
            Say(first.text, on_start=lambda: clock.advance(two_s_before_ceiling)),
            Say(hang_before=60),
            Say("f loops forever; its tests were stopped."),
        ],
    )
    events: list[Any] = []
    deps = make_deps(tmp_path, script, events=events, approver=HeadlessApprover(yes=True))
    config = AgentConfig(test_cmd="python3 -c 'import sol; sol.f()'", test_timeout_s=60)
    t0 = time.monotonic()
    res = await run_task("make f right", session_id="s", deps=deps, config=config)
    assert time.monotonic() - t0 < 30
    ran = [e for e in events if isinstance(e, TestRan) and e.round > 0]
    assert [r.exit for r in ran] == [None]
    assert res.outcome == "time_ceiling"
    assert res.error.startswith("the tests still fail (timed out)")


async def test_a_step_may_write_the_largest_file_in_the_chat_in_full(tmp_path: Path) -> None:
    """A reply cut inside a file's block writes nothing: the 1.5B's every rewrite of a 10.6 kB
    file ran to the 2,048-token cap. The cap grows to the file; a test file or prose does not
    count, a file shown in part counts as its part, and a cap the user set holds."""
    from fusion_tui.agent.approval import HeadlessApprover
    from tests.unit.test_agent_fakes import edit

    big = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(400))  # ~12 kB
    (tmp_path / "test_big.py").write_text("# a test\n" * 5000)
    (tmp_path / "NOTES.md").write_text("A note.\n" * 5000)

    async def caps(config: AgentConfig | None = None, text: str = big) -> int:
        (tmp_path / "big.py").write_text(text)
        replies = [edit("big.py", text.replace("x + 0", "x") + "y = 2\n"), Say("Done.")]
        script = Script(FakeClock(start=1000.0), replies)
        deps = make_deps(tmp_path, script, approver=HeadlessApprover(yes=True))
        config = config or AgentConfig(find_tests=False, long_files_in_part=False)
        await run_task("change f0 in big.py", session_id="s", deps=deps, config=config)
        return int(script.bodies[0]["n_predict"])

    per_token = 3.0  # no server to count with: the usual ratio (CHARS_PER_TOKEN)
    assert await caps() == int(len(big) / per_token * 1.15) + 256 > 2048
    assert await caps(AgentConfig(fit_whole_files=False, find_tests=False)) == 2048
    assert await caps(AgentConfig(find_tests=False)) == 2048  # f0 and a line for the rest
    assert await caps(text="x = 1\n") == 2048
