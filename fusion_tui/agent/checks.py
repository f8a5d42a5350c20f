"""What the agent checks after its edits: the Python it wrote compiles, and the user's tests pass.

Why in the loop and not left to the model: a small model rarely runs the tests on its own, and
when it does it reads a long log badly. After a step that changed files, the loop compiles every
Python file written (a syntax error is caught before anything runs) and runs the task's test
command; a failure goes back to the model as the next message with the tail of the output, for
up to `test_rounds` rounds (aider's `--auto-test` does the same). What the task ends with then
says whether the tests passed.

Without a test command the agent finds its own (`agent.findTests`), as a careful programmer
would before calling the work done: the Python test files shown with the task (`test_*.py`,
`*_test.py`, under `tests/`), run with pytest when the workspace's `python3` has it, else with
unittest; failing that, the examples in the docstrings of the Python files it wrote (doctest's,
and lines such as `f(2) == 4` or `f(2) ➞ 4`: `example_runner.py`), the specification the user
wrote down. A small model shown the test or the example its code gets wrong fixes it far more
often than one left to judge its own code. Only failed examples (or a run past its time) are
handed back: a file that cannot even be imported there (a package the project's interpreter
lacks) says nothing about the code.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from fusion_tui.agent.example_runner import FOR_OUTPUT, INPUT, OUTPUT, STATED
from fusion_tui.agent.test_mismatches import Reader, mismatch_digest

TAIL_LINES = 60
"""Lines of the test output the model is shown (the end of a failing run says most)."""
TAIL_CHARS = 4000


def syntax_problem(path: str, text: str) -> str | None:
    """A one-line syntax error of a Python file, or None when it compiles."""
    if not path.endswith(".py"):
        return None
    try:
        compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"line {exc.lineno}" if exc.lineno else "somewhere"
        line = (exc.text or "").strip()
        shown = f": {line}" if line else ""
        return f"{path} {where}: {exc.msg}{shown}"
    except ValueError as exc:  # a NUL byte
        return f"{path}: {exc}"
    return None


_EXAMPLE = re.compile(r"^[ \t]*>>> \S", re.M)
EXAMPLE_RUNNER = Path(__file__).with_name("example_runner.py")
"""Run as a script by the workspace's `python3`: it imports nothing of fusion-tui."""
_RUNNER_CALL = f"python3 {shlex.quote(str(EXAMPLE_RUNNER))} "
"""The start of every examples command, before the files it checks."""
EXAMPLES_TIMEOUT_S = 30.0
"""Examples take milliseconds; a run this long is code that loops."""


def with_examples(paths: list[str], files: dict[str, str]) -> list[str]:
    """The Python files among `paths` whose text may hold docstring examples (`>>> ` lines,
    lines that state a call's value, or examples by parameters); the runner itself decides what
    is one."""

    def has_examples(text: str) -> bool:
        return bool(_EXAMPLE.search(text)) or any(map(_stated, text.split("\n")))

    return [p for p in paths if p.endswith(".py") and has_examples(files.get(p, ""))]


def example_lines(text: str) -> list[str]:
    """The lines that make a file's examples, stripped, in file order: each `>>> ` line with the
    line after it (its expected value), each line that states a call's value, and the lines of
    examples by parameters (`Input:`, `Output:`, `For ... the output should be ...`)."""
    lines = [line.strip() for line in text.split("\n")]
    found: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith(">>> "):
            found.append(line)
            if i + 1 < len(lines) and lines[i + 1] and not lines[i + 1].startswith(">>>"):
                found.append(lines[i + 1])
        elif _stated(line) or OUTPUT.match(line):
            found.append(line)
    return found


def _stated(line: str) -> bool:
    """A line that states an example's call or input (an `Output:` line is one only beside
    them, so it alone does not make a file one with examples)."""
    return any(rule.match(line) for rule in (STATED, INPUT, FOR_OUTPUT))


def dropped_examples(old: str, new: str) -> list[str]:
    """The example lines of `old` that `new` no longer holds while keeping others. When the
    examples are the task's checks, such a change is refused: the 1.5B, told an example failed,
    deleted it from the docstring and kept its wrong code. A rewrite without the docstring at
    all drops no example on purpose (the model often gives just the code) and is let through."""
    kept = set(example_lines(new))
    if not kept:
        return []
    return [line for line in example_lines(old) if line not in kept]


