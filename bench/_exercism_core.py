"""The pure parts of bench/agent_exercism.py: exercises, workspaces, the two messages, verdicts,
the table.

Nothing here talks to a server, so tests/unit/test_bench_exercism.py checks it in milliseconds.

The protocol is aider's code-editing benchmark (its `benchmark/benchmark.py` and `prompts.py`,
read for the facts, none of its code): an exercise of Exercism's Python track is a folder with
the stub file(s) to change, the unit tests, and `.docs/` with the instructions. Try 1 sends the
instructions (introduction, instructions, appended instructions) and `INSTRUCTIONS_ADDENDUM`; the
tests are run; when they fail, try 2 sends their output followed by `TEST_FAILURES`, in the
same conversation. The tests are put back as they were before every run, so an edited test file
cannot pass the exercise. pass@1 is the share solved by try 1, pass@2 by try 2.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _humaneval_core import kill_group, spread

INSTRUCTIONS_ADDENDUM = """
####

Use the above instructions to modify the supplied files: {file_list}
Don't change the names of existing functions or classes, as they may be referenced from other code like unit tests, etc.
Only use standard libraries, don't suggest installing any packages.
"""  # noqa: E501  (aider's words, line for line)
TEST_FAILURES = """
####

See the testing errors above.
The tests are correct, don't try and change them.
Fix the code in {file_list} to resolve the errors.
"""
ERROR_LINES = 100
"""Lines of the test output sent with try 2 (its head: pytest prints the failures first)."""
TEST_TIMEOUT_S = 60.0
"""An exercise's tests take a second or two; a minute still stops an endless loop."""
DOCS = ("introduction.md", "instructions.md", "instructions.append.md")
CLASSES = ("pass", "no_edit", "broken_file", "wrong_answer", "timeout")
"""`no_edit`: the solution files are as the stub had them; `broken_file`: the tests cannot even
be collected (a syntax or import error, a missing name); `wrong_answer`: some test fails;
`timeout`: the client or the tests ran past their limit."""


@dataclass(frozen=True)
class Exercise:
    slug: str
    folder: Path
    solution: tuple[str, ...]
    tests: tuple[str, ...]

    def instructions(self) -> str:
        docs = self.folder / ".docs"
        parts = [(docs / name).read_text() for name in DOCS if (docs / name).is_file()]
        return "\n\n".join(p.strip() for p in parts)


def load_exercises(root: Path) -> list[Exercise]:
    """Every exercise under `root` (a checkout of exercism/python, or its
    `exercises/practice` folder), in name order."""
    practice = root / "exercises" / "practice" if (root / "exercises").is_dir() else root
    found = []
    for folder in sorted(p for p in practice.iterdir() if (p / ".meta" / "config.json").is_file()):
        files = json.loads((folder / ".meta" / "config.json").read_text())["files"]
        solution = tuple(files["solution"])
        # the tests and what they import (`test_utils.py` is in no config's list)
        beside = sorted(p.name for p in folder.iterdir() if p.is_file()
                        and not p.name.startswith(".") and p.name not in solution)  # fmt: skip
        tests = tuple(dict.fromkeys([*files.get("test", ()), *beside]))
        found.append(Exercise(folder.name, folder, solution, tests))
    return found


def file_list(ex: Exercise) -> str:
    return " ".join(ex.solution)


def first_message(ex: Exercise) -> str:
    return ex.instructions() + "\n" + INSTRUCTIONS_ADDENDUM.format(file_list=file_list(ex))


def second_message(ex: Exercise, test_output: str) -> str:
    head = "\n".join(test_output.splitlines()[:ERROR_LINES])
    return head + "\n" + TEST_FAILURES.format(file_list=file_list(ex))


def make_workspace(ex: Exercise, ws: Path) -> dict[str, str]:
    """The exercise's stub, tests and instructions in `ws` (nothing of `.meta`, which holds the
    example solution); returns the stub texts, to tell an unchanged file."""
    ws.mkdir(parents=True, exist_ok=True)
    for name in (*ex.solution, *ex.tests):
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ex.folder / name, ws / name)
    if (ex.folder / ".docs").is_dir():
        shutil.copytree(ex.folder / ".docs", ws / ".docs", dirs_exist_ok=True)
    return {name: (ws / name).read_text() for name in ex.solution}


def restore_tests(ex: Exercise, ws: Path) -> None:
    for name in ex.tests:
        shutil.copyfile(ex.folder / name, ws / name)


@dataclass
class TestRun:
    code: int | None
    """pytest's exit code; None: the run passed its limit and was killed."""
    output: str = ""


