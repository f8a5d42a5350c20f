"""Provides `TaskChecks`: what one task's edits are checked against, the runs, and the verdict.

The rules of what counts as a check live in `checks.py` (the commands, what a failed run looks
like, the feedback); this object holds one task's side of them: the test command found with the
task, the files whose docstrings hold examples, the examples the task states, the last run and
the files as it saw them. The step loop asks it to check a step's writes, whether a write to a
test file is refused, and at the end what vouches for the change or why the checks still fail.
Every run goes through the user's approval gate, as any command does.
"""

from __future__ import annotations

import re

from fusion_tui.agent.approval import ApprovalRequest, command_prefix
from fusion_tui.agent.chat_files import named_in
from fusion_tui.agent.checks import (
    EXAMPLES_TIMEOUT_S,
    OwnCheck,
    asks_to_change_tests,
    condensed,
    examples_command,
    examples_failed,
    examples_feedback,
    is_test_file,
    syntax_feedback,
    syntax_problem,
    tail,
    task_examples,
    task_examples_in,
    test_feedback,
    tests_command,
    tests_failed,
    with_examples,
)
from fusion_tui.agent.events import Outcome, TestRan
from fusion_tui.agent.task import AgentConfig, TaskFiles, TaskScope
from fusion_tui.agent.tools import ToolContext
from fusion_tui.agent.tools.files import read_text
from fusion_tui.agent.tools.shell import execute
from fusion_tui.agent.tools.workspace import ToolError

PROSE_SUFFIXES = (".md", ".txt", ".rst")
"""Files whose change no check could vouch for: the end line says nothing of tests for them."""