_CHANGE_TESTS = re.compile(
    r"\b(?:add|write|update|extend|change|edit|fix|rewrite|rename|remove|delete)\s+"
    r"(?:(?:a|an|the|more|new|some|unit|failing|its|my|our)\s+)*"
    r"(?:tests?\b|[\w/.-]*test[\w/.-]*\.py)",
    re.I,
)


def asks_to_change_tests(task: str) -> bool:
    """Whether the task asks for its tests to change ("add a test to test_calc.py", "fix
    test_io.py"), as opposed to naming them as the judge ("the tests are in acronym_test.py",
    "fix calc.py so the tests pass"): the 1.5B, given the second, rewrote the test file."""
    return bool(_CHANGE_TESTS.search(task))


def is_test_file(path: str) -> bool:
    """A Python file of tests, by the names pytest and unittest users give them."""
    name = path.rsplit("/", 1)[-1]
    is_test = name.startswith("test_") or name.endswith("_test.py") or path.startswith("tests/")
    return name.endswith(".py") and (is_test or "/tests/" in path)


def tests_command(paths: list[str], runner: str) -> str:
    """The command that runs the test files `paths` with `runner` (pytest or unittest).

    pytest runs every test, not up to the first failure: the count of failures is what ranks
    the attempts when none passes (an attempt that fails one test of twenty beats one that fails
    twelve; with `-x` every failing attempt counted one), and the summary's `FAILED` lines show
    the model every test its code gets wrong. Short tracebacks keep several failures within the
    tail the model is shown."""
    files = " ".join(map(shlex.quote, paths))
    if runner == "pytest":
        return f"python3 -m pytest -q --tb=short -p no:cacheprovider {files}"
    return f"python3 -m unittest {files}"


class OwnCheck(NamedTuple):
    """A check the agent found for itself: its tool's name (`run_tests`: the tests shown with
    the task; `run_examples`: the docstring examples), the command, its time limit, and what
    tells a failed run that holds against the code (exit code, output) from one that does not."""

    tool: str
    command: str
    timeout_s: float
    failed: Callable[[int | None, str], bool]


def tests_failed(exit: int | None) -> bool:
    """Whether a run of found tests failed (5: pytest and unittest found no test to run)."""
    return exit not in (0, 5)


MAX_TASK_EXAMPLES = 20
"""The task's examples checked at most (each is a word of the command the user approves)."""
_INLINE_CODE = re.compile(r"`([^`\n]+)`")


def task_examples(task: str) -> list[str]:
    """The examples the task states, as `call == value` (a call of a function by its name on
    literals, and a literal): `assert f(2) == 4` and `f(2) == 4` lines (`->`, `=>`, `➞` read as
    `==`), doctest's `>>> f(2)` with the value on the next line, and such text in backticks
    inside a sentence. The user who writes "use this test: assert f("") == 0" states what the
    code must do; the 1.5B, given one, wrote `sentence_count` wrong, left the test out, and the
    old tests passed. Prose ("f(2) should give 4") is not read: its meaning is not certain."""
    lines = [line.strip() for line in task.split("\n")]
    found: list[str] = []
    for i, line in enumerate(lines):
        candidates = [m.group(1).strip() for m in _INLINE_CODE.finditer(line)]
        if line.startswith(">>> ") and i + 1 < len(lines):
            candidates.append(f"{line[4:].strip()} == {lines[i + 1]}")
        else:
            candidates.append(line)
        for text in candidates:
            example = _as_example(text)
            if example is not None and example not in found:
                found.append(example)
    return found[:MAX_TASK_EXAMPLES]


def _as_example(text: str) -> str | None:
    """`text` as `call == value` when it states a call's value, else None. An assert's
    message (`assert f(2) == 4, "twice"`) is no part of the value."""
    if text.startswith("assert "):
        try:
            node = ast.parse(text).body[0]
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return None
        if not isinstance(node, ast.Assert):
            return None
        text = ast.get_source_segment(text, node.test) or ""
    m = STATED.match(text)
    if m is None:
        return None
    try:
        call = ast.parse(m.group("call"), mode="eval").body
        ast.literal_eval(m.group("value"))
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
            return None
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            ast.literal_eval(arg)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None
    return f"{m.group('call')} == {m.group('value')}"


