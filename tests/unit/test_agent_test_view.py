"""A long test file shown in part: its setup, some tests in full (the failing first), the rest
by name; and the task's first message showing it so."""

from __future__ import annotations

import ast

from fusion_tui.agent.chat_files import choose, file_block
from fusion_tui.agent.test_view import part_of_tests

HEAD = "import unittest\n\nfrom song import recite\n\n\nclass SongTest(unittest.TestCase):\n"


def a_test(name: str, lines: int) -> str:
    body = "".join(f"            'verse line {i} of {name}',\n" for i in range(lines))
    return (
        f"    def {name}(self):\n        expected = [\n{body}        ]\n"
        f"        self.assertEqual(recite({name!r}), expected)\n"
    )


SIZES = [("test_one", 3), ("test_all", 300), ("test_two", 3), ("test_three", 200), ("test_four", 3)]
SOURCE = (
    HEAD
    + "\n".join(a_test(n, k) for n, k in SIZES)
    + "\n\nif __name__ == '__main__':\n    unittest.main()\n"
)


def test_the_tests_that_fit_are_shown_and_the_rest_named_where_they_stand() -> None:
    part = part_of_tests(SOURCE, budget=2_000)
    assert part is not None and len(part) < 0.3 * len(SOURCE)
    assert part.startswith(HEAD)  # the imports and the class line stay
    for name in ("test_one", "test_two", "test_four"):
        assert a_test(name, 3) in part
    assert "    # ... 1 more test here, not shown: test_all\n" in part
    assert "    # ... 1 more test here, not shown: test_three\n" in part
    assert part.endswith("\n\nif __name__ == '__main__':\n    unittest.main()\n")
    ast.parse(part)  # still reads as Python


def test_failing_tests_come_first_and_a_run_of_hidden_tests_is_one_line() -> None:
    part = part_of_tests(SOURCE, failing={"test_three"}, budget=9_000)
    assert part is not None and a_test("test_three", 200) in part
    assert "test_all" in part and "verse line 0 of test_all" not in part
    many = HEAD + "\n".join(a_test(f"test_{i}", 40) for i in range(20))
    part = part_of_tests(many, failing={"test_15"}, budget=4_000)
    assert part is not None and a_test("test_15", 40) in part and a_test("test_0", 40) in part
    assert part.count("# ...") == 2
    assert "# ... 14 more tests here, not shown: test_1, test_2," in part
    assert "test_12, ..." in part  # twelve names at most


def test_short_unparsable_or_barely_shorter_files_are_shown_whole() -> None:
    assert part_of_tests(SOURCE, budget=len(SOURCE)) is None
    assert part_of_tests("def test_x(:\n" * 1000, budget=100) is None
    even = HEAD + "\n".join(a_test(f"test_{i}", 10) for i in range(10))
    assert part_of_tests(even, budget=int(len(even) * 0.9)) is None


def test_the_first_message_shows_a_long_test_file_in_part() -> None:
    texts = {"song.py": "def recite(start, take=1):\n    pass\n", "song_test.py": SOURCE}
    chat = choose("make the tests pass", list(texts), texts.__getitem__, 100_000, set())
    assert chat.shown == texts  # the task knows the whole file
    rendered = chat.render()
    assert "# ... 1 more test here, not shown: test_all" in rendered
    assert file_block("song_test.py", chat.test_parts["song_test.py"]) in rendered
    assert len(rendered) < 0.5 * len(SOURCE)
    assert chat.without(["song.py"]).test_parts == chat.test_parts