class TaskChecks:
    """One task's checks. `files` and `changed` are the run's own (the files in the chat, path
    → text; the files the task changed, in order), read as they are at each check."""

    def __init__(
        self,
        task: str,
        config: AgentConfig,
        ctx: ToolContext,
        files: TaskFiles,
        scope: TaskScope,
    ) -> None:
        self.task, self.cfg, self.ctx, self.files = task, config, ctx, files
        self.emit, self.clock, self.step = scope.emit, scope.clock, scope.step
        self.found_tests: str | None = None
        """The command of the test files shown with the task, when the user gave none."""
        self.specified: set[str] = set()
        """Files shown with the task whose docstrings held examples: a rewrite that drops them
        is still run (HumanEval/129: the 1.5B's rewrite without the docstring left no example,
        nothing ran it, and its module-level `print(minPath(...))` raised at import)."""
        self.given = task_examples(task) if config.find_tests else []
        """The examples the task states (`f(2) == 4`): checked with the tests, or alone."""
        self.last_test: TestRan | None = None
        self.tested: dict[str, str] = {}
        """The files in the chat as the last checks (`last_test`) saw them."""

    async def prepare(self, shown: dict[str, str]) -> None:
        """The files shown with the task decide the checks found for it."""
        self.specified = set(with_examples(list(shown), shown))
        self.found_tests = await self.find_tests(list(shown))

    @property
    def has_tests(self) -> bool:
        """A test command, given or found: the tests judge the change."""
        return bool(self.cfg.test_cmd or self.found_tests)

    def passed(self) -> bool:
        """The last checks passed: the task is done, whatever else the reply tried (a refused
        write to a test file needs no answer)."""
        return self.last_test is not None and self.last_test.ok

    def failed(self) -> bool:
        """The last checks ran and failed."""
        return self.last_test is not None and not self.last_test.ok

    def on_files_as_left(self) -> bool:
        """The last checks ran on the files as they are now."""
        return self.last_test is not None and self.tested == self.files.texts

    def failed_output(self) -> str:
        run = self.last_test
        return run.tail if run is not None and not run.ok else ""

    def guards(self, path: str) -> bool:
        """Whether a write to `path` is refused: with a test command, an existing test file
        (`test_*.py`, `*_test.py`, or under a `tests/` folder), unless the task names it and
        asks for tests to change. A small model told its tests fail will otherwise delete the
        failing assertions."""
        if not self.has_tests or path not in self.files.known:
            return False
        if not is_test_file(path):
            return False
        named = path in named_in(self.task, sorted(self.files.known))
        return not (named and asks_to_change_tests(self.task))

    def examples_judge(self) -> bool:
        """Whether the docstring examples are this task's checks: no test command given or
        found, and `agent.findTests` on."""
        return self.cfg.find_tests and not self.has_tests

    async def check(self, wrote: list[str], round_: int, rounds_left: int) -> str | None:
        """A step's files checked: None when they compile and the checks pass (the user's test
        command, else the tests the task found; then the task's examples), else what to tell
        the model."""
        problems = [p for p in (syntax_problem(f, self.files.texts.get(f, "")) for f in wrote) if p]
        if problems:
            return syntax_feedback(problems)
        if self.cfg.test_cmd:
            tests = await self.run_tests(round_)
            if not tests.ok:
                return test_feedback(
                    tests.command, tests.exit, tests.tail, rounds_left, self.test_text,
                    bool(self.files.views),
                )  # fmt: skip
            return await self.check_given(round_, rounds_left)
        own = self.own_check()
        if own is None:
            return None
        ran = await self.run_own(own, round_)
        if ran is None:
            return None
        run, failed = ran
        if own.tool == "run_examples":
            if not failed:
                return None
            return examples_feedback(run.command, run.exit, run.tail, rounds_left)
        if failed:
            return test_feedback(run.command, run.exit, run.tail, rounds_left, self.test_text,
                                 bool(self.files.views))  # fmt: skip
        return await self.check_given(round_, rounds_left)

    def test_text(self, path: str) -> str | None:
        """A test file's text, as the test runner named it (for the feedback's digest)."""
        try:
            text, _size, truncated = read_text(self.ctx, path)
        except (ToolError, OSError):
            return None
        return None if truncated else text

    async def check_given(self, round_: int, rounds_left: int) -> str | None:
        """The task's examples, checked once the tests pass: the tests may not cover what the
        task asked for (a new function), its examples do."""
        paths = self.given_paths()
        if not (self.given and paths):
            return None
        command = examples_command(paths, self.given, only_given=True)
        check = OwnCheck("run_examples", command, EXAMPLES_TIMEOUT_S, examples_failed)
        ran = await self.run_own(check, round_)
        if ran is None or not ran[1]:
            return None
        run = ran[0]
        return examples_feedback(run.command, run.exit, run.tail, rounds_left)

    def given_paths(self) -> list[str]:
        """The Python files the task's examples run against: those it changed (tests aside),
        then any file in the chat that defines a function an example calls and no changed file
        does (the fix may be in a helper the function calls)."""
        paths = [p for p in self.files.changed if p.endswith(".py") and not is_test_file(p)]
        if not paths:
            return []
        for name in dict.fromkeys(example.split("(", 1)[0] for example in self.given):
            defines = re.compile(rf"^def {re.escape(name)}\s*\(", re.M)
            if any(defines.search(self.files.texts.get(p, "")) for p in paths):
                continue
            owner = next(
                (p for p, text in self.files.texts.items()
                 if p.endswith(".py") and not is_test_file(p) and defines.search(text)),
                None,
            )  # fmt: skip
            if owner is not None and owner not in paths:
                paths.append(owner)
        return paths

    def own_check(self) -> OwnCheck | None:
        """The check the agent found for itself, when there is no test command: the tests shown
        with the task, else the docstring examples of the files changed (or named by the task)
        with the task's examples; None when there is nothing to run."""
        if self.found_tests:
            return OwnCheck("run_tests", self.found_tests, self.cfg.test_timeout_s,
                            lambda exit, _out: tests_failed(exit))  # fmt: skip
        examples = set(with_examples(self.files.changed, self.files.texts))
        paths = [p for p in self.files.changed if p in examples or p in self.specified]
        if self.given:
            paths += [p for p in self.given_paths() if p not in paths]
        if not self.cfg.find_tests or not paths:
            return None
        return OwnCheck("run_examples", examples_command(paths, self.given), EXAMPLES_TIMEOUT_S,
                        examples_failed)  # fmt: skip

    async def find_tests(self, shown: list[str]) -> str | None:
        """The command for the test files shown with the task, by the runner the workspace's
        `python3` has (pytest, else unittest); None without any, or with `agent.findTests` off."""
        tests = [p for p in shown if is_test_file(p)]
        if self.cfg.test_cmd or not self.cfg.find_tests or not tests:
            return None
        has_pytest = await execute(self.ctx, "python3 -c 'import pytest'", EXAMPLES_TIMEOUT_S)
        return tests_command(tests, "pytest" if has_pytest.ok else "unittest")

    async def run_own(self, check: OwnCheck, round_: int) -> tuple[TestRan, bool] | None:
        """A check the agent found for itself, run as the user allows any command: the run, and
        whether `check.failed` finds in it a verdict against the code; None when it was not
        allowed. A run that says nothing of the code (a file that cannot be imported, no test
        found) is shown as it ended but neither handed back nor held against the task."""
        words = 2 if check.tool == "run_examples" else 3  # python3 RUNNER; python3 -m pytest
        command = check.command
        request = ApprovalRequest(
            "shell", check.tool, command, detail=command, prefix=command_prefix(command, words)
        )
        if not await self.ctx.gate.check(request):
            return None
        t0 = self.clock.now()
        done = await execute(self.ctx, command, check.timeout_s)
        shown = tail(condensed(done.output))
        run = TestRan(self.step(), command, done.ok, done.exit, shown, round_,
                      (self.clock.now() - t0) * 1000)  # fmt: skip
        self.emit(run)
        bad = check.failed(done.exit, done.output)
        if done.ok or bad:  # a verdict on the code, either way
            self.last_test, self.tested = run, dict(self.files.texts)
        return run, bad

    async def run_tests(self, round_: int) -> TestRan:
        """Run the task's test command once (round 0: before any change)."""
        command = self.cfg.test_cmd or ""
        t0 = self.clock.now()
        done = await execute(self.ctx, command, self.cfg.test_timeout_s)
        shown = tail(condensed(done.output))
        run = TestRan(self.step(), command, done.ok, done.exit, shown, round_,
                      (self.clock.now() - t0) * 1000)  # fmt: skip
        if round_ > 0:
            self.last_test, self.tested = run, dict(self.files.texts)
        self.emit(run)
        return run

    def vouch(self, outcome: Outcome) -> str:
        """What vouches for a completed change, for the end line: "tests pass", "docstring
        examples pass" (either with the task's examples), or "not tested" when no check ran on
        the files as they were left (a completed change is otherwise read as a tested one); ""
        for other outcomes, and for a change to prose files only."""
        if outcome != "completed" or not self.files.changed:
            return ""
        if all(p.endswith(PROSE_SUFFIXES) for p in self.files.changed):
            return ""
        run = self.last_test
        if run is None or not run.ok or self.tested != self.files.texts:
            return "not tested"
        if task_examples_in(run.command):
            return (
                "tests and the task's examples pass"
                if self.has_tests
                else "the task's examples pass"
            )
        return "tests pass" if self.has_tests else "docstring examples pass"

    def failed_reason(self, attempts: int, rounds: int) -> str:
        """Why the checks still fail: what failed, how, after how many attempts (more than one)
        or rounds of fixes."""
        run = self.last_test
        code = "timed out" if run is None or run.exit is None else f"exit code {run.exit}"
        what = "the tests still fail" if self.has_tests else "the docstring examples still fail"
        given = task_examples_in(run.command) if run is not None else ""
        if given:
            what = (
                "the task's examples still fail" if given == "only" else "the examples still fail"
            )
        if attempts > 1:
            return f"{what} ({code}) after {attempts} attempts"
        return f"{what} ({code}) after {rounds} round(s) of fixes"