def examples_command(
    paths: list[str], given: Sequence[str] = (), *, only_given: bool = False
) -> str:
    """The command that runs the examples of `paths` (the workspace's own `python3`), and the
    task's examples `given` (alone with `only_given`: the tests judge the code)."""
    options = [word for example in given for word in ("--given", shlex.quote(example))]
    if only_given:
        options.append("--only-given")
    return _RUNNER_CALL + " ".join([*options, *map(shlex.quote, paths)])


def task_examples_in(command: str) -> str:
    """Whether a check's command runs the task's examples: "only" (after the tests passed),
    "with" (beside the docstring examples), or ""."""
    words = command.split()
    if "--only-given" in words:
        return "only"
    return "with" if "--given" in words else ""


def check_label(command: str) -> str:
    """How a check's command is named on screen: the example runner by what it checks, since its
    install path alone would fill an 80-column line. The approval prompt and `--json` keep the
    command as it runs."""
    if not command.startswith(_RUNNER_CALL):
        return command
    words = iter(shlex.split(command[len(_RUNNER_CALL) :]))
    given, only_given, paths = 0, False, []
    for word in words:
        if word == "--given":
            given += next(words, "") != ""
        elif word == "--only-given":
            only_given = True
        else:
            paths.append(shlex.quote(word))
    files = " ".join(paths)
    task = f"the task's {given} example{'s' if given != 1 else ''}"
    if only_given:
        return f"{task} on {files}"
    return f"docstring examples of {files}" + (f" and {task}" if given else "")


def examples_failed(exit: int | None, output: str) -> bool:
    """Whether the run found a wrong example, ran past its time, or found the file raising while
    it was imported (exit 3), as opposed to a file that needs a module the interpreter lacks
    (exit 2)."""
    return exit is None or exit == 3 or (exit == 1 and "Failed example:" in output)


def examples_feedback(command: str, exit: int | None, output_tail: str, rounds_left: int) -> str:
    """The message that tells the model the examples in its docstrings do not hold."""
    how = {None: "timed out", 3: "could not run: the file raised an error as it was imported"}.get(
        exit, "do not hold"
    )
    more = (
        "The examples are part of the specification: fix the code so that they hold, and give "
        "the corrected file in full."
    )
    if rounds_left <= 0:
        more += " The examples run once more after this fix, for the last time."
    which = {
        "only": "the task gives",
        "with": "the task gives and those in the docstrings",
    }.get(task_examples_in(command), "in the docstrings")
    return (
        f"The examples {which} {how} (`{command}`). The end of the output:\n"
        f"```\n{output_tail}\n```\n{more}"
    )


_SECTION = re.compile(r"^=+ (.+?) =+$")
_FRAME_LINE = re.compile(r"^(>|E |_ _|_{3,}|\S+:\d+: )")
LONG_SOURCE_RUN = 6
"""A frame's source lines beyond this are cut to its first line and the three before the
failing one."""


def condensed(output: str) -> str:
    """pytest's output with each long run of a frame's source cut to the run's first line (the
    `def`) and the three lines before the failing one. Why: pytest's default traceback prints
    the whole function of the frame that raised; when that is library code, the tail the model
    is shown holds 50 lines of it and not the test's own failing line (seen: a `quote` fix
    checked with `shlex.split`, whose `read_token` filled the tail, and the 1.5B gave its
    failing fix back)."""
    out: list[str] = []
    run: list[str] = []
    failures = captured = False

    def flush() -> None:
        first = next((i for i, line in enumerate(run) if line.strip()), 0)
        if len(run) - first > LONG_SOURCE_RUN:
            indent = run[first][: len(run[first]) - len(run[first].lstrip())]
            run[first + 1 : -3] = [f"{indent}..."]
        out.extend(run)
        run.clear()

    for line in output.split("\n"):
        section = _SECTION.match(line)
        if section:
            failures = section.group(1) in ("FAILURES", "ERRORS")
        elif line.startswith("---") and " Captured " in line:
            captured = True  # what the test printed is kept whole
        elif line.startswith("___"):
            captured = False  # the next test's report
        elif failures and not captured and not _FRAME_LINE.match(line) and not line[:1].strip():
            run.append(line)
            continue
        flush()
        out.append(line)
    flush()
    return "\n".join(out)