def run_tests(ex: Exercise, ws: Path, timeout_s: float = TEST_TIMEOUT_S) -> TestRun:
    """The exercise's own tests on what the workspace holds, after putting them back."""
    restore_tests(ex, ws)
    main = [t for t in ex.tests if t.endswith("_test.py")] or list(ex.tests)
    argv = [sys.executable, "-m", "pytest", "-q", "--tb=short", "--no-header",
            "-p", "no:cacheprovider", *main]  # fmt: skip
    proc = subprocess.Popen(
        argv, cwd=ws, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, _ = proc.communicate()
        return TestRun(None, out.decode(errors="replace"))
    return TestRun(proc.returncode, out.decode(errors="replace"))


def classify(stub: dict[str, str], ws: Path, test: TestRun | None, timed_out: bool) -> str:
    """The verdict (`CLASSES`) of what a try left in `ws`."""
    if timed_out:
        return "timeout"
    texts = {n: (ws / n).read_text(errors="replace") if (ws / n).is_file() else None for n in stub}
    if texts == stub:
        return "no_edit"
    if test is None or test.code is None:
        return "timeout"
    if test.code == 0:
        return "pass"
    if test.code == 1:
        return "wrong_answer"
    return "broken_file"  # 2: collection errors; 5: no test ran (the names are gone)


# --- summary and table ------------------------------------------------------------------------


@dataclass
class Record:
    run: int
    exercise: str
    client: str
    verdicts: list[str]
    """One per try made (a try 2 only after a failed try 1)."""
    wall_s: float
    """Both tries together, the tests' runs not included."""
    prompt_tokens: int
    predicted_tokens: int
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def final(self) -> str:
        return self.verdicts[-1]


@dataclass
class Summary:
    client: str
    exercises: int
    pass_1: list[float]
    pass_2: list[float]
    median_wall_s: list[float]
    total_wall_s: list[float]
    prompt_tokens: list[int]
    predicted_tokens: list[int]
    classes: dict[str, int]
    """Final verdicts, counted over every run."""


def summarise(records: Iterable[Record], clients: Sequence[str]) -> list[Summary]:
    by: dict[str, dict[int, list[Record]]] = {c: {} for c in clients}
    for rec in records:
        by.setdefault(rec.client, {}).setdefault(rec.run, []).append(rec)
    out = []
    for client in clients:
        runs = [by[client][r] for r in sorted(by[client])]
        classes = dict.fromkeys(CLASSES, 0)
        for rs in runs:
            for rec in rs:
                classes[rec.final] = classes.get(rec.final, 0) + 1
        out.append(
            Summary(
                client,
                max((len(rs) for rs in runs), default=0),
                [sum(r.verdicts[0] == "pass" for r in rs) / len(rs) for rs in runs],
                [sum(r.final == "pass" for r in rs) / len(rs) for rs in runs],
                [statistics.median(r.wall_s for r in rs) for rs in runs],
                [sum(r.wall_s for r in rs) for rs in runs],
                [sum(r.prompt_tokens for r in rs) for rs in runs],
                [sum(r.predicted_tokens for r in rs) for rs in runs],
                classes,
            )
        )
    return out


def render_table(summaries: Sequence[Summary], header: dict[str, str]) -> str:
    lines = [f"- {key}: {value}" for key, value in header.items()]
    lines += [
        "",
        "| client | exercises | pass@1 | pass@2 | median s/exercise | total s | prompt tokens "
        "| predicted tokens | no edit | broken file | wrong answer | timeout |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for s in summaries:
        c = s.classes
        lines.append(
            f"| {s.client} | {s.exercises} | {spread(s.pass_1, '.0%')} "
            f"| {spread(s.pass_2, '.0%')} | {spread(s.median_wall_s, '.1f')} "
            f"| {spread(s.total_wall_s, '.0f')} | {spread(s.prompt_tokens, ',.0f')} "
            f"| {spread(s.predicted_tokens, ',.0f')} | {c.get('no_edit', 0)} "
            f"| {c.get('broken_file', 0)} | {c.get('wrong_answer', 0)} | {c.get('timeout', 0)} |"
        )
    runs = max((len(s.pass_1) for s in summaries), default=0)
    if runs > 1:
        lines.append(f"\nMedians of {runs} runs (min–max); failure counts are over all runs.")
    lines.append("\nFailure counts are of the final try.")
    return "\n".join(lines)


def render_rows(records: Sequence[Record], clients: Sequence[str]) -> str:
    """One line per exercise: each client's verdicts, try by try."""
    names = sorted({r.exercise for r in records})
    lines = ["| exercise | " + " | ".join(clients) + " |", "|---|" + "---|" * len(clients)]
    for name in names:
        cells = []
        for client in clients:
            got = [r for r in records if r.exercise == name and r.client == client]
            cells.append(", ".join(" → ".join(r.verdicts) for r in got) or "–")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
