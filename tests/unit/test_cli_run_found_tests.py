"""`fusion-tui run` without a test command finds its own: the test files shown with the task
(pytest, else unittest), else the docstring examples of the Python files the agent wrote. A
failure goes back to the model, a file that cannot be imported is no wrong example,
`agent.findTests: false` turns it off, and nothing runs that the user did not allow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fusion_tui.agent.approval import Decision
from fusion_tui.agent.checks import (
    EXAMPLE_RUNNER,
    asks_to_change_tests,
    check_label,
    dropped_examples,
    examples_command,
    examples_failed,
    with_examples,
)
from fusion_tui.agent.events import TestRan as Ran
from fusion_tui.agent.loop import run_task
from fusion_tui.paths import AppPaths
from tests.fakes.clock import FakeClock
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.unit.cli_support import call_cli, edit, json_lines, workspace
from tests.unit.test_agent_fakes import Recorder, Script, make_deps
from tests.unit.test_agent_fakes import edit as fake_edit

STUB = '''def double(n):
    """Twice n.

    >>> double(3)
    6
    """
    raise NotImplementedError
'''
WRONG = STUB.replace("raise NotImplementedError", "return n + 2")
RIGHT = STUB.replace("raise NotImplementedError", "return n * 2")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return workspace(tmp_path, {"calc.py": STUB})


def runs_of(out: str) -> list[dict[str, object]]:
    return [e for e in json_lines(out) if e["event"] == "test"]


def test_a_wrong_example_goes_back_and_the_fix_completes(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_server.script(edit("calc.py", WRONG), edit("calc.py", RIGHT, prose="Fixed."))
    code, out, err = call_cli(
        capsys, "run", "implement double in calc.py", "--workspace", str(ws), "--yes", "--json"
    )
    assert code == 0, err
    runs = runs_of(out)
    assert [(t["ok"], t["round"]) for t in runs] == [(False, 1), (True, 2)]
    assert runs[0]["command"] == f"python3 {EXAMPLE_RUNNER} calc.py"
    assert json_lines(out)[-1]["outcome"] == "completed"
    assert (ws / "calc.py").read_text() == RIGHT
    told = str(cli_server.completions()[1].body["prompt"]).rsplit("<|im_start|>user", 1)[-1]
    assert "The examples in the docstrings do not hold" in told
    assert "Failed example:" in told and "double(3)" in told


def test_a_change_that_drops_a_failing_example_is_refused(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    two = STUB.replace("    6\n", "    6\n    >>> double(0)\n    0\n")
    ws = workspace(tmp_path, {"calc.py": two})
    wrong = two.replace("raise NotImplementedError", "return n + 3")
    cheat = wrong.replace("    >>> double(3)\n    6\n", "")
    right = two.replace("raise NotImplementedError", "return n * 2")
    cli_server.script(edit("calc.py", wrong), edit("calc.py", cheat), edit("calc.py", right))
    code, _out, err = call_cli(
        capsys, "run", "implement double in calc.py", "--workspace", str(ws), "--yes", "--json",
        "--retries", "0",  # with retries, a cheat is no fix: a fresh attempt (test_agent_retry)
    )  # fmt: skip
    assert code == 0, err
    assert (ws / "calc.py").read_text() == right
    told = str(cli_server.completions()[2].body["prompt"]).rsplit("<|im_start|>user", 1)[-1]
    assert "calc.py would lose its docstring example `>>> double(3)`" in told
    assert "the examples are the task's checks" in told


@pytest.mark.parametrize(
    ("task", "asks"),
    [
        ("implement abbreviate in acronym.py; the tests are in acronym_test.py", False),
        ("fix calc.py so the tests pass", False),
        ("make test_calc.py pass", False),
        ("add a test to test_calc.py for zero", True),
        ("fix test_io.py: it imports the wrong module", True),
        ("write unit tests for calc.py in test_calc.py", True),
    ],
)
def test_a_task_that_names_its_tests_as_the_judge_does_not_ask_to_change_them(
    task: str, asks: bool
) -> None:
    assert asks_to_change_tests(task) is asks


def test_the_test_file_a_task_names_as_its_judge_is_not_the_agents_to_change(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    check = "import unittest\nfrom calc import double\n"
    ws = workspace(tmp_path, {"calc.py": STUB, "calc_test.py": check})
    cli_server.script(edit("calc_test.py", "pass\n"), edit("calc.py", RIGHT))
    code, _out, err = call_cli(
        capsys, "run", "implement double in calc.py; the tests are in calc_test.py",
        "--workspace", str(ws), "--yes", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert (ws / "calc_test.py").read_text() == check
    told = str(cli_server.completions()[1].body["prompt"]).rsplit("<|im_start|>user", 1)[-1]
    assert "Not written: calc_test.py holds tests" in told


def test_a_rewrite_without_the_docstring_drops_no_example() -> None:
    assert dropped_examples(STUB, "def double(n):\n    return n * 2\n") == []
    assert dropped_examples(STUB, RIGHT) == []
    assert dropped_examples("x = 1\n", "y = 2\n") == []


def test_examples_that_still_fail_end_tests_failed(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tries = [WRONG, WRONG.replace("n + 2", "n - 2"), WRONG.replace("n + 2", "n * 3")]
    cli_server.script(*[edit("calc.py", t) for t in tries])
    code, out, err = call_cli(
        capsys, "run", "implement double in calc.py", "--workspace", str(ws), "--yes", "--json"
    )
    assert code == 1
    assert [t["ok"] for t in runs_of(out)] == [False, False, False]
    assert json_lines(out)[-1]["outcome"] == "tests_failed"
    assert "the docstring examples still fail" in err


def test_the_config_turns_the_examples_off(
    cli_server: FakeLlamaServer, ws: Path, app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    app_home.config_dir.mkdir(parents=True, exist_ok=True)
    app_home.config_file.write_text("version: 3\nagent:\n  findTests: false\n")
    cli_server.script(edit("calc.py", WRONG))
    code, out, err = call_cli(
        capsys, "run", "implement double in calc.py", "--workspace", str(ws), "--yes", "--json"
    )
    assert code == 0, err
    assert runs_of(out) == []
    assert len(cli_server.completions()) == 1


async def test_the_user_is_asked_before_the_examples_run_and_a_no_runs_nothing(
    ws: Path,
) -> None:
    script = Script(FakeClock(start=1000.0), [fake_edit("calc.py", WRONG)])
    approver = Recorder(Decision.ALLOW_ONCE, Decision.DENY)  # the write, then the examples
    events: list[Any] = []
    res = await run_task(
        "implement double in calc.py", session_id="s",
        deps=make_deps(ws, script, approver, events=events),
    )  # fmt: skip
    assert [(r.kind, r.tool) for r in approver.asked] == [
        ("write", "write_file"),
        ("shell", "run_examples"),
    ]
    assert approver.asked[1].prefix == f"python3 {EXAMPLE_RUNNER}"  # "always": only the runner
    assert not any(isinstance(e, Ran) for e in events)
    assert res.outcome == "completed"


def test_only_python_files_with_examples_are_run() -> None:
    files = {"a.py": STUB, "b.py": "x = 1\n", "c.md": ">>> 1\n1\n", "d.py": "# >>> not one\n",
             "e.py": '"""\n    f(2) == 4\n"""\n',
             "f.py": '"""\n    Input: n = 2\n    Output: 4\n"""\n',
             "g.py": '"""\nFor n = 2 the output should be 4\n"""\n',
             "h.py": '"""Output: 4"""\n'}  # fmt: skip
    paths = ["a.py", "b.py", "c.md", "d.py", "e.py", "f.py", "g.py", "h.py"]
    assert with_examples(paths, files) == ["a.py", "e.py", "f.py", "g.py"]


def test_an_example_by_parameters_left_out_of_a_rewrite_is_a_dropped_example() -> None:
    old = 'def f(n):\n    """\n    Input: n = 2\n    Output: 4\n    Input: n = 3\n    Output: 9\n'
    old += '    """\n'
    new = 'def f(n):\n    """\n    Input: n = 2\n    Output: 4\n    """\n    return n * n\n'
    assert dropped_examples(old, new) == ["Input: n = 3", "Output: 9"]


