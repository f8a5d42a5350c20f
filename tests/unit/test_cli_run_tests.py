"""`fusion-tui run --test-cmd`: the tests run before the first step and after every edit, a
failure goes back to the agent, `--json` prints each run; `agent.testCmd(s)` set it for a
workspace."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fusion_tui.paths import AppPaths
from tests.fakes.fake_server import FakeLlamaServer
from tests.unit.cli_support import call_cli, edit, json_lines, workspace

CHECK = "import calc, sys; sys.exit(0 if calc.sub(3, 1) == 2 else 1)"
"""The workspace's test: exit 0 when `sub` subtracts."""
WRONG = "def sub(a, b):\n    return a + b\n"
RIGHT = "def sub(a, b):\n    return a - b\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return workspace(tmp_path, {"calc.py": WRONG, "check.py": CHECK + "\n"})


def check_cmd() -> str:
    return f"{sys.executable} check.py"


def test_a_failing_test_is_shown_first_and_the_fix_completes(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_server.script(edit("calc.py", RIGHT, prose="Fixed the sign."))
    code, out, err = call_cli(
        capsys, "run", "fix calc.py", "--workspace", str(ws), "--yes", "--json",
        "--test-cmd", check_cmd(),
    )  # fmt: skip
    assert code == 0, err
    events = json_lines(out)
    tests = [e for e in events if e["event"] == "test"]
    assert [(t["ok"], t["exit"], t["round"]) for t in tests] == [(False, 1, 0), (True, 0, 1)]
    assert events[-1]["outcome"] == "completed"
    assert (ws / "calc.py").read_text() == RIGHT
    first = str(cli_server.completions()[0].body["prompt"])
    assert f"The tests `{check_cmd()}` fail (exit code 1) now" in first
    assert "calc.py\n```python\ndef sub(a, b):\n    return a + b\n```" in first  # in the chat
    assert first.split("<|im_end|>")[-2].endswith("Give calc.py in full with the fix.")


def test_tests_that_still_fail_after_the_rounds_end_tests_failed(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tries = ["def sub(a, b):\n    return b - a\n", "def sub(a, b):\n    return a * b\n"]
    cli_server.script(*[edit("calc.py", t) for t in tries])
    code, out, err = call_cli(
        capsys, "run", "fix calc.py", "--workspace", str(ws), "--yes", "--json",
        "--test-cmd", check_cmd(), "--test-rounds", "1", "--retries", "0",
    )  # fmt: skip
    assert code == 1
    events = json_lines(out)
    assert [t["ok"] for t in events if t["event"] == "test"] == [False, False, False]
    assert events[-1]["outcome"] == "tests_failed"
    assert "the tests still fail (exit code 1) after 1 round(s) of fixes" in err
    second = str(cli_server.completions()[1].body["prompt"])
    told = second.rsplit("<|im_start|>user", 1)[-1]
    assert f"The tests `{check_cmd()}` failed (exit code 1)" in told
    assert "for the last time" in told


def test_the_workspace_test_command_comes_from_the_config(
    cli_server: FakeLlamaServer, ws: Path, app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    app_home.config_dir.mkdir(parents=True, exist_ok=True)
    app_home.config_file.write_text(
        f"version: 3\nagent:\n  testCmds:\n    {ws.resolve()}: {sys.executable} check.py\n"
    )
    cli_server.script(edit("calc.py", RIGHT))
    code, out, err = call_cli(capsys, "run", "fix calc.py", "--workspace", str(ws), "--yes",
                              "--json")  # fmt: skip
    assert code == 0, err
    assert [t["ok"] for t in json_lines(out) if t["event"] == "test"] == [False, True]


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--test-cmd", " "], "--test-cmd is empty"),
    ],
)
def test_test_flags_that_cannot_take_effect_are_refused(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str],
    flags: list[str], said: str,
) -> None:  # fmt: skip
    code, _, err = call_cli(capsys, "run", "fix calc.py", "--workspace", str(ws), *flags)
    assert code == 2 and said in err
    assert not cli_server.completions()


