"""Fresh attempts (`agent/retry.py`): a fix that cannot get past failing checks is undone and
the step asked again from the prompt before it, more varied; at a failing end the attempt that
failed fewest checks stays."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fusion_tui.agent import checks
from fusion_tui.agent.approval import Decision
from fusion_tui.agent.events import FileChanged, ToolFinished
from fusion_tui.agent.loop import KEEP_BEST_WHY, run_task
from fusion_tui.agent.retry import RETRY_TEMPERATURE, Attempt, Retries, failure_count
from fusion_tui.agent.task import AgentConfig
from fusion_tui.agent.tools.workspace import ToolError, Workspace
from fusion_tui.cli.printer import describe
from tests.fakes.clock import FakeClock
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.unit.cli_support import call_cli, edit, json_lines, workspace
from tests.unit.test_agent_fakes import Recorder, Script, make_deps
from tests.unit.test_agent_fakes import edit as fake_edit

CHECK = """\
import sys
import calc
failed = sum(calc.sub(a, b) != a - b for a, b in [(3, 1), (1, 1)])
if failed:
    print(f"***Test Failed*** {failed} failures.")
sys.exit(1 if failed else 0)
"""
"""Two cases of `sub`; the count of failures printed as doctest prints it."""
WRONG = "def sub(a, b):\n    return a + b\n"
HALF = "def sub(a, b):\n    return b - a\n"
"""Fails one case of two: sub(1, 1) holds."""
RIGHT = "def sub(a, b):\n    return a - b\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return workspace(tmp_path, {"calc.py": WRONG, "check.py": CHECK})


def run(capsys: pytest.CaptureFixture[str], ws: Path, *flags: str) -> tuple[int, str, str]:
    return call_cli(
        capsys, "run", "fix calc.py", "--workspace", str(ws), "--yes", "--json",
        "--test-cmd", f"{sys.executable} check.py", *flags,
    )  # fmt: skip


def test_a_fix_that_copies_the_failed_code_is_undone_and_asked_again(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_server.script(edit("calc.py", HALF), edit("calc.py", HALF), edit("calc.py", RIGHT))
    code, out, err = run(capsys, ws)
    assert code == 0, err
    assert (ws / "calc.py").read_text() == RIGHT
    events = json_lines(out)
    retries = [e for e in events if e["event"] == "retry"]
    assert retries == [{
        "event": "retry", "attempt": 2, "attempts": 6, "restored": ["calc.py"],
        "reason": "the fix changed nothing of the code that failed its checks",
    }]  # fmt: skip
    first, copy, again = (r.body for r in cli_server.completions())
    assert again["prompt"] == first["prompt"]  # the prompt that produced the failed attempt
    assert (again["temperature"], again["seed"]) == (RETRY_TEMPERATURE, 1)
    assert copy["temperature"] == first["temperature"] != RETRY_TEMPERATURE
    assert events[-1]["outcome"] == "completed"


async def test_an_undo_is_asked_as_an_undo_and_shown_as_one(ws: Path) -> None:
    """The user who is asked to allow a put-back must see that it takes changes back, not an
    ordinary write the model wants; the chat and the CLI call it a put-back too."""
    product = "def sub(a, b):\n    return a * b\n"  # fails both cases, so HALF is kept
    script = Script(FakeClock(start=1000.0), [fake_edit("calc.py", HALF),
                                               fake_edit("calc.py", product)])  # fmt: skip
    approver = Recorder(*[Decision.ALLOW_ONCE] * 6)
    events: list[Any] = []
    config = AgentConfig(test_cmd=f"{sys.executable} check.py", test_rounds=0, retries=1)
    res = await run_task("fix calc.py", session_id="s", config=config,
                         deps=make_deps(ws, script, approver, events=events))  # fmt: skip
    assert res.outcome == "tests_failed"
    assert (ws / "calc.py").read_text() == HALF
    writes = [(r.tool, r.target, r.why) for r in approver.asked if r.kind == "write"]
    assert writes == [
        ("write_file", "calc.py", ""),
        ("put_back", "calc.py",
         "The agent undoes its attempt (the checks still fail after 0 round(s) of fixes) and "
         "tries afresh."),
        ("write_file", "calc.py", ""),
        ("put_back", "calc.py", KEEP_BEST_WHY),
    ]  # fmt: skip
    undos = [e for e in events if isinstance(e, ToolFinished) and e.name == "put_back"]
    assert [(e.args, e.result, "-    return a * b" in e.detail) for e in undos][-1] == (
        {"path": "calc.py"},
        "put calc.py back (2 lines)",
        True,
    )
    shown = [describe(e) for e in events if isinstance(e, FileChanged) and e.how == "restored"]
    assert shown and all(line.startswith("  put back calc.py:") for line in shown)


def test_when_no_attempt_passes_the_one_that_failed_fewest_checks_stays(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    product = "def sub(a, b):\n    return a * b\n"  # fails both cases
    cli_server.script(edit("calc.py", HALF), edit("calc.py", product))
    code, out, err = run(capsys, ws, "--test-rounds", "0", "--retries", "1")
    assert code == 1
    assert json_lines(out)[-1]["outcome"] == "tests_failed"
    assert (ws / "calc.py").read_text() == HALF
    assert "after 2 attempts; the files hold attempt 1, which failed fewest checks, 1 failed" in err
    again = cli_server.completions()[1].body
    assert again["prompt"] == cli_server.completions()[0].body["prompt"]


def test_attempts_that_fail_as_many_checks_as_the_task_began_with_are_all_undone(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Seen on the 0.5B: an attempt appended a copy of a test to the code file and failed the
    one check the file failed before; it stayed, and the user's next try began from the junk."""
    product = "def sub(a, b):\n    return a * b\n"  # fails both cases, as WRONG does
    junk = WRONG + "\n\ndef test_sub():\n    assert sub(3, 1) == 2\n"
    cli_server.script(edit("calc.py", junk), edit("calc.py", product))
    code, out, err = run(capsys, ws, "--test-rounds", "0", "--retries", "1")
    assert code == 1
    assert json_lines(out)[-1]["outcome"] == "tests_failed"
    assert (ws / "calc.py").read_text() == WRONG
    assert "no attempt failed fewer than the 2 check(s) the files failed before the task" in err


