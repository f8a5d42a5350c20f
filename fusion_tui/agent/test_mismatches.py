"""What a failing test run got and expected, read from its output in a few short lines.

pytest and unittest print a failed comparison as `AssertionError: 'a' != 'b'` or `assert 'a' ==
'b'`, under the test's source line and above a diff that marks characters with `?`, `-` and `+`.
The 1.5B coder, shown three such failures for exception messages on Exercism's
largest-series-product, gave its failing code back word for word: which side was its own value
is not said anywhere in that output. Here each failed comparison of two literals becomes one
line, "got X, expected Y": the expected side is the one whose value is written in the test's
source line shown above it (a comparison whose sides cannot be told apart is left out), and two
strings also say where they first differ. A statement that spans lines (`self.assertEqual(` and
its arguments below) is read whole from the test file, when the runner named the file and line.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

from fusion_tui.agent.example_runner import first_difference

MAX_SHOWN = 6
"""Comparisons listed at most: a few distinct ones say what is wrong; more repeat it."""

_UNITTEST = re.compile(r"^(?:E\s+)?AssertionError: (?:\w+ differ: )?(?P<left>.+) != (?P<right>.+)$")
"""unittest's `'a' != 'b'`, and `Lists differ: [1] != [2]` for containers."""
_PYTEST = re.compile(r"^E\s+(?:AssertionError: )?assert (?P<left>.+) == (?P<right>.+)$")
_TEST_HEADER = re.compile(r"^_+ (?:\S+\.)?(?P<name>test\w*) _+$")
"""pytest's header over one failure: `____ ClassTest.test_name ____` (one `_` a side for a long
name)."""
_UNITTEST_HEADER = re.compile(r"^FAIL: (?P<name>test\w*) ")
_PLACE = re.compile(r"^(?P<path>[\w./-]+\.py):(?P<line>\d+): in (?P<name>test\w*)$")
"""pytest's `--tb=short` line over the source line: `saddle_points_test.py:19: in test_x`."""
_UNITTEST_PLACE = re.compile(
    r'^File "(?P<path>[^"]+\.py)", line (?P<line>\d+), in (?P<name>test\w*)$'
)

Reader = Callable[[str], str | None]
"""A test file's text by the path the runner printed; None when it cannot be read."""


def literal(text: str) -> tuple[bool, Any]:
    """(whether `text` is a Python literal, its value)."""
    try:
        return True, ast.literal_eval(text.strip())
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return False, None


def written_values(source: str) -> list[Any]:
    """The literal values written in a statement (a call's arguments, an assert's sides);
    [] when it is not a whole statement (the first line of a call that goes on)."""
    try:
        tree = ast.parse(source.strip())
    except SyntaxError:
        return []
    values: list[Any] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant | ast.List | ast.Tuple | ast.Dict | ast.Set):
            try:
                values.append(ast.literal_eval(node))
            except (ValueError, TypeError, MemoryError, RecursionError):
                continue  # a container with names in it
    return values


def statement_at(text: str, line: int) -> str:
    """The source of the innermost statement of `text` that starts at `line`; "" when none."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return ""
    found = ""
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno == line and not hasattr(node, "body"):
            found = ast.get_source_segment(text, node) or ""
    return found


def failing_statement(lines: list[str], at: int, read: Reader | None) -> str:
    """The test's statement that failed for the `E` line at `at`: the source line above it, or,
    when that line does not parse alone, the statement read from the test file at the place
    the runner printed."""
    shown = source_line(lines, at)
    if not read or _parses(shown):
        return shown
    for line in reversed(lines[:at]):
        place = _PLACE.match(line.strip()) or _UNITTEST_PLACE.match(line.strip())
        if place:
            text = read(place.group("path"))
            return statement_at(text, int(place.group("line"))) if text else shown
    return shown


def _parses(source: str) -> bool:
    try:
        ast.parse(source.strip())
    except SyntaxError:
        return False
    return True


def source_line(lines: list[str], at: int) -> str:
    """The test's source line shown above the `E` line at `at`: the nearest line above that
    is not an `E` line, a blank or the `?`/`-`/`+` marks of a diff."""
    for line in reversed(lines[:at]):
        stripped = line.strip()
        if stripped and not re.match(r"E\s|[?+-]\s", stripped) and stripped != "E":
            return stripped
    return ""


def mismatches(output: str, read: Reader | None = None) -> list[str]:
    """One line per failed comparison whose expected side can be told: "name: got X, expected
    Y" (at most `MAX_SHOWN`, repeats left out). `read` gives a test file's text, for a
    statement that spans lines."""
    lines = output.splitlines()
    found: list[str] = []
    seen: set[str] = set()
    name = ""
    for i, line in enumerate(lines):
        header = _TEST_HEADER.match(line.strip()) or _UNITTEST_HEADER.match(line.strip())
        if not name and not header:  # the first failure's header can be cut from the tail
            header = _PLACE.match(line.strip()) or _UNITTEST_PLACE.match(line.strip())
        if header:
            name = header.group("name")
            continue
        m = _UNITTEST.match(line.strip()) or _PYTEST.match(line.strip())
        if m is None:
            continue
        (ok_l, left), (ok_r, right) = literal(m.group("left")), literal(m.group("right"))
        if not (ok_l and ok_r) or left == right:
            continue
        written = written_values(failing_statement(lines, i, read))
        left_written, right_written = left in written, right in written
        if left_written == right_written:
            continue
        expected, got = (left, right) if left_written else (right, left)
        shown = f"got {got!r}, expected {expected!r}{first_difference(expected, got)}"
        if shown in seen:
            continue
        seen.add(shown)
        found.append(f"{name}: {shown}" if name else shown)
        if len(found) >= MAX_SHOWN:
            break
    return found


def mismatch_digest(output: str, read: Reader | None = None) -> str:
    """The failed comparisons as a short list for the model ("" when none can be told)."""
    found = mismatches(output, read)
    if not found:
        return ""
    listed = "\n".join(f"- {f}" for f in found)
    return f"In short, what the failing tests got and what they expected:\n{listed}\n"
