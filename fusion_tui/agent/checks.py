"""What the agent checks after its edits: the Python it wrote compiles, and the user's tests pass.

Why in the loop and not left to the model: a small model rarely runs the tests on its own, and
when it does it reads a long log badly. After a step that changed files, the loop compiles every
Python file written (a syntax error is caught before anything runs) and runs the task's test
command; a failure goes back to the model as the next message with the tail of the output, for
up to `test_rounds` rounds (aider's `--auto-test` does the same). What the task ends with then
says whether the tests passed.
"""

from __future__ import annotations

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


def tail(text: str, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last `lines` lines of `text`, at most `chars` characters."""
    kept = "\n".join(text.rstrip().split("\n")[-lines:])
    return kept if len(kept) <= chars else "…" + kept[-chars:]


def test_feedback(command: str, exit: int | None, output_tail: str, rounds_left: int) -> str:
    """The message that tells the model its change failed the tests (`exit` None: timed out)."""
    how = "timed out" if exit is None else f"failed (exit code {exit})"
    more = "Fix the code so that the tests pass: give the corrected file(s) in full."
    if rounds_left <= 0:
        more += " The tests run once more after this fix, for the last time."
    return f"The tests `{command}` {how}. The end of the output:\n```\n{output_tail}\n```\n{more}"


def syntax_feedback(problems: list[str]) -> str:
    listed = "\n".join(f"- {p}" for p in problems)
    return f"The file(s) you wrote do not compile:\n{listed}\nGive the corrected file(s) in full."
