"""A long test file shown in part: its setup whole, as many of its tests as fit a budget (the
failing ones first), and the rest by name.

Why: the tests beside the code go into the task's first message, and on two CPU cores every
1,000 tokens of it cost the user about 20 s before the first token. Exercism's beer-song has a
19 kB test file (the whole song, verse by verse): with its 12 kB of instructions the 1.5B's
first request was ~9,000 tokens, about three minutes of a five-minute try, and the model then
answered in words ("I didn't need to change the file"). A few tests say what the code must do
as well as all of them; the test run shows the model every test that fails. Nothing is written
through this view: the tests are the judge, and edits to them are refused.
"""

from __future__ import annotations

import ast
from collections.abc import Collection

TEST_PART_CHARS = 6_000
"""A test file longer than this is shown in part, its tests up to about this size. Of
Exercism's 140 Python exercises 29 have a longer test file (the median is 3,000 characters)."""
MAX_PART = 0.7
"""A part longer than this share of the file is not worth it: the file is shown whole."""
NAMES_SHOWN = 12
"""Tests named at most in one marker line; the rest are counted."""

_Func = ast.FunctionDef | ast.AsyncFunctionDef


def part_of_tests(
    source: str, failing: Collection[str] = (), budget: int = TEST_PART_CHARS
) -> str | None:
    """`source` with only some of its test functions (`test_*`, at the top level or in a
    class): the `failing` ones first, then the others in the file's order, while they fit
    `budget` characters (one at least); each run of the others becomes one comment line that
    names them. None when the file is short, does not parse, or the part would not be much
    shorter."""
    if len(source) <= budget:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    lines = source.split("\n")
    tests = _tests(tree)
    if len(tests) < 2:
        return None
    spans = {id(t): _span(t) for t in tests}
    ordered = [t for t in tests if t.name in failing] + [t for t in tests if t.name not in failing]
    kept: set[int] = set()
    used = len(source) - sum(len("\n".join(lines[a:b])) for a, b in spans.values())
    for test in ordered:
        a, b = spans[id(test)]
        size = len("\n".join(lines[a:b]))
        if kept and used + size > budget:
            continue
        kept.add(id(test))
        used += size
    text = _render(lines, tests, spans, kept)
    return text if len(text) <= MAX_PART * len(source) else None


def _tests(tree: ast.Module) -> list[_Func]:
    """The test functions and methods, in the file's order."""
    found: list[_Func] = []
    for node in tree.body:
        body = node.body if isinstance(node, ast.ClassDef) else [node]
        found += [n for n in body if isinstance(n, _Func) and n.name.startswith("test")]
    return found


def _span(node: _Func) -> tuple[int, int]:
    """The 0-based half-open line range of a function with its decorators."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    return first, node.end_lineno or node.lineno


def _render(
    lines: list[str], tests: list[_Func], spans: dict[int, tuple[int, int]], kept: set[int]
) -> str:
    """The file with each run of tests not `kept` as one marker line (the blank lines between
    the tests of a run go with them)."""
    out: list[str] = []
    pos = 0
    hidden: list[_Func] = []
    for test in tests:
        a, b = spans[id(test)]
        between = lines[pos:a]
        shown = id(test) in kept
        if hidden and (shown or any(line.strip() for line in between)):
            out.append(_marker(" " * hidden[0].col_offset, [t.name for t in hidden]))
            hidden = []
        if not hidden:
            out += between
        if shown:
            out += lines[a:b]
        else:
            hidden.append(test)
        pos = b
    if hidden:
        out.append(_marker(" " * hidden[0].col_offset, [t.name for t in hidden]))
    out += lines[pos:]
    return "\n".join(out)


def _marker(indent: str, names: list[str]) -> str:
    """One comment line for a run of tests left out: the model knows they exist, and the test
    run names any that fail."""
    listed = ", ".join(names[:NAMES_SHOWN]) + (", ..." if len(names) > NAMES_SHOWN else "")
    what = "1 more test" if len(names) == 1 else f"{len(names)} more tests"
    return f"{indent}# ... {what} here, not shown: {listed}"
