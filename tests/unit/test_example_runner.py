"""The docstring examples the agent runs when no test is given (`agent/example_runner.py`), run
as the agent runs them: the file as a script of the workspace's `python3`, on files written here."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fusion_tui.agent.checks import EXAMPLE_RUNNER

STATED = '''def fly(q, w):
    """Whether q flies.

    Example:
    fly([1, 2], 5) ➞ False
    fly([3], 5) ==> True
    fly([3, 2, 3], 9) == True
    fly(a, b) => True
    For fly([1], 1) -> the answer depends.
    """
    return sum(q) <= w and q == q[::-1]


def avg(xs):
    """avg([1, 2]) == 1.5000000001"""
    return sum(xs) / len(xs)
'''


def run(tmp_path: Path, text: str, name: str = "mod.py") -> subprocess.CompletedProcess[str]:
    (tmp_path / name).write_text(text)
    return subprocess.run(
        ["python3", str(EXAMPLE_RUNNER), name], cwd=tmp_path, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


def test_stated_examples_that_hold_pass_and_loose_lines_are_passed_over(tmp_path: Path) -> None:
    done = run(tmp_path, STATED)
    assert (done.returncode, done.stdout) == (0, ""), done.stderr


def test_a_stated_example_the_code_gets_wrong_is_shown_as_doctest_shows_one(
    tmp_path: Path,
) -> None:
    done = run(tmp_path, STATED.replace("q == q[::-1]", "len(q) > 1"))
    assert done.returncode == 1
    assert "Failed example:\n    fly([3], 5)\nExpected:\n    True\nGot:\n    False" in done.stdout
    assert "***Test Failed*** 2 failures." in done.stdout  # fly([1, 2], 5) too


def test_an_example_whose_call_raises_shows_the_error(tmp_path: Path) -> None:
    done = run(tmp_path, STATED.replace("return sum(xs) / len(xs)", "return xs[5]"))
    assert done.returncode == 1
    assert "avg([1, 2])" in done.stdout and "IndexError: list index out of range" in done.stdout


def test_doctest_examples_run_as_doctest_runs_them(tmp_path: Path) -> None:
    text = 'def double(n):\n    """\n    >>> double(3)\n    6\n    >>> [double(1),\n    ...  2]\n    [2, 2]\n    """\n    return n * 2\n'  # noqa: E501
    assert run(tmp_path, text).returncode == 0
    wrong = run(tmp_path, text.replace("n * 2", "n + 2"))
    assert wrong.returncode == 1 and "Failed example:" in wrong.stdout


def test_a_file_that_cannot_be_imported_gives_no_verdict(tmp_path: Path) -> None:
    done = run(tmp_path, "import no_such_package_here\n\n" + STATED)
    assert done.returncode == 2
    assert "Failed example" not in done.stdout and "no_such_package_here" in done.stderr


def test_a_file_whose_own_code_raises_as_it_is_imported_is_a_verdict(tmp_path: Path) -> None:
    """A stray `python` line left from a code fence compiles, and raises NameError on import."""
    done = run(tmp_path, "python\n" + STATED)
    assert done.returncode == 3
    assert "raised an error while it was imported" in done.stdout
    assert "NameError: name 'python' is not defined" in done.stdout


def test_a_main_block_does_not_run(tmp_path: Path) -> None:
    done = run(tmp_path, STATED + '\nif __name__ == "__main__":\n    input()\n')
    assert done.returncode == 0, done.stderr


BY_PARAMETERS = '''def maximum(arr, k):
    """The k largest of arr, sorted.

    Example 1:

        Input: arr = [-3, -4, 5], k = 3
        Output: [-4, -3, 5]

    Example 2:
        Input: arr = [4, -4, 4], k = 2

        Output: [4, 4]

    Input: arr = xs, k = 1
    Output: [2]
    Input: arr = [1], size = 1
    Output: [1]
    """
    return sorted(sorted(arr)[-k:]) if k else []


def total(lst, start=0):
    """
    For lst = [1,2,3] the output should be 6
    For lst = [], start = 2  the output should be 2.
    """
    return sum(lst, start)


def double(n):
    """Input: 3
    Output: 6"""
    return n * 2
'''


def test_examples_by_parameters_that_hold_pass_and_loose_ones_are_passed_over(
    tmp_path: Path,
) -> None:
    done = run(tmp_path, BY_PARAMETERS)
    assert (done.returncode, done.stdout) == (0, ""), done.stderr


def test_an_example_by_parameters_the_code_gets_wrong_is_shown_with_its_call(
    tmp_path: Path,
) -> None:
    wrong = BY_PARAMETERS.replace("sorted(sorted(arr)[-k:])", "sorted(arr)[-k:][::-1]")
    wrong = wrong.replace("sum(lst, start)", "sum(lst)").replace("n * 2", "n + 2")
    done = run(tmp_path, wrong)
    assert done.returncode == 1
    assert "Failed example:\n    maximum(arr=[-3, -4, 5], k=3)\nExpected:\n    [-4, -3, 5]" in (
        done.stdout
    )
    assert "Failed example:\n    total(lst=[], start=2)\nExpected:\n    2\nGot:\n    0" in (
        done.stdout
    )
    assert "Failed example:\n    double(3)\nExpected:\n    6\nGot:\n    5" in done.stdout
    assert "***Test Failed*** 3 failures." in done.stdout  # [4, 4] reversed is itself
