"""The pure parts of bench/agent_exercism.py: an exercise's workspace, the two messages of aider's
protocol, the judge (tests put back before they run) and the table. A wrong verdict here would
misjudge every client."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

import _exercism_core as ex
from _humaneval_core import sample

STUB = "def double(n):\n    pass\n"
GOOD = "def double(n):\n    return 2 * n\n"
TESTS = """\
import unittest

from doubler import double
from test_utils import TWO


class DoubleTest(unittest.TestCase):
    def test_two(self):
        self.assertEqual(double(TWO), 4)

    def test_zero(self):
        self.assertEqual(double(0), 0)
"""


def make_exercise(root: Path, slug: str = "doubler") -> Path:
    folder = root / "exercises" / "practice" / slug
    (folder / ".meta").mkdir(parents=True)
    (folder / ".docs").mkdir()
    files = {"solution": [f"{slug}.py"], "test": [f"{slug}_test.py"], "example": [".meta/ex.py"]}
    (folder / ".meta" / "config.json").write_text(json.dumps({"files": files}))
    (folder / ".meta" / "ex.py").write_text(GOOD)
    (folder / ".docs" / "introduction.md").write_text("# Introduction\n\nNumbers grow.\n")
    (folder / ".docs" / "instructions.md").write_text("# Instructions\n\nDouble a number.\n")
    (folder / f"{slug}.py").write_text(STUB)
    (folder / f"{slug}_test.py").write_text(TESTS.replace("doubler", slug))
    (folder / "test_utils.py").write_text("TWO = 2\n")
    return folder


@pytest.fixture
def exercise(tmp_path: Path) -> ex.Exercise:
    make_exercise(tmp_path / "checkout")
    (found,) = ex.load_exercises(tmp_path / "checkout")
    return found


def test_load_finds_the_tests_and_what_they_import(exercise: ex.Exercise) -> None:
    assert exercise.slug == "doubler"
    assert exercise.solution == ("doubler.py",)
    assert exercise.tests == ("doubler_test.py", "test_utils.py")


def test_first_message_is_the_docs_then_aiders_addendum(exercise: ex.Exercise) -> None:
    text = ex.first_message(exercise)
    assert text.index("Numbers grow.") < text.index("Double a number.")
    assert "modify the supplied files: doubler.py\n" in text
    assert text.rstrip().endswith("don't suggest installing any packages.")


def test_second_message_keeps_the_head_of_the_output(exercise: ex.Exercise) -> None:
    output = "\n".join(f"line {i}" for i in range(500))
    text = ex.second_message(exercise, output)
    assert "line 0\n" in text and f"line {ex.ERROR_LINES - 1}\n" in text
    assert f"line {ex.ERROR_LINES}\n" not in text
    assert "Fix the code in doubler.py to resolve the errors." in text


def test_workspace_holds_no_example_solution(exercise: ex.Exercise, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    stub = ex.make_workspace(exercise, ws)
    assert stub == {"doubler.py": STUB}
    assert (ws / ".docs" / "instructions.md").is_file()
    assert not (ws / ".meta").exists()


@pytest.mark.parametrize(
    ("solution", "verdict"),
    [
        (STUB, "no_edit"),
        (GOOD, "pass"),
        ("def double(n):\n    return n + 2\n", "wrong_answer"),
        ("def double(n) return n\n", "broken_file"),
        ("def triple(n):\n    return 3 * n\n", "broken_file"),
    ],
)
def test_verdicts(exercise: ex.Exercise, tmp_path: Path, solution: str, verdict: str) -> None:
    ws = tmp_path / "ws"
    stub = ex.make_workspace(exercise, ws)
    (ws / "doubler.py").write_text(solution)
    assert ex.classify(stub, ws, ex.run_tests(exercise, ws), timed_out=False) == verdict


def test_an_edited_test_is_put_back_before_the_run(exercise: ex.Exercise, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    stub = ex.make_workspace(exercise, ws)
    (ws / "doubler.py").write_text("def double(n):\n    return 4\n")
    (ws / "doubler_test.py").write_text("def test_nothing():\n    pass\n")
    assert ex.classify(stub, ws, ex.run_tests(exercise, ws), timed_out=False) == "wrong_answer"
    assert (ws / "doubler_test.py").read_text() == TESTS


def test_a_late_client_is_a_timeout_whatever_it_left(exercise: ex.Exercise, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    stub = ex.make_workspace(exercise, ws)
    (ws / "doubler.py").write_text(GOOD)
    assert ex.classify(stub, ws, None, timed_out=True) == "timeout"


def test_sample_is_fixed_by_the_seed(tmp_path: Path) -> None:
    for slug in ("a", "b", "c", "d", "e"):
        make_exercise(tmp_path, slug)
    found = ex.load_exercises(tmp_path)
    assert [e.slug for e in found] == ["a", "b", "c", "d", "e"]
    first = [e.slug for e in sample(found, 3, seed=1)]
    assert first == [e.slug for e in sample(found, 3, seed=1)]
    assert first == sorted(first) and len(first) == 3
    assert sample(found, None, seed=1) == found


def test_table_counts_each_try() -> None:
    records = [
        ex.Record(0, "a", "fusion", ["pass"], 10.0, 100, 10),
        ex.Record(0, "b", "fusion", ["wrong_answer", "pass"], 30.0, 300, 30),
        ex.Record(0, "c", "fusion", ["no_edit", "broken_file"], 20.0, 200, 20),
        ex.Record(0, "a", "aider", ["wrong_answer", "wrong_answer"], 5.0, 50, 5),
    ]
    (fusion, aider) = ex.summarise(records, ["fusion", "aider"])
    assert fusion.pass_1 == [pytest.approx(1 / 3)] and fusion.pass_2 == [pytest.approx(2 / 3)]
    assert fusion.median_wall_s == [20.0] and fusion.total_wall_s == [60.0]
    assert fusion.classes["broken_file"] == 1 and fusion.classes["pass"] == 2
    assert aider.pass_2 == [0.0]
    table = ex.render_table([fusion, aider], {"command": "`x`"})
    assert "| fusion | 3 | 33% | 67% | 20.0 | 60 | 600 | 60 | 0 | 1 | 0 | 0 |" in table
    rows = ex.render_rows(records, ["fusion", "aider"])
    assert "| b | wrong_answer → pass | – |" in rows