def test_the_example_runner_is_shown_by_what_it_checks_not_by_its_path() -> None:
    assert check_label(examples_command(["a.py", "b c.py"])) == (
        "docstring examples of a.py 'b c.py'"
    )
    assert check_label("python3 -m pytest -q") == "python3 -m pytest -q"


def test_a_file_that_cannot_be_imported_is_no_failed_example() -> None:
    assert examples_failed(1, "Failed example:\n    double(3)")
    assert examples_failed(None, "")  # ran past its time: code that loops
    assert not examples_failed(2, "ModuleNotFoundError: No module named 'numpy'")
    assert not examples_failed(0, "")
    assert examples_failed(3, "NameError: name 'python' is not defined")  # the file's own code


def test_a_hidden_file_the_task_names_comes_with_the_task(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = workspace(tmp_path, {"bowling.py": "def score(rolls):\n    pass\n"})
    (ws / ".docs").mkdir()
    (ws / ".docs" / "instructions.md").write_text("Score a game of ten-pin bowling.\n")
    cli_server.script(edit("bowling.py", "def score(rolls):\n    return sum(rolls)\n"))
    code, _out, err = call_cli(
        capsys, "run", "Do what .docs/instructions.md says in bowling.py", "--workspace",
        str(ws), "--yes",
    )  # fmt: skip
    assert code == 0, err
    first = str(cli_server.completions()[0].body["prompt"])
    assert ".docs/instructions.md\n```markdown\nScore a game of ten-pin bowling.\n```" in first


CALC_TEST = "from calc import sub\n\n\ndef test_sub():\n    assert sub(3, 1) == 2\n"
CALC_UNITTEST = (
    "import unittest\n\nfrom calc import sub\n\n\nclass SubTest(unittest.TestCase):\n"
    "    def test_sub(self):\n        self.assertEqual(sub(3, 1), 2)\n"
)
SUB_WRONG = "def sub(a, b):\n    return a + b\n"
SUB_RIGHT = "def sub(a, b):\n    return a - b\n"


def test_the_test_files_shown_with_the_task_are_its_tests(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = workspace(tmp_path, {"calc.py": "def sub(a, b):\n    pass\n", "test_calc.py": CALC_TEST})
    cli_server.script(
        edit("test_calc.py", "def test_sub():\n    pass\n"),  # the tests judge: not the model's
        edit("calc.py", SUB_WRONG),
        edit("calc.py", SUB_RIGHT),
    )
    code, out, err = call_cli(
        capsys, "run", "implement sub in calc.py", "--workspace", str(ws), "--yes", "--json"
    )
    assert code == 0, err
    runs = runs_of(out)
    assert [(t["ok"], t["command"]) for t in runs] == [
        (False, "python3 -m pytest -q --tb=short -p no:cacheprovider test_calc.py"),
        (True, "python3 -m pytest -q --tb=short -p no:cacheprovider test_calc.py"),
    ]
    assert (ws / "test_calc.py").read_text() == CALC_TEST
    prompts = [str(c.body["prompt"]) for c in cli_server.completions()]
    assert "Not written: test_calc.py holds tests" in prompts[1].rsplit("<|im_start|>user", 1)[-1]
    assert "The tests `python3 -m pytest" in prompts[2].rsplit("<|im_start|>user", 1)[-1]
    assert json_lines(out)[-1]["outcome"] == "completed"


def test_without_pytest_the_tests_run_with_unittest(
    cli_server: FakeLlamaServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    no_pytest = tmp_path / "no_pytest"
    no_pytest.mkdir()
    (no_pytest / "pytest.py").write_text("raise ImportError('no pytest in this python')\n")
    monkeypatch.setenv("PYTHONPATH", str(no_pytest))
    ws = workspace(tmp_path, {"calc.py": SUB_WRONG, "calc_test.py": CALC_UNITTEST})
    cli_server.script(edit("calc.py", SUB_WRONG.replace("+", "*")), edit("calc.py", SUB_RIGHT))
    code, out, err = call_cli(
        capsys, "run", "fix sub in calc.py", "--workspace", str(ws), "--yes", "--json"
    )
    assert code == 0, err
    assert [(t["ok"], t["command"]) for t in runs_of(out)] == [
        (False, "python3 -m unittest calc_test.py"),
        (True, "python3 -m unittest calc_test.py"),
    ]


def test_examples_that_cannot_be_imported_are_shown_but_not_held_against_the_code(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = workspace(tmp_path, {"calc.py": "import no_such_package_here\n\n" + STUB})
    cli_server.script(edit("calc.py", "import no_such_package_here\n\n" + RIGHT))
    code, out, err = call_cli(
        capsys, "run", "implement double in calc.py", "--workspace", str(ws), "--yes", "--json"
    )
    assert code == 0, err
    assert [(t["ok"], t["exit"]) for t in runs_of(out)] == [(False, 2)]  # shown as it ended
    assert json_lines(out)[-1]["outcome"] == "completed"
    assert len(cli_server.completions()) == 1  # nothing handed back


def test_a_rewrite_without_the_examples_still_runs_and_an_import_error_goes_back(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """HumanEval/129: the 1.5B's rewrite dropped the docstring and added a module-level call
    that raised; with no example left nothing ran it, and the task ended `completed`."""
    raising = "def double(n):\n    return n * 2\n\n\nprint(doble(3))\n"
    cli_server.script(edit("calc.py", raising), edit("calc.py", RIGHT, prose="Fixed."))
    code, out, err = call_cli(
        capsys, "run", "implement double in calc.py", "--workspace", str(ws), "--yes", "--json"
    )
    assert code == 0, err
    runs = runs_of(out)
    assert [(t["ok"], t["exit"]) for t in runs] == [(False, 3), (True, 0)]
    told = str(cli_server.completions()[1].body["prompt"]).rsplit("<|im_start|>user", 1)[-1]
    assert "raised an error as it was imported" in told


def test_a_write_before_a_refused_repeat_in_the_same_reply_is_still_checked(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The 1.5B gave one function three times in one reply (Exercism atbash-cipher, try 2): the
    first was written, the third refused as a repeat, and the write went unchecked: the task
    ended `completed` with 14 tests failing."""
    ws = workspace(tmp_path, {"calc.py": "def sub(a, b):\n    pass\n", "test_calc.py": CALC_TEST})
    block = f"```python\n{SUB_WRONG.rstrip()}\n```"
    thrice = f"Here:\n\n{block}\n\ncalc.py\n{block}\n\nAgain:\n\n{block}"
    cli_server.script(*[Reply(text=[said]) for said in (thrice, "Done.", "Done, really.")])
    code, out, err = call_cli(
        capsys, "run", "implement sub in calc.py", "--workspace", str(ws), "--yes", "--json",
        "--retries", "0",
    )  # fmt: skip
    assert code == 1
    runs = runs_of(out)
    assert runs and runs[0]["ok"] is False and runs[0]["round"] == 1, err
    assert json_lines(out)[-1]["outcome"] != "completed"