def test_a_file_an_undone_attempt_created_is_removed_with_the_attempt(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Undoing an attempt takes away the files it created (seen: the 1.5B gave `split` under a
    new `shlex.py`; pytest imported it and could not start, and every later attempt failed)."""
    helper = "def read_file(path):\n    return open(path).read()\n"
    cli_server.script(edit("helper.py", helper), edit("calc.py", HALF))
    code, out, err = run(capsys, ws, "--test-rounds", "0", "--retries", "1")
    assert code == 1 and json_lines(out)[-1]["outcome"] == "tests_failed"
    assert (ws / "calc.py").read_text() == HALF and not (ws / "helper.py").exists()
    retry = next(e for e in json_lines(out) if e["event"] == "retry")
    assert retry["restored"] == ["helper.py"]
    assert "left as it is" not in err
    shown = describe(FileChanged(1, "helper.py", "-X\n", "removed"))
    assert shown == "  removed helper.py (the agent created it; the attempt was undone)"


async def helper_then_failing_fix(ws: Path, approver: Recorder) -> Any:
    """A task whose first attempt creates helper.py and fails the checks, and whose second
    fails them too: the undo of the first asks to remove helper.py."""
    product = "def sub(a, b):\n    return a * b\n"  # fails both cases
    script = Script(FakeClock(start=1000.0), [fake_edit("helper.py", "X = 1\n"),
                                               fake_edit("calc.py", product)])  # fmt: skip
    config = AgentConfig(test_cmd=f"{sys.executable} check.py", test_rounds=0, retries=1)
    return await run_task("fix calc.py", session_id="s", config=config,
                          deps=make_deps(ws, script, approver))  # fmt: skip


async def test_a_created_file_changed_since_the_agent_wrote_it_stays(ws: Path) -> None:
    """The removal takes only what the agent wrote: a file changed meanwhile (here by the
    checks themselves) is left, and named at the end."""
    meddle = "import pathlib\np = pathlib.Path('helper.py')\n"
    meddle += "p.exists() and p.write_text('X = 2\\n')\n"
    (ws / "check.py").write_text(meddle + CHECK)
    approver = Recorder(*[Decision.ALLOW_ONCE] * 6)
    res = await helper_then_failing_fix(ws, approver)
    assert res.outcome == "tests_failed"
    assert (ws / "helper.py").read_text() == "X = 2\n"
    assert "helper.py (created by an undone attempt) left as it is" in res.error + res.summary
    assert not [r for r in approver.asked if r.tool == "put_back" and r.target == "helper.py"]


async def test_a_created_file_edited_while_its_removal_was_asked_stays(ws: Path) -> None:
    """The removal reads the file again once allowed: an edit made while the approval waited
    is not lost."""

    class EditsWhileAsked(Recorder):
        async def decide(self, request: Any) -> Decision:
            if request.tool == "put_back" and request.target == "helper.py":
                (ws / "helper.py").write_text("X = 3\n")
            return await super().decide(request)

    approver = EditsWhileAsked(*[Decision.ALLOW_ONCE] * 6)
    res = await helper_then_failing_fix(ws, approver)
    assert res.outcome == "tests_failed"
    assert (ws / "helper.py").read_text() == "X = 3\n"
    asked = [r.target for r in approver.asked if r.tool == "put_back"]
    assert asked.count("helper.py") == 1  # asked once, then found changed


def test_removing_a_file_never_follows_a_link_or_takes_a_directory(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    outside = tmp_path / "keep.py"
    outside.write_text("x\n")
    (root / "link.py").symlink_to(outside)
    space = Workspace(root)
    for path in ("link.py", "pkg"):
        with pytest.raises(ToolError):
            space.remove(space.resolve(path))
    assert outside.read_text() == "x\n" and (root / "link.py").is_symlink()
    (root / "pkg" / "a.py").write_text("a\n")
    space.remove(space.resolve("pkg/a.py"))
    assert not (root / "pkg" / "a.py").exists()


def test_the_words_of_an_attempt_whose_code_was_put_back_are_not_the_answer(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The files hold attempt 1; the last attempt's "all tests pass" would describe code that
    is gone, and claim what the end line denies (seen in the TUI)."""
    product = "def sub(a, b):\n    return a * b\n"  # fails both cases
    cli_server.script(edit("calc.py", HALF), edit("calc.py", product, "Now all tests pass."))
    code, out, err = call_cli(
        capsys, "run", "fix calc.py", "--workspace", str(ws), "--yes",
        "--test-cmd", f"{sys.executable} check.py", "--test-rounds", "0", "--retries", "1",
    )  # fmt: skip
    assert code == 1 and "outcome: tests_failed" in err
    assert "the files hold attempt 1" in err
    assert "all tests pass" not in out.lower()


def test_without_retries_a_copied_fix_ends_stuck_as_before(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_server.script(*[edit("calc.py", HALF)] * 3)
    code, out, _err = run(capsys, ws, "--retries", "0")
    assert code == 1
    events = json_lines(out)
    assert not [e for e in events if e["event"] == "retry"]
    assert events[-1]["outcome"] == "stuck"
    assert (ws / "calc.py").read_text() == HALF


def test_the_last_attempt_that_copies_its_failed_code_ends_at_once(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No fresh attempt is left, and the fix gives the failed code back: asking again gets the
    same code (seen: three more copies, then `stuck`), so the task ends, `tests_failed`."""
    product = "def sub(a, b):\n    return a * b\n"  # fails both cases
    cli_server.script(edit("calc.py", HALF), edit("calc.py", HALF), edit("calc.py", product),
                      *[edit("calc.py", product)] * 3)  # fmt: skip
    code, out, err = run(capsys, ws, "--retries", "1")
    assert code == 1
    assert json_lines(out)[-1]["outcome"] == "tests_failed"
    assert len(cli_server.completions()) == 4  # no request after the copy
    assert "after 2 attempts; the last fix changed nothing" in err
    assert (ws / "calc.py").read_text() == HALF  # the attempt that failed fewest checks


def test_a_task_stuck_before_it_wrote_anything_starts_over(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A refused write to the test file, given three times: the task's own prompt is asked
    again, sampled as a fresh attempt, instead of ending `stuck` with nothing done."""
    ws = workspace(tmp_path, {"calc.py": WRONG, "test_calc.py": CHECK})
    refused = edit("test_calc.py", "print('all good')\n")
    cli_server.script(refused, refused, refused, edit("calc.py", RIGHT))
    code, out, err = call_cli(
        capsys, "run", "fix calc.py", "--workspace", str(ws), "--yes", "--json",
        "--test-cmd", f"{sys.executable} test_calc.py",
    )  # fmt: skip
    assert code == 0, err
    assert (ws / "calc.py").read_text() == RIGHT
    events = json_lines(out)
    retries = [e for e in events if e["event"] == "retry"]
    assert [(e["attempt"], e["restored"]) for e in retries] == [(2, [])]
    assert retries[0]["reason"].startswith("the model repeated itself")
    first, *_, again = (r.body for r in cli_server.completions())
    assert again["prompt"] == first["prompt"]
    assert again["temperature"] == RETRY_TEMPERATURE


@pytest.mark.parametrize(
    ("output", "count"),
    [
        ("Failed example:\n...\n***Test Failed*** 2 failures.", 2),
        ("***Test Failed*** 1 failures.\n***Test Failed*** 1 failures.", 2),
        ("Ran 5 tests in 0.001s\n\nFAILED (failures=2, errors=1)", 3),
        ("=========== 1 failed, 4 passed in 0.05s ===========", 1),
        ("==== 2 failed, 1 error in 0.1s ====", 3),
        ("FAILED test_x.py::test_a - assert 1 == 2\n2 failed, 1 passed in 1.37s", 2),
        ("==== 3 passed in 0.1s ====", 0),
        ("Traceback (most recent call last):\nNameError: x", None),
        ("", None),
    ],
)
def test_failure_count_reads_the_runners_summaries(output: str, count: int | None) -> None:
    assert failure_count(output) == count


def test_found_pytest_runs_count_every_failing_test(tmp_path: Path) -> None:
    """The attempts are ranked by the count of failed tests, so the found pytest command runs
    them all (no `-x`) and its quiet summary is read."""
    (tmp_path / "test_x.py").write_text(
        "def test_a():\n    assert 1 == 2\n\n\ndef test_b():\n    assert 2 == 3\n\n\n"
        "def test_c():\n    pass\n"
    )
    command = checks.tests_command(["test_x.py"], "pytest").replace("python3", sys.executable, 1)
    ran = subprocess.run(
        shlex.split(command), cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert failure_count(ran.stdout) == 2, ran.stdout


def test_tests_that_cannot_be_collected_have_no_count(tmp_path: Path) -> None:
    """pytest counts a module that fails to import as "1 error": one, where the stub before it
    failed every test (seen: the 0.5B's stray line in stats.py broke the test's import). No test
    ran, so nothing was counted, and such an attempt ranks after any counted one."""
    (tmp_path / "stats.py").write_text("def mean(values):\n    return 0\n\ntest_stats.py\n")
    (tmp_path / "test_stats.py").write_text(
        "from stats import mean\n\n\ndef test_a():\n    assert mean([1]) == 1\n"
    )
    command = checks.tests_command(["test_stats.py"], "pytest").replace(
        "python3", sys.executable, 1
    )
    ran = subprocess.run(
        shlex.split(command), cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert "1 error" in ran.stdout and failure_count(ran.stdout) is None, ran.stdout


def test_a_tie_keeps_the_first_attempt_and_a_known_count_beats_none() -> None:
    retries = Retries(allowed=3)
    retries.writing(2, 0, "a.py", "old")
    retries.close({"a.py": "one"}, "***Test Failed*** 1 failures.")
    retries.writing(2, 0, "a.py", "old")
    best = retries.best({"a.py": "two"}, "***Test Failed*** 1 failures.")
    assert best is not None and best.files == {"a.py": "one"}
    retries.close({"a.py": "two"}, "crashed")
    retries.writing(2, 0, "a.py", "old")
    assert retries.best({"a.py": "three"}, "***Test Failed*** 3 failures.") == best
    assert retries.best({"a.py": "four"}, "all good: 0 failures") == best  # unknown ranks last


def test_an_attempt_stays_only_when_it_failed_fewer_checks_than_the_files_before() -> None:
    retries = Retries(allowed=3)
    retries.checked_before("***Test Failed*** 2 failures.", ok=False)
    retries.writing(2, 0, "a.py", "old")
    retries.writing(2, 0, "new.py", None)
    retries.close({"a.py": "one", "new.py": "n"}, "***Test Failed*** 2 failures.")
    retries.writing(2, 0, "a.py", "old")
    best = retries.best({"a.py": "two"}, "***Test Failed*** 2 failures.")
    assert best is not None and best.files == {"a.py": "old"}  # a created file has no text
    assert retries.best({"a.py": "old"}, "") is None  # the files already are as they were
    assert retries.best({"a.py": "three"}, "***Test Failed*** 1 failures.") is None
    retries.forget()  # compacted: the attempts are gone, what the files were is not
    assert retries.best({"a.py": "four"}, "") == best
    retries.passed()
    assert retries.baseline == 0 and retries.best({"a.py": "five"}, "") is None
    retries.writing(2, 0, "a.py", "five")  # a change after the pass, failing at the end
    assert retries.best({"a.py": "six"}, "1 failed in 0.01s") == Attempt({"a.py": "five"}, 0)


def test_a_fresh_attempt_samples_once_and_a_pass_forgets_the_attempts() -> None:
    retries = Retries(allowed=1)
    assert retries.sampling() == {} and not retries.can_retry()
    retries.writing(4, 1, "a.py", None)
    assert retries.can_retry()
    point = retries.close({"a.py": "x"}, "")
    assert (point.messages, point.rounds, point.before) == (4, 1, {"a.py": None})
    assert retries.sampling() == {"temperature": RETRY_TEMPERATURE, "seed": 1}
    assert retries.sampling() == {}
    retries.writing(4, 1, "a.py", None)
    assert not retries.can_retry()  # the one retry is used
    retries.passed()
    assert retries.best({"a.py": "y"}, "") is None


def test_a_fix_that_only_moves_docstring_lines_is_no_fix(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    moved = '"""Subtraction."""\n\n\ndef sub(a, b):\n    # b from a\n    return b - a\n'
    cli_server.script(edit("calc.py", HALF), edit("calc.py", moved), edit("calc.py", RIGHT))
    code, out, err = run(capsys, ws)
    assert code == 0, err
    assert [e["attempt"] for e in json_lines(out) if e["event"] == "retry"] == [2]
    assert (ws / "calc.py").read_text() == RIGHT


def test_same_code_leaves_out_docstrings_and_comments_only() -> None:
    from fusion_tui.agent.edits import same_code

    a = 'def f(x):\n    """Doubles.\n\n    >>> f(1)\n    2\n    """\n    return 2 * x\n'
    b = 'def f(x):\n    """Doubles.\n    >>> f(1)\n    2\n    """\n    # twice\n    return 2 * x\n'
    assert same_code(a, b, "m.py")
    assert not same_code(a, b.replace("2 * x", "x + x"), "m.py")
    assert not same_code(a, b, "notes.txt") and not same_code(a, "def f(:", "m.py")


def retried_after_a_copy(
    cli_server: FakeLlamaServer,
    ws: Path,
    capsys: pytest.CaptureFixture[str],
    *fresh: Reply,
) -> list[dict[str, Any]]:
    """Half a fix, a copy of it (the first retry), then the `fresh` replies, then the right
    code: the run completes with it; its `retry` events."""
    cli_server.script(edit("calc.py", HALF), edit("calc.py", HALF), *fresh, edit("calc.py", RIGHT))
    code, out, err = run(capsys, ws)
    assert code == 0, err
    assert (ws / "calc.py").read_text() == RIGHT
    return [e for e in json_lines(out) if e["event"] == "retry"]


def test_a_garbled_fresh_attempt_is_sampled_again_not_repaired(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    garbled = Reply(text=["calc.py\n```python\ndef sub(a, b):"], prompt_seconds=0.01)
    retries = retried_after_a_copy(cli_server, ws, capsys, garbled)
    assert [(e["attempt"], e["restored"]) for e in retries] == [(2, ["calc.py"]), (3, [])]
    assert "could not be used" in retries[1]["reason"]
    bodies = [r.body for r in cli_server.completions()]
    assert bodies[3]["prompt"] == bodies[0]["prompt"] and bodies[3]["seed"] == 2


def test_a_fresh_attempt_that_repeats_a_call_is_sampled_again_not_stuck(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    read = Reply(text=['<tool_call>\n{"name": "read_file", "arguments": {"path": "calc.py"}}\n'
                       "</tool_call>"], prompt_seconds=0.01)  # fmt: skip
    retries = retried_after_a_copy(cli_server, ws, capsys, read, read, read)
    assert [e["attempt"] for e in retries] == [2, 3]
    assert retries[1]["reason"].startswith("the model repeated itself")


def test_a_fresh_attempt_of_words_alone_is_sampled_again(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    words = Reply(text=["Implement the function sub in calc.py."], prompt_seconds=0.01)
    retries = retried_after_a_copy(cli_server, ws, capsys, words)
    assert [(e["attempt"], e["reason"]) for e in retries][1] == (
        3,
        "the fresh attempt gave words but no code",
    )


def test_a_usage_example_beside_the_fix_is_no_edit(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The function with no path, then lines that call it: the function is written, the calls
    are neither written nor refused, and the task ends on that first reply."""
    ws = workspace(tmp_path, {"calc.py": WRONG})
    usage = "Use it so:\n\n```python\nprint(sub(3, 1))  # 2\n```"
    cli_server.script(Reply(text=[f"```python\n{RIGHT}```\n\n{usage}"], prompt_seconds=0.01))
    code, out, err = call_cli(
        capsys, "run", "fix calc.py", "--workspace", str(ws), "--yes", "--json"
    )
    assert code == 0, err
    assert (ws / "calc.py").read_text() == RIGHT
    assert len(cli_server.completions()) == 1
    outcome = json_lines(out)[-1]
    assert outcome["outcome"] == "completed", outcome


SUB_TESTS = (
    "from calc import sub\n\n\ndef test_apart():\n    assert sub(3, 1) == 2\n\n\n"
    "def test_same():\n    assert sub(1, 1) == 0\n"
)
"""Tests shown with the task (found, not a test command): WRONG fails both."""


def test_found_tests_count_the_files_before_once_an_attempt_is_undone(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Seen on Exercism's pov with the 1.5B: every attempt broke the tests' import (no count),
    the files before were never counted, and the first broken attempt was kept over files that
    imported. The first undo counts them, once; attempts that cannot be counted lose to them."""
    ws = workspace(tmp_path, {"calc.py": WRONG, "test_calc.py": SUB_TESTS})
    broken = [f"def sub(a, b) -> {name}:\n    return a - b\n" for name in ("Num", "Diff", "Res")]
    cli_server.script(*(edit("calc.py", text) for text in broken))
    code, out, err = call_cli(
        capsys, "run", "fix calc.py", "--workspace", str(ws), "--yes", "--json",
        "--test-rounds", "0", "--retries", "2",
    )  # fmt: skip
    assert code == 1
    runs = [(e["round"], e["exit"]) for e in json_lines(out) if e["event"] == "test"]
    assert runs == [(1, 2), (0, 1), (1, 2), (1, 2)]  # collection errors; the files before: 2 fail
    assert json_lines(out)[-1]["outcome"] == "tests_failed"
    assert (ws / "calc.py").read_text() == WRONG
    assert "no attempt failed fewer than the 2 check(s) the files failed before the task" in err


def test_with_found_tests_a_counted_attempt_that_failed_fewer_stays(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = workspace(tmp_path, {"calc.py": WRONG, "test_calc.py": SUB_TESTS})
    cli_server.script(edit("calc.py", HALF), edit("calc.py", "def sub(a, b) -> N:\n    pass\n"))
    code, _out, err = call_cli(
        capsys, "run", "fix calc.py", "--workspace", str(ws), "--yes", "--json",
        "--test-rounds", "0", "--retries", "1",
    )  # fmt: skip
    assert code == 1
    assert (ws / "calc.py").read_text() == HALF
    assert "the files hold attempt 1, which failed fewest checks, 1 failed" in err


def test_undone_attempts_are_named_at_the_end_when_the_files_are_already_as_before() -> None:
    """The last attempt was undone and its fresh one ran out of time before it wrote: the files
    already are as before the task, and the ending still says no attempt beat them."""
    retries = Retries(allowed=3)
    retries.checked_before("15 failed in 0.7s", ok=False)
    retries.writing(2, 0, "a.py", "stub")
    retries.close({"a.py": "one"}, "15 failed in 0.7s")
    assert retries.best({"a.py": "stub"}, "") == Attempt({"a.py": "stub"}, 15)
    retries.writing(2, 0, "a.py", "stub")  # the open attempt gave the stub back: it is the answer
    assert retries.best({"a.py": "stub"}, "15 failed in 0.7s") is None


def test_an_ending_after_an_undo_says_the_files_are_as_they_were(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    product = "def sub(a, b):\n    return a * b\n"  # fails both cases, as WRONG does
    cli_server.script(edit("calc.py", product), Reply("I cannot fix this."), Reply("No."))
    code, _out, err = run(capsys, ws, "--test-rounds", "0", "--retries", "1")
    assert code == 1
    assert (ws / "calc.py").read_text() == WRONG
    assert (
        "no attempt failed fewer than the 2 check(s) the files failed before the task: "
        "they are as they were" in err
    )


def test_the_end_line_says_what_vouches_for_a_completed_change(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A completed change is read as a tested one; the end says so only when a check ran."""
    for name in "abc":
        (tmp_path / name).mkdir()
    tested = workspace(tmp_path / "a", {"calc.py": WRONG, "check.py": CHECK})
    untested = workspace(tmp_path / "b", {"calc.py": WRONG})
    again = workspace(tmp_path / "c", {"calc.py": WRONG})
    cli_server.script(edit("calc.py", RIGHT), edit("calc.py", RIGHT), edit("calc.py", RIGHT))
    code, out, _ = run(capsys, tested)
    assert code == 0 and json_lines(out)[-1]["checked"] == "tests pass"
    code, out, _ = call_cli(capsys, "run", "fix calc.py", "--workspace", str(untested), "--yes",
                            "--json")  # fmt: skip
    assert code == 0 and json_lines(out)[-1]["checked"] == "not tested"
    code, _, err = call_cli(capsys, "run", "fix calc.py", "--workspace", str(again), "--yes")
    assert code == 0 and "outcome: completed · 1 step(s) · not tested · session" in err
