"""What a failing test run got and expected, read from its output in a few short lines.

pytest and unittest print a failed comparison as `AssertionError: 'a' != 'b'` or `assert 'a' ==
'b'`, under the test's source line and above a diff that marks characters with `?`, `-` and `+`.
The 1.5B coder, shown three such failures for exception messages on Exercism's
largest-series-product, gave its failing code back word for word: which side was its own value
is not said anywhere in that output. Here each failed comparison of two literals becomes one
line, "got X, expected Y": the expected side is the one whose value is written in the test's
source line shown above it (a comparison whose sides cannot be told apart is left out), and two
strings also say where they first differ.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from fusion_tui.agent.example_runner import first_difference

MAX_SHOWN = 6
"""Comparisons listed at most: a few distinct ones say what is wrong; more repeat it."""

_UNITTEST = re.compile(r"^(?:E\s+)?AssertionError: (?P<left>.+) != (?P<right>.+)$")
_PYTEST = re.compile(r"^E\s+(?:AssertionError: )?assert (?P<left>.+) == (?P<right>.+)$")
_TEST_HEADER = re.compile(r"^_{3,} (?:\S+\.)?(?P<name>test\w*) _{3,}$")
"""pytest's header over one failure: `____ ClassTest.test_name ____`."""
_UNITTEST_HEADER = re.compile(r"^FAIL: (?P<name>test\w*) ")


def literal(text: str) -> tuple[bool, Any]:
    """(whether `text` is a Python literal, its value)."""
    try:
        return True, ast.literal_eval(text.strip())
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return False, None


def written_values(line: str) -> list[Any]:
    """The literal values written in a source line (a call's arguments, an assert's sides);
    [] when the line is not a whole statement (the first line of a call that goes on)."""
    try:
        tree = ast.parse(line.strip())
    except SyntaxError:
        return []
    values: list[Any] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant | ast.List | ast.Tuple | ast.Dict | ast.Set):
            ok, value = literal(ast.unparse(node))
            if ok:
                values.append(value)
    return values


def source_line(lines: list[str], at: int) -> str:
    """The test's source line shown above the `E` line at `at`: the nearest line above that
    is not an `E` line, a blank or the `?`/`-`/`+` marks of a diff."""
    for line in reversed(lines[:at]):
        stripped = line.strip()
        if stripped and not re.match(r"E\s|[?+-]\s", stripped) and stripped != "E":
            return stripped
    return ""


def mismatches(output: str) -> list[str]:
    """One line per failed comparison whose expected side can be told: "name: got X, expected
    Y" (at most `MAX_SHOWN`, repeats left out)."""
    lines = output.splitlines()
    found: list[str] = []
    seen: set[str] = set()
    name = ""
    for i, line in enumerate(lines):
        header = _TEST_HEADER.match(line.strip()) or _UNITTEST_HEADER.match(line.strip())
        if header:
            name = header.group("name")
            continue
        m = _UNITTEST.match(line.strip()) or _PYTEST.match(line.strip())
        if m is None:
            continue
        (ok_l, left), (ok_r, right) = literal(m.group("left")), literal(m.group("right"))
        if not (ok_l and ok_r) or left == right:
            continue
        written = written_values(source_line(lines, i))
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


def mismatch_digest(output: str) -> str:
    """The failed comparisons as a short list for the model ("" when none can be told)."""
    found = mismatches(output)
    if not found:
        return ""
    listed = "\n".join(f"- {f}" for f in found)
    return f"In short, what the failing tests got and what they expected:\n{listed}\n"
