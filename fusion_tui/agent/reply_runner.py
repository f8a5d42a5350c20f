"""Running what one reply says: its edits written to the workspace, then its tool calls.

A reply's code blocks are resolved to a file (`edits.py`) and written, unless writing would
harm the checks (a test file, a docstring example dropped) or change nothing; its `<tool_call>`s
run under the loop guard (`loop_guard.py`), which refuses a call or a whole reply repeated with
nothing changed since. What happened goes back as notes for the model's next message. The step
loop (`loop.py`) decides what follows: the checks, a retry, an ending.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

from fusion_tui.agent.checks import dropped_examples, is_test_file
from fusion_tui.agent.deadline import run_guarded
from fusion_tui.agent.delegate import DelegatePolicy, SubTaskRunner, run_delegate
from fusion_tui.agent.edits import (
    EditRefused,
    code_beside_tests,
    resolve,
    same_code,
    top_names,
    without_usage_examples,
)
from fusion_tui.agent.events import (
    WHOLE_REPLY,
    FileChanged,
    Outcome,
    RepeatBlocked,
    ToolFinished,
    ToolStarted,
)
from fusion_tui.agent.loop_guard import LoopGuard
from fusion_tui.agent.prompt import observation
from fusion_tui.agent.protocol import Action, StepInvalid, ToolSpec, validate_args
from fusion_tui.agent.reply import FileBlock, Reply, SearchReplace, ToolCall
from fusion_tui.agent.task import TaskFiles, TaskScope
from fusion_tui.agent.task_checks import TaskChecks
from fusion_tui.agent.tools import Runner, ToolContext, ToolResult
from fusion_tui.agent.tools.files import put_back_file, read_text, remove_created_file
from fusion_tui.agent.tools.registry import RUNNERS
from fusion_tui.agent.tools.workspace import ToolError


class TaskStop(Exception):
    """Ends the task from inside a step: `outcome`, with `reason`."""

    def __init__(self, outcome: Outcome, reason: str) -> None:
        super().__init__(reason)
        self.outcome, self.reason = outcome, reason


class ReplyBlocked(Exception):
    """A repeated call was refused; the message goes to the model instead of any result."""


def given_back(old: str | None, new: str) -> bool:
    """Whether `new` is the file `old` given back as it is: blank lines at its ends are no
    change (seen: the 1.5B's copy of a stub without the stub's opening blank line was written
    as a change, so the checks ran on the stub and the task could not start over)."""
    return old is not None and old.strip() == new.strip()


class ReplyRunner:
    """Runs a reply's edits and calls in one task's workspace, and keeps what the task knows of
    its files up to date (`TaskFiles`, shared with the task's checks).

    `before_write(path, old)` is told of every write first, so an attempt can be undone
    (`Retries.writing`)."""

    def __init__(
        self,
        task: str,
        ctx: ToolContext,
        tools: tuple[ToolSpec, ...],
        checks: TaskChecks,
        files: TaskFiles,
        scope: TaskScope,
        before_write: Callable[[str, str | None], None],
        sub_tasks: SubTaskRunner,
        delegate: DelegatePolicy | None,
    ) -> None:
        self.task, self.ctx, self.tools, self.checks = task, ctx, tools, checks
        self.files = files
        self.emit, self.clock, self.cancel, self.step = (
            scope.emit, scope.clock, scope.cancel, scope.step
        )  # fmt: skip
        self.before_write, self.sub_tasks, self.delegate = before_write, sub_tasks, delegate
        self.guard = LoopGuard()
        self.unchanged = 0
        """Edits of the reply being run that gave a file back exactly as it was."""

    async def run(self, parsed: Reply, text: str) -> tuple[list[str], list[str], bool]:
        """Run a reply (`text`, read as `parsed`): (paths changed, what to tell the model,
        whether anything besides the writes needs the model's attention). The same edits given
        again word for word, with nothing changed since, are refused like a repeated call.
        Raises `ReplyBlocked` for a refused repeat, `TaskStop` to end the task."""
        key = {"sha256": hashlib.sha256(text.strip().encode()).hexdigest()[:16]}
        verdict = self.guard.check(WHOLE_REPLY, key) if parsed.edits else "run"
        if verdict != "run":  # the same edits again: refused again, or changing nothing
            self.blocked(WHOLE_REPLY, key, verdict)
        wrote, notes, open_ends = await self.run_items(parsed)
        if parsed.edits:
            self.guard.record(WHOLE_REPLY, key, True, notes[0] if notes else "")
        return wrote, notes, open_ends

    def read(self, path: str) -> str:
        text, _size, truncated = read_text(self.ctx, path)
        if truncated:
            raise ToolError(f"{path} is too large to show whole")
        return text

    def old_text(self, path: str) -> str | None:
        try:
            return self.read(path)
        except ToolError as exc:
            if "does not exist" in str(exc):
                return None
            raise

    async def run_tool(self, action: Action, runner: Runner | None = None) -> ToolResult | None:
        """Run a tool under the user's cancel; its commands get no more than the time left to the
        ceiling (`ToolContext.time_left`), file tools finish on their own. `runner`, when
        given, runs instead of the named tool's own (an undo the agent makes, not the model)."""
        self.emit(ToolStarted(self.step(), action.tool, action.args))
        t0 = self.clock.now()

        async def call() -> ToolResult:
            try:
                if runner is not None:
                    return await runner(self.ctx, action.args)
                if action.tool == "delegate":
                    if self.delegate is None:
                        return ToolResult(False, "delegate is not offered on this server")
                    return await run_delegate(self.sub_tasks, self.delegate, action.args)
                return await RUNNERS[action.tool](self.ctx, action.args)
            except ToolError as exc:
                return ToolResult(False, str(exc))
            except OSError as exc:
                return ToolResult(False, f"{action.tool} failed: {exc.strerror or exc}")

        guarded = await run_guarded(call, clock=self.clock, deadline=None, cancel=self.cancel)
        result = guarded.value
        if result is None:
            result = ToolResult(False, "cancelled by the user")
        self.emit(
            ToolFinished(
                self.step(), action.tool, action.args, result.ok, result.text,
                (self.clock.now() - t0) * 1000, result.detail,
            )
        )  # fmt: skip
        return None if guarded.ended == "cancelled" else result

    def tested_files(self, tests: str) -> str:
        """ ", in full: x.py" for the workspace's modules a test file imports (the 1.5B, refused a
        rewrite of transpose_test.py, rewrote it again and again: it is told which file to
        give), or "" when none is known."""
        found = self.tested_modules(tests)
        return (
            f": give {', '.join(found)} in full, its path on the line above the block"
            if found
            else ""
        )

    def tested_modules(self, tests: str) -> list[str]:
        """The workspace's modules a test file imports, as paths."""
        modules = re.findall(r"^\s*(?:from|import)\s+([\w.]+)", tests, re.M)
        paths = [m.replace(".", "/") + ".py" for m in dict.fromkeys(modules)]
        return [p for p in paths if p in self.files.texts or p in self.files.known]

    async def code_to_tested_module(self, block: str, tests: str, notes: list[str]) -> str | None:
        """Write what a block given for a test file holds besides tests to the one module the
        tests import; the path written, else None."""
        code = code_beside_tests(block, tests)
        targets = self.tested_modules(tests)
        if code is None or len(targets) != 1 or is_test_file(targets[0]):
            return None
        return await self.apply_edit(FileBlock(targets[0], code, "python"), notes)

    async def apply_edit(self, edit: FileBlock | SearchReplace, notes: list[str]) -> str | None:
        """Write one edit; the path it changed, else None (the reason is in `notes`).
        Raises `TaskStop` when the model repeats a write that changes nothing."""
        try:
            done = resolve(
                edit, self.files.texts, self.files.known, self.old_text, self.task_words,
                self.files.views,
            )  # fmt: skip
        except (EditRefused, ToolError) as exc:
            notes.append(f"Not written: {exc}")
            return None
        old = self.old_text(done.path)
        if self.checks.guards(done.path):
            if given_back(old, done.content):
                self.unchanged += 1  # a test file given back as it is: no harm, no refusal
                return None
            tests = old or done.content
            moved: list[str] = []
            wrote = await self.code_to_tested_module(done.content, tests, moved)
            fix = (
                f"the code you gave in it that is not tests went to {wrote}"
                if wrote is not None
                else f"fix the code they test instead{self.tested_files(tests)}"
            )
            notes.append(
                f"Not written: {done.path} holds tests, and the tests judge the change; {fix}."
            )
            notes.extend(moved)
            return wrote
        dropped = dropped_examples(old or "", done.content) if self.checks.examples_judge() else []
        if dropped:
            notes.append(
                f"Not written: {done.path} would lose its docstring example `{dropped[0]}`; the "
                "examples are the task's checks, so keep every one as it is and fix the code."
            )
            return None
        if given_back(old, done.content):
            digest = hashlib.sha256(done.content.encode()).hexdigest()[:16]
            key = {"path": done.path, "content_sha256": digest}
            verdict = self.guard.check("write_file", key)
            if verdict != "run":
                self.blocked("write_file", key, verdict)
            self.guard.record("write_file", key, True, f"{done.path} already holds this text")
            notes.append(f"{done.path} already holds exactly this text; it was left as it is.")
            self.unchanged += 1
            return None
        self.before_write(done.path, old)
        args = {"path": done.path, "content": done.content}
        result = await self.run_tool(Action("write_file", args))
        if result is None:
            raise TaskStop("cancelled", "")
        if not result.ok:
            notes.append(f"Not written: {result.text}")
            return None
        self.files.wrote(done.path, done.content)
        self.guard.changed()
        self.emit(FileChanged(self.step(), done.path, result.detail, done.how))
        how = {"merged": " (the functions you gave replaced those of the file)"}.get(done.how, "")
        if done.kept:
            how += f"; it keeps {', '.join(done.kept)}, which your text left out"
        notes.append(f"{done.path} was written{how}.")
        return done.path

    @property
    def task_words(self) -> set[str]:
        """The words of the task: a method it names may be left out of a class on purpose."""
        return set(re.findall(r"\w+", self.task))

    def blocked(self, tool: str, args: dict[str, Any], verdict: str) -> None:
        msg = self.guard.corrective(tool, args)
        stuck = verdict == "stuck"
        self.emit(
            RepeatBlocked(self.step(), tool, args, self.guard.error, self.guard.times, msg,
                          stuck=stuck)
        )  # fmt: skip
        if stuck:
            raise TaskStop("stuck", self.guard.stuck_reason(tool, args))
        raise ReplyBlocked(msg)

    async def call_tool(self, call: ToolCall, notes: list[str]) -> None:
        """Run one tool call, its result into `notes`."""
        by_name = {t.name: t for t in self.tools}
        spec = by_name.get(call.name)
        if spec is None:
            verdict = self.guard.check(call.name, call.arguments)
            if verdict != "run":
                self.blocked(call.name, call.arguments, verdict)
            why = self.no_such_tool(call.name, by_name)
            self.guard.record(call.name, call.arguments, False, why)
            notes.append(observation(call.name, False, why))
            return
        try:
            validate_args(spec, call.arguments)
        except StepInvalid as exc:
            notes.append(observation(call.name, False, str(exc)))
            return
        verdict = self.guard.check(call.name, call.arguments)
        if verdict != "run":
            self.blocked(call.name, call.arguments, verdict)
        result = await self.run_tool(Action(call.name, call.arguments))
        if result is None:
            raise TaskStop("cancelled", "")
        self.guard.record(call.name, call.arguments, result.ok, result.text)
        if result.ok and call.name == "read_file" and "start_line" not in call.arguments:
            path = str(call.arguments["path"])
            try:
                self.files.texts[path] = self.read(path)
            except ToolError:
                pass
            self.files.views.pop(path, None)  # seen whole now
        notes.append(observation(call.name, result.ok, result.text))

    def no_such_tool(self, name: str, tools: dict[str, Any]) -> str:
        """Why a call to an unknown tool did nothing, and what to do instead. A small model
        told to implement `f` may "call" f: it is then told f is the code to write."""
        owner = next((p for p, t in self.files.texts.items() if name in (top_names(t) or ())), None)
        if owner is not None:
            return (
                f"{name} is not a tool: it is a function in {owner}, and calling it runs nothing. "
                f"To change it, write {owner} whole: its path on a line, then the file in a "
                "code block."
            )
        names = ", ".join(sorted(tools))
        return f"there is no tool {name!r}; the tools are {names}. Change files with code blocks."

    async def run_items(self, parsed: Reply) -> tuple[list[str], list[str], bool]:
        """The reply's edits, then its calls: (paths changed, what to tell the model, whether
        anything besides the writes needs the model's attention)."""
        notes: list[str] = []
        wrote: list[str] = []
        self.unchanged = 0
        edits = without_usage_examples(parsed.edits)
        calls: list[ToolCall] = []
        for call in parsed.tool_calls:  # a write asked for as a call is an edit like any other
            a = call.arguments
            if call.name == "write_file" and isinstance(a.get("content"), str):
                edits.append(FileBlock(str(a.get("path") or "") or None, a["content"]))
            elif call.name == "edit_file" and isinstance(a.get("search"), str):
                edits.append(SearchReplace(str(a.get("path") or "") or None, a["search"],
                                           str(a.get("replace", ""))))  # fmt: skip
            else:
                calls.append(call)
        try:
            for edit in edits:
                path = await self.apply_edit(edit, notes)
                if path is not None and path not in wrote:
                    wrote.append(path)
            if self.unchanged and not wrote:
                notes.append(
                    "Nothing was changed: find what is wrong and give the file with the fix."
                )
            written = len(notes)
            for call in calls:
                await self.call_tool(call, notes)
        except ReplyBlocked as blocked:
            # a repeat after a write of this reply: what was written is still checked (the
            # 1.5B gave one function three times; the third was refused as a repeat, the
            # write before it went unchecked, and the task ended `completed` with 14 tests
            # failing)
            if not wrote:
                raise
            notes.append(str(blocked))
            return wrote, notes, True
        notes += parsed.problems
        refused = len(edits) - self.unchanged > len(wrote)  # a file given back as it is: no harm
        return wrote, notes, refused or len(notes) > written

    def changes_nothing(self, parsed: Reply) -> bool:
        """Whether a reply, as a fix, changes no code: no call, and every edit (if any) gives
        its file back as it runs now (only docstrings or comments moved), or would be refused
        (a test file, dropped examples). After failing checks that is a fix that cannot fix:
        the model copies its failed code, says it is right, or edits the checks instead."""
        if parsed.tool_calls or (parsed.problems and not parsed.items):
            return False
        for edit in without_usage_examples(parsed.edits):
            try:
                done = resolve(
                    edit, self.files.texts, self.files.known, self.old_text, self.task_words
                )
                old = self.old_text(done.path)
            except (EditRefused, ToolError):
                return False
            if self.checks.guards(done.path):
                continue  # refused: the checks are not the code to change
            if old is None:
                return False  # a new file
            if self.checks.examples_judge() and dropped_examples(old, done.content):
                continue  # refused: the examples are the checks
            if old != done.content and not same_code(old, done.content, done.path):
                return False
        return True

    async def put_back(self, texts: dict[str, str | None], why: str) -> list[str]:
        """Write each file back to `texts`, or remove it where the text is None (a file the
        attempt created: the workspace is then as it was, and a stray module cannot break the
        next attempt's test run); the paths put back. Each write or removal is asked as the undo
        it is (`why`), shown as `put_back`; a created file that no longer holds what the agent
        wrote stays. Raises `TaskStop` when the user cancels one."""
        written: list[str] = []
        for path, text in texts.items():
            now = self.old_text(path)
            if now == text or (text is None and now != self.files.texts.get(path)):
                continue
            result = await self.run_tool(Action("put_back", {"path": path}),
                                         self._undo(path, now, text, why))  # fmt: skip
            if result is None:
                raise TaskStop("cancelled", "")
            if not result.ok:
                continue
            if text is None:
                self.files.texts.pop(path, None)
            else:
                self.files.texts[path] = text
            self.guard.changed()
            how = "restored" if text is not None else "removed"
            self.emit(FileChanged(self.step(), path, result.detail, how))
            written.append(path)
        return written

    @staticmethod
    def _undo(path: str, now: str | None, text: str | None, why: str) -> Runner:
        """The runner that puts `path` back to `text`, or removes it (None) while it holds
        `now`."""

        async def undo(ctx: ToolContext, _args: dict[str, Any]) -> ToolResult:
            if text is None:
                return await remove_created_file(ctx, path, now or "", why)
            return await put_back_file(ctx, path, text, why)

        return undo