def test_test_rounds_with_no_checks_at_all_are_refused(
    cli_server: FakeLlamaServer, ws: Path, app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found tests and docstring examples count rounds too: only with `agent.findTests` off
    and no test command would the flag be ignored."""
    app_home.config_dir.mkdir(parents=True, exist_ok=True)
    app_home.config_file.write_text("version: 3\nagent:\n  findTests: false\n")
    code, _, err = call_cli(capsys, "run", "fix calc.py", "--workspace", str(ws),
                            "--test-rounds", "1")  # fmt: skip
    assert code == 2 and "--test-rounds needs checks to count rounds of" in err
    assert not cli_server.completions()


def test_with_a_test_command_the_test_files_are_not_the_agents_to_change(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = workspace(tmp_path, {"calc.py": WRONG, "test_calc.py": CHECK + "\n"})
    cli_server.script(edit("test_calc.py", "pass"), edit("calc.py", RIGHT))
    code, _, err = call_cli(
        capsys, "run", "fix calc.py", "--workspace", str(ws), "--yes", "--json",
        "--test-cmd", f"{sys.executable} test_calc.py",
    )  # fmt: skip
    assert code == 0, err
    assert (ws / "test_calc.py").read_text() == CHECK + "\n"
    told = str(cli_server.completions()[1].body["prompt"]).rsplit("<|im_start|>user", 1)[-1]
    assert "Not written: test_calc.py holds tests, and the tests judge the change" in told
    assert "give calc.py in full" in told  # the file the tests import, named


def test_code_given_inside_a_test_file_goes_to_the_module_the_tests_import(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tests = "from calc import sub\n\n\ndef test_sub():\n    assert sub(3, 1) == 2\n"
    ws = workspace(tmp_path, {"calc.py": WRONG + "\n\ndef add(a, b):\n    return a + b\n",
                              "test_calc.py": tests})  # fmt: skip
    given = "import sys\n\nfrom calc import sub\n\n\n" + RIGHT + "\n\n" + tests.split("\n\n\n")[1]
    cli_server.script(edit("test_calc.py", given))
    code, out, err = call_cli(
        capsys, "run", "fix calc.py", "--workspace", str(ws), "--yes", "--json",
        "--test-cmd", f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py",
    )  # fmt: skip
    assert code == 0, err
    assert json_lines(out)[-1]["outcome"] == "completed"
    assert (ws / "test_calc.py").read_text() == tests
    assert (ws / "calc.py").read_text() == RIGHT + "\n\ndef add(a, b):\n    return a + b\n"
    assert len(cli_server.completions()) == 1


LONG_HEAD = "".join(f"def add_{i}(a):\n    return a + {i}\n\n\n" for i in range(120))
"""Functions enough to make calc.py a long file (`file_view.LONG_FILE_CHARS`)."""
LOUD_CHECK = "import calc, sys; r = calc.sub(3, 1); print('sub(3, 1) gave', r); sys.exit(r != 2)"


def test_a_long_module_is_shown_in_part_and_its_edited_part_lands_in_place(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = workspace(tmp_path, {"calc.py": LONG_HEAD + WRONG, "test_calc.py": LOUD_CHECK + "\n"})
    shown = "# ... 120 more functions here, not shown: add_0, add_1,"
    cli_server.script(edit("calc.py", f"{shown} add_119\n\n\n{RIGHT}"))
    code, _, err = call_cli(
        capsys, "run", "fix the sum", "--workspace", str(ws), "--yes", "--json",
        "--test-cmd", f"{sys.executable} test_calc.py",
    )  # fmt: skip
    assert code == 0, err
    assert (ws / "calc.py").read_text() == LONG_HEAD + RIGHT
    first = str(cli_server.completions()[0].body["prompt"])
    assert f"calc.py\n```python\n{shown}" in first and "def add_3(a)" not in first
    assert first.split("<|im_end|>")[-2].endswith(
        "Give the functions of calc.py that you change in full with the fix."
    )


def test_a_fix_of_a_long_module_that_fails_asks_for_the_functions_again(
    cli_server: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = workspace(tmp_path, {"calc.py": LONG_HEAD + WRONG, "test_calc.py": LOUD_CHECK + "\n"})
    cli_server.script(edit("calc.py", "def sub(a, b):\n    return a * b\n"), edit("calc.py", RIGHT))
    code, _, err = call_cli(
        capsys, "run", "fix the sum", "--workspace", str(ws), "--yes",
        "--test-cmd", f"{sys.executable} test_calc.py",
    )  # fmt: skip
    assert code == 0, err
    second = str(cli_server.completions()[1].body["prompt"])
    assert "give the functions you change in full." in second.rsplit("<|im_start|>user", 1)[-1]
    assert (ws / "calc.py").read_text() == LONG_HEAD + RIGHT


def test_long_files_go_whole_with_the_setting_off(
    cli_server: FakeLlamaServer, tmp_path: Path, app_home: AppPaths,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    ws = workspace(tmp_path, {"calc.py": LONG_HEAD + WRONG, "test_calc.py": LOUD_CHECK + "\n"})
    app_home.config_dir.mkdir(parents=True, exist_ok=True)
    app_home.config_file.write_text("version: 3\nagent:\n  longFilesInPart: false\n")
    cli_server.script(edit("calc.py", LONG_HEAD + RIGHT))
    code, _, err = call_cli(
        capsys, "run", "fix the sum", "--workspace", str(ws), "--yes", "--test-cmd",
        f"{sys.executable} test_calc.py",
    )  # fmt: skip
    assert code == 0, err
    first = str(cli_server.completions()[0].body["prompt"])
    assert "here, not shown" not in first  # whole, and too long for this context:
    assert "ask for one with read_file):\ncalc.py" in first  # named, not shown
