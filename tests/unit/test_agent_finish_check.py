"""An empty answer, a placeholder of ours, or a change task answered without a change is not
completed: the model is asked once more, then the task ends `no_answer` or `no_change`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fusion_tui.agent.approval import HeadlessApprover
from fusion_tui.agent.finish_check import INTERRUPTED, claims_passing, declines, finish_problem
from fusion_tui.agent.loop import AgentConfig, run_task
from fusion_tui.agent.retry import RETRY_TEMPERATURE
from tests.fakes.clock import FakeClock
from tests.unit.test_agent_fakes import Say, Script, act, edit, make_deps


@pytest.mark.parametrize("summary", ["", "   ", INTERRUPTED, " (Empty). ", "(no change)"])
def test_placeholders_and_empty_text_are_not_answers(summary: str) -> None:
    assert finish_problem(summary) is not None


def test_a_real_summary_is_an_answer() -> None:
    assert finish_problem("hello.py prints hi") is None
    assert finish_problem(f"{INTERRUPTED} then I read hello.py: it prints hi") is None


async def test_placeholder_finish_twice_ends_no_answer(tmp_path: Path) -> None:
    clock = FakeClock()
    script = Script(clock, [act("finish", summary=INTERRUPTED), act("finish", summary="")])
    res = await run_task("t", session_id="s", deps=make_deps(tmp_path, script))
    assert res.outcome == "no_answer"
    assert res.summary == ""
    assert "without an answer" in res.error and "was empty" in res.error
    assert "placeholder text" in script.bodies[1]["prompt"]  # the model was told why


async def test_after_one_placeholder_a_real_finish_completes(tmp_path: Path) -> None:
    clock = FakeClock()
    events: list[Any] = []
    script = Script(clock, [act("finish", summary=INTERRUPTED), act("finish", summary="done")])
    res = await run_task("t", session_id="s", deps=make_deps(tmp_path, script, events=events))
    assert (res.outcome, res.summary, res.steps) == ("completed", "done", 2)


async def test_a_change_task_answered_without_a_change_is_asked_once_then_no_change(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    script = Script(clock, [Say("Change the plus to a minus."), Say("I would use a minus.")])
    deps, no_retries = make_deps(tmp_path, script), AgentConfig(retries=0)
    res = await run_task("fix the sign in calc.py", session_id="s", deps=deps, config=no_retries)
    assert (res.outcome, res.steps) == ("no_change", 2)
    assert res.error == "no file was changed"
    assert "No file was changed, and the task asks for a change" in script.bodies[1]["prompt"]


async def test_words_again_after_the_nudge_start_the_task_over(tmp_path: Path) -> None:
    """Seen with the 0.5B coder on a planted bug: words, then the nudge's own words given back;
    the task's prompt asked again, sampled as a fresh attempt, wrote the fix."""
    (tmp_path / "calc.py").write_text("def sub(a, b):\n    return a + b\n")
    clock = FakeClock()
    fixed = edit("calc.py", "def sub(a, b):\n    return a - b\n")
    script = Script(clock, [Say("Use a minus."), Say("I would use a minus."), fixed])
    deps = make_deps(tmp_path, script, approver=HeadlessApprover(yes=True))
    res = await run_task("fix the sign in calc.py", session_id="s", deps=deps)
    assert (res.outcome, res.changed) == ("completed", ["calc.py"])
    first, _nudged, again = script.bodies
    assert again["prompt"] == first["prompt"]
    assert again["temperature"] == RETRY_TEMPERATURE


async def test_a_change_made_after_the_nudge_completes(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("def sub(a, b):\n    return a + b\n")
    clock = FakeClock()
    script = Script(
        clock, [Say("Use a minus."), edit("calc.py", "def sub(a, b):\n    return a - b\n")]
    )
    deps = make_deps(tmp_path, script, approver=HeadlessApprover(yes=True))
    res = await run_task("fix the sign in calc.py", session_id="s", deps=deps)
    assert (res.outcome, res.changed) == ("completed", ["calc.py"])
    assert "a - b" in (tmp_path / "calc.py").read_text()


@pytest.mark.parametrize(
    ("prose", "declined"),
    [
        ("I apologize, but I cannot provide a file or any content related to the provided "
         "instructions or requirements.", True),
        ("I'm sorry, but I can't assist with that.", True),
        ("Sorry, I am unable to help with this.", True),
        ("I apologize for the confusion. The bug is in `sub`.", False),
        ("The function is right; I cannot see a bug in it.", False),
    ],
)  # fmt: skip
def test_a_reply_that_declines_the_task_is_told_apart(prose: str, declined: bool) -> None:
    assert declines(prose) is declined


async def test_a_declined_change_task_is_asked_afresh_at_once(tmp_path: Path) -> None:
    """Seen with the 1.5B coder on Exercism's error-handling: "I apologize, but I cannot
    provide a file ...", and again when asked with that in its own last turn. The task's prompt
    is asked again, sampled as a fresh attempt, without the nudge round between."""
    (tmp_path / "calc.py").write_text("def sub(a, b):\n    return a + b\n")
    clock = FakeClock()
    fixed = edit("calc.py", "def sub(a, b):\n    return a - b\n")
    script = Script(clock, [Say("I apologize, but I cannot provide a file."), fixed])
    deps = make_deps(tmp_path, script, approver=HeadlessApprover(yes=True))
    res = await run_task("fix the sign in calc.py", session_id="s", deps=deps)
    assert (res.outcome, res.changed, res.steps) == ("completed", ["calc.py"], 2)
    first, again = script.bodies
    assert again["prompt"] == first["prompt"]
    assert again["temperature"] == RETRY_TEMPERATURE


@pytest.mark.parametrize(
    ("summary", "claims"),
    [
        ("I ran the tests again after the fix and they passed.", True),
        ("The tests now pass, and the time limit was not reached.", True),
        ("All tests passed after the correction.", True),
        ("The fix to make the tests pass remains to be found.", False),
        ("The tests still fail: quote escapes the quote wrongly.", False),
        ("Changed quote so that all tests pass once the escape is right.", False),
        ("The tests do not pass yet.", False),
    ],
)
def test_a_summary_that_claims_the_tests_pass_is_told_from_one_that_wants_them_to(
    summary: str, claims: bool
) -> None:
    assert claims_passing(summary) is claims
