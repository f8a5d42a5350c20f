"""A failing test run's comparisons, read back as "got X, expected Y" for the model."""

from __future__ import annotations

from fusion_tui.agent import checks
from fusion_tui.agent.test_mismatches import MAX_SHOWN, mismatch_digest, mismatches

PYTEST_UNITTEST_STYLE = (
    "..F.F                                                                    [100%]\n"
    "=================================== FAILURES ===================================\n"
    "_____________ SeriesTest.test_rejects_negative_span ______________\n"
    "series_test.py:65: in test_rejects_negative_span\n"
    '    self.assertEqual(err.exception.args[0], "span must not be negative")\n'
    "E   AssertionError: 'span must not exceed string length or be negative'"
    " != 'span must not be negative'\n"
    "E   - span must not exceed string length or be negative\n"
    "E   + span must not be negative\n"
)

PLAIN_ASSERT = """\
_____ test_pairs ______
test_calc.py:4: in test_pairs
    assert largest_product("29", 2) == 18
E   assert 12 == 18
E    +  where 12 = largest_product('29', 2)
"""

UNITTEST_RUNNER = """\
======================================================================
FAIL: test_word (test_words.WordsTest.test_word)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/ws/test_words.py", line 8, in test_word
    self.assertEqual(capitalize("hello  world"), "Hello  World")
AssertionError: 'Hello World' != 'Hello  World'
"""


def test_a_unittest_comparison_under_pytest_names_the_expected_message() -> None:
    assert mismatches(PYTEST_UNITTEST_STYLE) == [
        "test_rejects_negative_span: got 'span must not exceed string length or be negative', "
        "expected 'span must not be negative'\n"
        "    (they first differ at character 14: expected 'be negativ', got 'exceed str')"
    ]


def test_a_plain_assert_takes_the_written_side_as_expected() -> None:
    assert mismatches(PLAIN_ASSERT) == ["test_pairs: got 12, expected 18"]


def test_the_unittest_runners_output_is_read_too() -> None:
    [line] = mismatches(UNITTEST_RUNNER)
    assert line.startswith("test_word: got 'Hello World', expected 'Hello  World'")


def test_a_comparison_whose_sides_cannot_be_told_apart_is_left_out() -> None:
    both_written = PLAIN_ASSERT.replace('largest_product("29", 2) == 18', "f(12) == 18")
    neither = PLAIN_ASSERT.replace('largest_product("29", 2) == 18', "f() == g()")
    cut_statement = PLAIN_ASSERT.replace('assert largest_product("29", 2) == 18', "assert (")
    assert mismatches(both_written) == []
    assert mismatches(neither) == []
    assert mismatches(cut_statement) == []


def test_values_that_are_not_literals_are_left_out() -> None:
    objects = PLAIN_ASSERT.replace("E   assert 12 == 18", "E   assert <Foo at 0x1> == 18")
    assert mismatches(objects) == []


def test_repeats_are_listed_once_and_the_list_is_short() -> None:
    many = "".join(
        PLAIN_ASSERT.replace("test_pairs", f"test_{i}").replace("12", str(100 + i % 9))
        for i in range(20)
    )
    found = mismatches(many)
    assert len(found) == MAX_SHOWN
    assert mismatches(PLAIN_ASSERT * 3) == ["test_pairs: got 12, expected 18"]


def test_the_test_feedback_carries_the_digest_only_when_there_is_one() -> None:
    said = checks.test_feedback("pytest -q", 1, PYTEST_UNITTEST_STYLE, 1)
    assert mismatch_digest(PYTEST_UNITTEST_STYLE) in said
    assert "what the failing tests got and what they expected" in said
    assert "got and what they expected" not in checks.test_feedback("pytest -q", 1, "1 failed", 1)


SPANNING = """\
____________ SaddlePointsTest.test_can_identify_single_saddle_point ____________
saddle_points_test.py:19: in test_can_identify_single_saddle_point
    self.assertEqual(
E   AssertionError: Lists differ: [{'row': 1, 'column': 0}] != [{'row': 2, 'column': 1}]
E
E   First differing element 0:
"""

SADDLE_TEST = """\
import unittest


class SaddlePointsTest(unittest.TestCase):
    def test_can_identify_single_saddle_point(self):
        matrix = [[9, 8, 7], [5, 3, 2], [6, 6, 7]]
        self.assertEqual(
            sorted_points(saddle_points(matrix)),
            sorted_points([{"row": 2, "column": 1}]),
        )
"""


def test_a_statement_over_several_lines_is_read_from_the_test_file() -> None:
    lines = SADDLE_TEST.splitlines()
    at = next(i for i, line in enumerate(lines, 1) if "self.assertEqual(" in line)
    output = SPANNING.replace("saddle_points_test.py:19:", f"saddle_points_test.py:{at}:")
    asked: list[str] = []

    def read(path: str) -> str | None:
        asked.append(path)
        return SADDLE_TEST

    assert mismatches(output) == []  # the first line alone says nothing
    assert mismatches(output, read) == [
        "test_can_identify_single_saddle_point: got [{'row': 1, 'column': 0}], "
        "expected [{'row': 2, 'column': 1}]"
    ]
    assert asked == ["saddle_points_test.py"]
    assert mismatches(output, lambda path: None) == []


def test_each_comparison_is_named_by_its_own_test_even_under_a_short_header() -> None:
    long_name = PLAIN_ASSERT.replace("_____ test_pairs ______", "_ Suite.test_a_long_name _")
    assert mismatches(PLAIN_ASSERT + long_name.replace("12", "13")) == [
        "test_pairs: got 12, expected 18",
        "test_a_long_name: got 13, expected 18",
    ]


def test_a_comparison_whose_header_was_cut_is_named_by_its_test_line() -> None:
    """The feedback shows the end of the output: its first failure can lose its header."""
    cut = PLAIN_ASSERT.replace("_____ test_pairs ______\n", "…rder _\n")
    assert mismatches(cut) == ["test_pairs: got 12, expected 18"]
