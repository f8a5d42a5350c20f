"""The examples a task states (`assert f("") == 0`, `f(2) == 4`, `>>> f(2)`) are checked with
the tests: the tests may not cover what the task asked for. Seen on the 1.5B: told to add
`sentence_count` and given a test for it, it wrote the function wrong, left the test out, and
the old tests passed: `completed · tests pass`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fusion_tui.agent.checks import (
    EXAMPLE_RUNNER,
    MAX_TASK_EXAMPLES,
    check_label,
    examples_command,
    task_examples,
)
from fusion_tui.paths import AppPaths
from tests.fakes.fake_server import FakeLlamaServer
from tests.unit.cli_support import call_cli, edit, json_lines, workspace

TASK = """Add sentence_count(text) to textstats.py. Use this test:

    def test_sentence_count():
        assert sentence_count("Hi. Who? Go!") == 3
        assert sentence_count("") == 0
"""
CODE = "def word_count(text):\n    return len(text.split())\n"
TESTS = (
    "from textstats import word_count\n\n\ndef test_words():\n    assert word_count('a b') == 2\n"
)
WRONG = CODE + "\n\ndef sentence_count(text):\n    return len(text.split('.!?'))\n"
RIGHT = CODE + (
    "\n\ndef sentence_count(text):\n    return sum(text.count(mark) for mark in '.!?')\n"
)


def test_the_examples_a_task_states_are_read_as_calls_and_values() -> None:
    task = (
        TASK + "Also `word_count('a  b') == 2` must hold, and\n>>> word_count('')\n0\n"
        "longest('to be') -> 'to'\nWhy is g(2) == 5?\nf(x) == 3\nh(1) == 2 but it gives 3\n"
    )
    assert task_examples(task) == [
        'sentence_count("Hi. Who? Go!") == 3',
        'sentence_count("") == 0',
        "word_count('a  b') == 2",
        "word_count('') == 0",
        "longest('to be') == 'to'",
    ]
    assert task_examples('assert f(2) == 4, "twice two"\nassert g(1) != 2') == ["f(2) == 4"]
    many = "\n".join(f"f({n}) == {n}" for n in range(MAX_TASK_EXAMPLES + 5))
    assert len(task_examples(many)) == MAX_TASK_EXAMPLES
    assert task_examples("make word_count(text) count tabs too") == []


def runner(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["python3", str(EXAMPLE_RUNNER), *args], cwd=ws, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


def test_the_runner_checks_the_given_examples_in_the_file_that_has_the_function(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.py").write_text('def twice(n):\n    """twice(2) == 5"""\n    return n * 2\n')
    (tmp_path / "b.py").write_text(WRONG)
    given = ["--given", 'sentence_count("Hi. Who?") == 2', "--given", "twice(3) == 6"]
    done = runner(tmp_path, *given, "--only-given", "a.py", "b.py")
    assert done.returncode == 1, done.stderr
    assert 'File "b.py", in the task\'s example' in done.stdout
    assert 'Failed example:\n    sentence_count("Hi. Who?")\nExpected:\n    2' in done.stdout
    assert "***Test Failed*** 1 failures." in done.stdout  # the docstring's twice(2) not run
    both = runner(tmp_path, *given, "a.py", "b.py")
    assert "***Test Failed*** 2 failures." in both.stdout  # with it


def test_a_given_example_of_a_function_no_file_has_fails(tmp_path: Path) -> None:
    (tmp_path / "textstats.py").write_text(CODE)
    done = runner(tmp_path, "--given", "sentence_count('') == 0", "--only-given", "textstats.py")
    assert done.returncode == 1
    assert "NameError: no function sentence_count in textstats.py" in done.stdout


def test_the_check_is_named_by_what_it_checks() -> None:
    given = ['f("a b") == 2', "g(1) == 1"]
    assert check_label(examples_command(["t.py"], given, only_given=True)) == (
        "the task's 2 examples on t.py"
    )
    assert check_label(examples_command(["t.py"], given[:1])) == (
        "docstring examples of t.py and the task's 1 example"
    )


def test_a_stated_example_the_tests_miss_goes_back_and_the_fix_completes(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = workspace(tmp_path, {"textstats.py": CODE, "test_textstats.py": TESTS})
    cli_server.script(edit("textstats.py", WRONG), edit("textstats.py", RIGHT, prose="Fixed."))
    code, out, err = call_cli(capsys, "run", TASK, "--workspace", str(ws), "--yes", "--json")
    assert code == 0, err
    runs = [e for e in json_lines(out) if e["event"] == "test"]
    assert [(r["ok"], "--only-given" in r["command"]) for r in runs] == [
        (True, False), (False, True), (True, False), (True, True),
    ]  # fmt: skip
    told = str(cli_server.completions()[1].body["prompt"]).rsplit("<|im_start|>user", 1)[-1]
    assert "The examples the task gives do not hold" in told
    assert 'sentence_count("Hi. Who? Go!")' in told
    end = json_lines(out)[-1]
    assert (end["outcome"], end["checked"]) == ("completed", "tests and the task's examples pass")
    assert (ws / "textstats.py").read_text() == RIGHT


def test_without_tests_the_task_examples_are_the_check(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = workspace(tmp_path, {"textstats.py": CODE})
    cli_server.script(edit("textstats.py", WRONG), edit("textstats.py", RIGHT))
    code, out, err = call_cli(capsys, "run", TASK, "--workspace", str(ws), "--yes", "--json")
    assert code == 0, err
    runs = [e for e in json_lines(out) if e["event"] == "test"]
    assert [r["ok"] for r in runs] == [False, True]
    assert "--only-given" not in runs[0]["command"]
    assert json_lines(out)[-1]["checked"] == "the task's examples pass"


def test_the_users_test_command_runs_before_the_task_examples(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = workspace(tmp_path, {"textstats.py": CODE, "test_textstats.py": TESTS})
    cli_server.script(edit("textstats.py", WRONG), edit("textstats.py", RIGHT))
    code, out, err = call_cli(
        capsys, "run", TASK, "--workspace", str(ws), "--yes", "--json", "--test-cmd",
        "python3 -m pytest -q -p no:cacheprovider",
    )  # fmt: skip
    assert code == 0, err
    runs = [e for e in json_lines(out) if e["event"] == "test" and e["round"] > 0]
    assert [(r["ok"], "--only-given" in r["command"]) for r in runs] == [
        (True, False), (False, True), (True, False), (True, True),
    ]  # fmt: skip
    assert json_lines(out)[-1]["checked"] == "tests and the task's examples pass"


def test_findtests_off_checks_no_task_example(
    cli_server: FakeLlamaServer,
    tmp_path: Path,
    app_home: AppPaths,
    capsys: pytest.CaptureFixture[str],
) -> None:
    app_home.config_dir.mkdir(parents=True, exist_ok=True)
    app_home.config_file.write_text("version: 3\nagent:\n  findTests: false\n")
    ws = workspace(tmp_path, {"textstats.py": CODE, "test_textstats.py": TESTS})
    cli_server.script(edit("textstats.py", WRONG))
    code, out, err = call_cli(capsys, "run", TASK, "--workspace", str(ws), "--yes", "--json")
    assert code == 0, err
    assert [e for e in json_lines(out) if e["event"] == "test"] == []
    assert json_lines(out)[-1]["checked"] == "not tested"


def test_examples_that_still_fail_say_so_at_the_end(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = workspace(tmp_path, {"textstats.py": CODE, "test_textstats.py": TESTS})
    tries = [WRONG, WRONG.replace("'.!?'", "'.'"), WRONG.replace("'.!?'", "'!'")]
    cli_server.script(*[edit("textstats.py", t) for t in tries])
    code, out, err = call_cli(
        capsys, "run", TASK, "--workspace", str(ws), "--yes", "--json", "--retries", "0"
    )
    assert code == 1
    assert json_lines(out)[-1]["outcome"] == "tests_failed"
    assert "the task's examples still fail (exit code 1)" in err


def test_a_string_that_differs_says_where(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def cw(t):\n    return ' '.join(t.split())\n")
    done = runner(tmp_path, "--given", 'cw("a  b") == "a  b"', "--given", 'cw("a ") == "a "',
                  "--only-given", "m.py")  # fmt: skip
    assert "(they first differ at character 2: expected ' b', got 'b')" in done.stdout
    assert "(the same up to character 1; then expected goes on with ' ')" in done.stdout