_LOCATION = re.compile(r"^(\S+\.py):\d+: ")
_SHORT_ENTRY = re.compile(r": in [\w<>]+$")
"""pytest's short traceback entry (its default for the frames between the first and the last):
the location line first (`shlex.py:300: in __next__`), then the source line; a long entry
ends with its location line (`test_q.py:8: `, `shlex.py:191: ValueError`)."""


def _outside(path: str) -> bool:
    """Whether pytest's path of a frame is a file outside the workspace: it gives those
    absolute, or relative when that is shorter (the standard library, an installed package)."""
    return path.startswith(("/", "..")) or "site-packages" in path


def own_frames(output: str) -> str:
    """pytest's output without the traceback frames of files outside the workspace. Why: the
    names in the output choose what a long file shows, and a library's frames name the
    library's functions (a test that checks `quote` with `shlex.split` named `read_token`, and
    the copy of shlex in the workspace was shown with it)."""
    out: list[str] = []
    entry: list[str] = []
    outside = False

    def flush() -> None:
        if not outside:
            out.extend(entry)
        entry.clear()

    for line in output.split("\n"):
        location = _LOCATION.match(line)
        if location and _SHORT_ENTRY.search(line.rstrip()):
            flush()
            outside = _outside(location.group(1))
            entry.append(line)
        elif location:
            entry.append(line)
            outside = _outside(location.group(1))
            flush()
            outside = False
        elif line.startswith(("_ _", "___")) or _SECTION.match(line):
            flush()
            outside = False
            out.append(line)
        else:
            entry.append(line)
    flush()
    return "\n".join(out)


_FAILED_ENTRY = re.compile(r"^(?:FAILED|ERROR) \S*?::(?:\w+::)*(\w+)")
_FAILURE_HEADER = re.compile(r"^_{3,} (?:\w+\.)*(\w+)(?:\[.*\])? _{3,}$")
_UNITTEST_ENTRY = re.compile(r"^(?:FAIL|ERROR): (\w+) \(")


def failing_tests(output: str) -> set[str]:
    """The names of the test functions a pytest or unittest run reports failing (pytest's
    `FAILED path::Class::test_x` summary lines and `___ test_x ___` headers, unittest's
    `FAIL: test_x (...)`); none when it names none (a collection error, a crash)."""
    found = set()
    for line in output.split("\n"):
        for pattern in (_FAILED_ENTRY, _FAILURE_HEADER, _UNITTEST_ENTRY):
            if m := pattern.match(line.rstrip()):
                found.add(m.group(1))
    return {name for name in found if name.startswith("test")}


def tail(text: str, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last `lines` lines of `text`, at most `chars` characters."""
    kept = "\n".join(text.rstrip().split("\n")[-lines:])
    return kept if len(kept) <= chars else "…" + kept[-chars:]


def test_feedback(
    command: str,
    exit: int | None,
    output_tail: str,
    rounds_left: int,
    read: Reader | None = None,
    in_part: bool = False,
) -> str:
    """The message that tells the model its change failed the tests (`exit` None: timed out);
    `read` gives a test file's text, for the digest of what the tests got and expected;
    `in_part`: a file was shown in part, so what is asked for is the functions, not files."""
    how = "timed out" if exit is None else f"failed (exit code {exit})"
    what = "the functions you change" if in_part else "the corrected file(s)"
    more = f"Fix the code so that the tests pass: give {what} in full."
    if rounds_left <= 0:
        more += " The tests run once more after this fix, for the last time."
    digest = mismatch_digest(output_tail, read)
    return (
        f"The tests `{command}` {how}. The end of the output:\n```\n{output_tail}\n```\n"
        f"{digest}{more}"
    )


def syntax_feedback(problems: list[str]) -> str:
    listed = "\n".join(f"- {p}" for p in problems)
    return f"The file(s) you wrote do not compile:\n{listed}\nGive the corrected file(s) in full."
