"""The step loop: a reply per step, its edits and tool calls run, checks, honest endings.

A step is one reply of the model in its own format (`reply.py`): code blocks that change files
and `<tool_call>`s to read, search or run. Its collaborators: `ReplyRunner` writes the edits
(`edits.py`: which file, whole or merged) and runs the calls; `TaskChecks` checks a step that
changed files (`checks.py`: the Python compiles, the task's test command passes), a failure
going back for up to `test_rounds` rounds; `TranscriptCompactor` says when the transcript must
be summarised; `Retries` keeps the attempts a failing task can go back to. The task's first
message carries the files it is about (`chat_files.py`).

Outcomes: `completed` (changes made and checked, or an answer to a question), `no_change` (the
task asked for a change and no file changed), `tests_failed` (files changed, the tests still fail
after the last round), `cancelled` (the user), `time_ceiling` (the task ceiling fired; a summary
step ran on its own deadline), `max_steps` (step limit, or a summary that overran its deadline),
`error` (the server failed, or replies kept failing to parse), `stuck` (a call repeated after the
loop guard's warning, `loop_guard.py`), `no_answer` (an empty answer, or one of our own
placeholders: `finish_check.py`). What a task is given and gives back (`AgentConfig`,
`AgentDeps`, `TaskResult`) lives in `task.py`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import anyio

from fusion_tui.agent.chat_files import (
    ChatFiles,
    choose,
    fix_target,
    named_unlisted,
    workspace_files,
)
from fusion_tui.agent.checks import is_test_file
from fusion_tui.agent.deadline import CancelToken
from fusion_tui.agent.events import (
    EventSink,
    Outcome,
    RequestDone,
    RequestPurpose,
    Retried,
    StepFailed,
    StepStarted,
    TaskOutcome,
    TestRan,
)
from fusion_tui.agent.file_view import words_of
from fusion_tui.agent.finish_check import (
    NO_CHANGE_NOTE,
    RETRY_NOTE,
    claims_passing,
    declines,
    finish_problem,
    no_answer_reason,
    wants_change,
)
from fusion_tui.agent.loop_guard import LoopGuard
from fusion_tui.agent.prompt import (
    CARRIED,
    ContextMeter,
    PromptPacker,
    volatile_tail,
)
from fusion_tui.agent.reply import Reply, ToolCall, parse_reply
from fusion_tui.agent.reply_runner import ReplyBlocked, ReplyRunner, TaskStop
from fusion_tui.agent.request import Streamed, stream_request
from fusion_tui.agent.retry import Attempt, BranchPoint, Retries
from fusion_tui.agent.task import (
    AgentConfig,
    AgentDeps,
    TaskFiles,
    TaskResult,
    TaskScope,
    tools_for,
)
from fusion_tui.agent.task_checks import PROSE_SUFFIXES, TaskChecks
from fusion_tui.agent.tools import ToolContext
from fusion_tui.agent.tools.workspace import ToolError
from fusion_tui.agent.transcript_compactor import TranscriptCompactor
from fusion_tui.server.errors import ContextExceeded

__all__ = ["AgentConfig", "AgentDeps", "TaskResult", "compact_ahead", "run_task", "tools_for"]
"""`session_run` and the tests import the task's types from here too (they live in `task`)."""


CHARS_PER_TOKEN = 3.0
"""For the budget of the files shown with a task when the server cannot count them."""
STOP_GRACE_S = 5.0
"""A task stopped from outside gets this long to put the best attempt's files back."""
KEEP_BEST_WHY = (
    "The task ends with its checks failing: the agent keeps the version that failed fewest."
)
"""What the user is told when asked to allow that undo (`ApprovalRequest.why`)."""
STOP = ["<tool_response>"]
"""The model writes a call and waits; a model that goes on to invent the result is cut there."""
REPAIR_NOTE = "{problems}. Reply again in the format of the system message."
AHEAD_ASK = (
    "Before the next task: in a few sentences, say what was asked in this session, what was "
    "done, which files were changed, and what remains. No code."
)
"""The question a compaction after a task asks on the session's own slot."""
EARLIER_WORK = "### summary of the earlier work in this session"
"""Heads the summary a compaction after a task carries into the next task's message. Not an
exchange of its own: left as a question and its answer, the summary was the only reply of the
model's in the transcript, and the 1.5B answered the next two tasks in its shape ("Files changed:
None / What remains: ...") instead of writing code, six attempts each."""


WHOLE_FILE_SLACK = 1.15
"""A file given back in full, changed, is a little longer than the file (`step_n_predict`)."""
REPLY_WORDS = 256
"""Tokens for the words around a file given in full: the path line, a sentence or two."""


def summary_reserve(config: AgentConfig) -> float:
    """Seconds of a task kept for its summary step: `finalization_ms`, at most a tenth of the
    task (seen: a 300 s task whose summary ran on a fresh five minutes was killed at 315 s by
    the benchmark that had asked for 300). A worker writes no summary and keeps none."""
    if not config.finalize:
        return 0.0
    return min(config.finalization_ms, config.max_duration_ms / 10) / 1000


class _Run:
    def __init__(
        self,
        task: str,
        session_id: str,
        deps: AgentDeps,
        config: AgentConfig,
        cancel: CancelToken | None,
        resume: PromptPacker | None,
    ) -> None:
        self.task, self.sid, self.deps, self.cfg = task, session_id, deps, config
        self.cancel = cancel or CancelToken()
        self.clock = deps.clock
        self.started = self.clock.now()
        self.end = self.started + config.max_duration_ms / 1000
        """The task's end, its summary included: a `--max-duration-ms` holds."""
        self.ceiling = self.end - summary_reserve(config)
        """Where the steps stop, leaving the summary step its time before `end`."""
        self.tools = tools_for(deps.tools, deps.delegate is not None)
        if resume is not None:
            resume.set_stable(deps.stable_prefix)
        self.packer = resume or PromptPacker(deps.frame, deps.stable_prefix)
        self.meter = ContextMeter(deps.n_ctx)
        self.compactor = TranscriptCompactor(
            deps, config, self.meter, self.emit, lambda: self.step, lambda: self.ceiling,
            self.cancel,
        )  # fmt: skip
        self.slot = deps.slots.slot_for(session_id)
        self.step = 0
        self.requests: list[RequestDone] = []
        self.archived: list[dict[str, Any]] = []
        self.ctx = ToolContext(
            deps.workspace,
            deps.gate,
            lambda: self.cancel.cancelled,
            config.shell_timeout_s,
            time_left=lambda: self.ceiling - self.clock.now(),
        )
        self.files = TaskFiles()
        """What the task knows of the workspace's files (shared with its replies and checks)."""
        self.rounds = 0
        """Check rounds used: replies that were sent back because the checks failed."""
        self.nudged = False
        """Whether a reply that would have ended the task undone was already sent back."""
        self.retries = Retries(config.retries)
        self.reply_at = 0
        """Messages in the transcript before the reply being run (where a retry goes back to)."""
        self.task_at = 0
        """Messages in the transcript before the task's first reply (where starting over goes)."""
        self.failing = False
        """The checks of the last change failed, and no change passed since."""
        scope = TaskScope(self.emit, self.clock, self.cancel, lambda: self.step)
        self.checks = TaskChecks(task, config, self.ctx, self.files, scope)
        self.replies = ReplyRunner(
            task, self.ctx, self.tools, self.checks, self.files, scope, self.before_write, self,
            deps.delegate,
        )  # fmt: skip
        self.kept = ""
        """Why the files hold an earlier attempt at the end (said in the outcome's reason)."""
        self.per_token: float | None = None
        """Characters per token of this model, counted once (`chars_per_token`)."""

    def emit(self, event: Any) -> None:
        if isinstance(event, RequestDone):
            self.requests.append(event)
        self.deps.on_event(event)

    def ms_left(self) -> int:
        return int((self.ceiling - self.clock.now()) * 1000)

    # --- delegate.SubTaskRunner ----------------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self.sid

    @property
    def max_steps(self) -> int:
        return self.cfg.max_steps

    async def run_sub_task(
        self,
        task: str,
        *,
        session_id: str,
        max_steps: int,
        max_duration_ms: int,
        on_event: EventSink,
    ) -> TaskResult:
        config = dataclasses.replace(
            self.cfg, max_steps=max_steps, max_duration_ms=max_duration_ms, finalize=False
        )
        deps = dataclasses.replace(self.deps, delegate=None, on_event=on_event)
        return await run_task(
            task, session_id=session_id, deps=deps, config=config, cancel=self.cancel
        )  # fmt: skip

    def tail(self) -> str:
        return volatile_tail(self.step + 1, self.cfg.max_steps, self.ms_left())

    # --- the task's first message ------------------------------------------------------------

    async def first_message(self) -> str:
        """The task, the files it is about and the names of the others."""
        if not self.deps.workspace_facts:
            return self.task + self.tail()
        files = workspace_files(self.deps.workspace)
        for path in named_unlisted(self.task, files):
            try:
                self.replies.read(path)
            except (ToolError, OSError):
                continue
            files.append(path)
        self.files.known.update(files)
        n_ctx = self.compactor.context()
        per_token = await self.chars_per_token()
        room = (n_ctx - self.cfg.n_predict) * per_token if n_ctx > 0 else 48_000
        budget = max(0, int(room * 0.6) - len(self.deps.stable_prefix))
        run = await self.checks.run_tests(0) if self.cfg.test_cmd else None
        in_part = words_of(self.task) if self.cfg.long_files_in_part else None
        failed = run.tail if run is not None and not run.ok else ""
        chat = choose(self.task, files, self.replies.read, budget, in_part, failed)
        self.files.texts.update(chat.shown)
        self.files.views.update(chat.views)
        await self.checks.prepare(chat.shown)
        target = fix_target(self.task, list(chat.shown))
        if self.packer.messages:  # a session that goes on: what it holds unchanged stays there
            held = self.packer.holds
            chat = chat.without([p for p in chat.shown if held(chat.block(p))])
        before = self.tests_before(run, target, in_part=target in chat.views)
        return f"{self.task}\n\n{self.files_section(chat)}{before}{self.tail()}"

    async def chars_per_token(self) -> float:
        """Characters per token of this model's tokenizer, from the server's count of the
        system message (one `/tokenize` of a few kB, once a task), so the files shown with a
        task fit the slot; `CHARS_PER_TOKEN` when the server cannot be asked."""
        if self.per_token is None:
            self.per_token = await self.count_chars_per_token()
        return self.per_token

    async def count_chars_per_token(self) -> float:
        if self.deps.count_tokens is None:
            return CHARS_PER_TOKEN
        try:
            counted = await self.deps.count_tokens(self.deps.stable_prefix)
        except Exception:  # no count to be had: the usual ratio
            return CHARS_PER_TOKEN
        return len(self.deps.stable_prefix) / counted if counted > 0 else CHARS_PER_TOKEN

    def tests_before(self, run: TestRan | None, target: str | None, in_part: bool) -> str:
        """The test command's failure before any change, for the first message: what is broken
        is the most useful thing a model fixing it can see. With the one file the fix goes to
        (`fix_target`), the message ends by asking for it: shown the failing tests last, the
        0.5B coder explained them in words (its first answer, at temperature 0, on the planted
        bug of tests/server/test_agent_coder_real.py), and wrote code in 3 of 5 sampled answers
        and the fix in 1; asked for stats.py in full, code in 5 of 5, the fix in 4. A file
        shown in part is asked for as its functions, not whole: the model has not seen it all."""
        if run is None:
            return ""
        self.retries.checked_before(run.tail, run.ok)
        if run.ok:
            return f"\n\nThe tests `{run.command}` pass now."
        how = "time out" if run.exit is None else f"fail (exit code {run.exit})"
        ask = ""
        if target:
            what = f"the functions of {target} that you change" if in_part else target
            ask = f"\n\nGive {what} in full with the fix."
        return (
            f"\n\nThe tests `{run.command}` {how} now. The end of the output:\n```\n{run.tail}\n```"
            + ask
        )

    @staticmethod
    def files_section(chat: ChatFiles) -> str:
        return chat.render() or "The workspace is empty."

    # --- requests --------------------------------------------------------------------------

    async def request(
        self,
        purpose: RequestPurpose,
        deadline: float,
        n_predict: int,
        sampling: dict[str, Any] | None = None,
    ) -> Streamed:
        prompt = self.packer.prompt()
        body: dict[str, Any] = {
            **self.cfg.sampling,
            **(sampling or {}),
            "prompt": prompt,
            "id_slot": self.slot,
            "cache_prompt": True,
            "stream": True,
            "return_progress": True,
            "n_predict": n_predict,
            "stop": STOP,
        }
        reply = await stream_request(
            self.deps.completion,
            body,
            step=self.step,
            purpose=purpose,
            clock=self.clock,
            deadline=deadline,
            cancel=self.cancel,
            on_event=self.emit,
            deadline_means="deadline" if purpose == "summary" else "time_ceiling",
            stop_repeating=self.slot >= 0 and purpose in ("step", "repair"),
        )
        if reply.end is not None:
            t = reply.end.timings
            self.meter.record(len(prompt), t.cache_n, t.prompt_n, t.predicted_n)
            if self.slot < 0 <= reply.end.id_slot:
                self.slot = reply.end.id_slot
                self.deps.slots.pin(self.sid, self.slot)
        return reply

    async def compact(self) -> None:
        """Deliberate side call: summarize the transcript on the side slot, then restart on it
        with the task and the summary."""
        before = self.meter.used_tokens
        summary = await self.side_summary()
        if summary is None:
            return
        self.retries.forget()  # the transcript before the summary cannot be gone back to
        first = f"{self.task}\n\n### summary of the work so far\n{summary}{self.tail()}"
        self.packer = self.packer.restarted(first)
        self.compactor.announce(before, len(summary))

    async def compact_ahead(self) -> bool:
        """Compact after a task, while the user reads its outcome, when the next task would not
        fit (`TranscriptCompactor.due_after_task`): the next task's first token then waits for
        no summary. The new transcript is the summary alone, carried into the next task's
        message (`EARLIER_WORK`)."""
        before = await self.compactor.due_after_task(self.packer)
        if not before:
            return False
        self.ceiling = self.clock.now() + self.cfg.finalization_ms / 1000
        summary = await self.summary_continued()
        if summary is None:
            summary = await self.side_summary()
        if summary is None:
            return False
        self.packer = self.packer.restarted(f"{EARLIER_WORK}\n{summary}", kind=CARRIED)
        self.compactor.announce(before, len(summary))
        return True

    async def summary_continued(self) -> str | None:
        """After a task, the summary asked on the session's own slot as the transcript's next
        question: the slot holds the transcript, so only the question is read, not the whole
        log again on the side slot (seen: 1,633 tokens read cold, 17 s on the two cores, for
        the 1.5B's summary of four tasks). None when the slot is not known, this model cannot
        reuse a prefix in full, or no summary came (the side call then asks)."""
        if self.slot < 0 or self.deps.prefix_reuse != "full":
            return None
        transcript = self.packer
        self.packer = transcript.rewound(len(transcript.messages))  # a copy: the session's own
        self.packer.add_user(AHEAD_ASK, kind="note")  # transcript never holds the question
        try:
            reply = await self.request("compaction", self.ceiling, self.cfg.summary_n_predict)
        finally:
            self.packer = transcript
        text = finish_as_prose(parse_reply(reply.text)).prose.strip() if reply.ended == "ok" else ""
        if not text or finish_problem(text):
            return None
        self.archived.append(transcript.to_dict())
        return text

    async def side_summary(self) -> str | None:
        """The transcript summarised on the side slot (`TranscriptCompactor.side_summary`), the
        old transcript archived in the session's record; None when no summary came."""
        summary = await self.compactor.side_summary(self.packer)
        if summary is not None:
            self.archived.append(self.packer.to_dict())
        return summary

    async def next_reply(self) -> Streamed:
        """One step's reply (compacted first when the prompt may not fit)."""
        if await self.compactor.needed(self.packer.prompt()):
            await self.compact()
        sampling = self.retries.sampling()
        n_predict = await self.step_n_predict()
        reply = await self.request("step", self.ceiling, n_predict, sampling)
        if isinstance(reply.exc, ContextExceeded):
            await self.compact()
            reply = await self.request("step", self.ceiling, n_predict, sampling)
        return reply

    async def step_n_predict(self) -> int:
        """A step's cap on its reply: the configured one, raised so that the largest file in
        the chat fits in full with a few words around it. Not a test file (not the model's to
        rewrite), nor prose (an exercise's instructions run to 30 kB; a rambling reply may use
        the whole cap). A reply cut inside a file's block writes nothing, so a cap below
        the file's size spends all of it for nothing, step after step (the 1.5B on Exercism's
        ledger, a 10.6 kB file: every rewrite ran to the 2,048-token cap). At most half the
        slot, for the prompt holds the file too; never raised when `agent.maxTokens` is set.
        A file shown in part counts as long as its part: that is what the model gives back."""
        sizes = [
            self.shown_size(p, t) for p, t in self.files.texts.items()
            if not is_test_file(p) and not p.endswith(PROSE_SUFFIXES)
        ]  # fmt: skip
        if not self.cfg.fit_whole_files or not sizes:
            return self.cfg.n_predict
        need = int(max(sizes) / await self.chars_per_token() * WHOLE_FILE_SLACK) + REPLY_WORDS
        n_ctx = self.compactor.context()
        return max(self.cfg.n_predict, min(need, n_ctx // 2) if n_ctx > 0 else need)

    def shown_size(self, path: str, text: str) -> int:
        """How long `path` is as the model sees it: its part when shown in part."""
        view = self.files.views.get(path)
        part = None if view is None else view.on(text)
        return len(text) if part is None else len(part.text)

    # --- running what a reply says -------------------------------------------------------------

    def before_write(self, path: str, old: str | None) -> None:
        """Told of every write before it goes: the attempt can then be undone."""
        self.retries.writing(self.reply_at, self.rounds, path, old)
        self.files.before.setdefault(path, old)

    async def count_before(self) -> None:
        """The files are back as they were before any attempt and the tests found with the task
        never ran on them: run those once, for the count a later attempt must beat (`Retries`).
        Not the docstring examples: those are the model's own, and change with its code."""
        if self.cfg.test_cmd or not self.retries.wants_count_before(self.files.texts):
            return
        own = self.checks.own_check()
        if own is None or own.tool != "run_tests":
            return
        ran = await self.checks.run_own(own, 0)
        if ran is not None:
            self.retries.checked_before(ran[0].tail, ran[0].ok)

    # --- fresh attempts (retry.py) -------------------------------------------------------------

    async def retry(self, reason: str) -> None:
        """Close the failing attempt, put its files back, and go back to the prompt that
        produced it; the next request samples it anew (`Retries.sampling`)."""
        point = self.retries.close(self.files.texts, self.checks.failed_output())
        why = f"The agent undoes its attempt ({reason}) and tries afresh."
        self.rewind(point, reason, await self.replies.put_back(point.before, why))
        await self.count_before()

    async def retry_instead(self, reason: str) -> bool:
        """A model that repeats itself within an attempt that can be done over is not stuck
        yet: the attempt is (seen: a sampled attempt that read the same file again and again),
        and a task that wrote nothing yet starts over from its own prompt; whether it was."""
        return await self.try_again(f"the model repeated itself ({reason})")

    async def try_again(self, reason: str) -> bool:
        """An attempt that went nowhere is done over when a retry is left: from its start, its
        files put back, or, when nothing was written yet, the task from its own prompt (seen: the
        1.5B's fix ran to the token cap three times in a row, the same loop of `if k == 21:` lines
        each time, and at temperature 0 a fourth request would have given it again); whether
        it was."""
        if self.retries.can_retry():
            await self.retry(reason)
            return True
        return self.resample(reason) or self.start_over(reason)

    def start_over(self, reason: str) -> bool:
        """A task that has written nothing yet and went nowhere: ask its own prompt again,
        sampled as a fresh attempt, when a retry is left; whether it was."""
        if self.files.changed or not self.retries.can_start_over():
            return False
        self.rewind(self.retries.start_over(BranchPoint(self.task_at, 0)), reason, [])
        return True

    def resample(self, reason: str) -> bool:
        """A fresh attempt that has not written yet and could not be used: ask its prompt
        again, when a retry is left; whether it was."""
        if not self.retries.can_resample():
            return False
        self.rewind(self.retries.resample(), reason, [])
        return True

    def rewind(self, point: BranchPoint, reason: str, restored: list[str]) -> None:
        """Go back to the prompt at `point`; the next request samples it anew."""
        self.archived.append(self.packer.to_dict())  # the attempt stays in the session's record
        self.packer = self.packer.rewound(point.messages)
        self.rounds = point.rounds
        self.replies.guard = LoopGuard()
        self.failing = False
        self.emit(Retried(self.step, self.retries.used + 1, self.cfg.retries + 1, reason,
                          tuple(restored)))  # fmt: skip

    async def keep_best(self) -> bool:
        """At a failing end: put back the earlier attempt that failed fewest checks, when it
        failed strictly fewer than the files as they are, or the files as they were before any
        attempt when none failed fewer than those; whether anything was put back. The files
        undone attempts created go with them; `kept` says what the files hold, and names a
        created file that stays (the user denied its removal, or it changed since)."""
        best = self.retries.best(self.files.texts, self.checks.failed_output())
        created = self.retries.created_besides(best)
        put = False
        if best is not None:
            texts: dict[str, str | None] = {**best.files, **dict.fromkeys(created)}
            try:
                written = await self.replies.put_back(texts, KEEP_BEST_WHY)
            except TaskStop:
                return False
            put, self.kept = True, self.kept_words(best, bool(written))
        left = [p for p in created if p in self.files.texts]
        if left:
            words = f"{', '.join(left)} (created by an undone attempt) left as it is"
            self.kept = f"{self.kept}; {words}" if self.kept else words
        return put

    async def keep_best_when_stopped(self) -> None:
        """Stopped from outside (SIGTERM from `timeout`, a harness's limit): the files keep the
        attempt that failed fewest checks, as at a failing end, but only one whose count is
        known; the files as they are count only when the last checks ran on them (the stop may
        have cut the checks of a fresh write). A few seconds at most, shielded from the stop."""
        tested = self.checks.on_files_as_left()
        best = self.retries.best(self.files.texts, self.checks.failed_output() if tested else "")
        if best is None or best.failures is None:
            return
        shielded = anyio.CancelScope(shield=True)
        with shielded, anyio.move_on_after(STOP_GRACE_S), contextlib.suppress(TaskStop):
            await self.replies.put_back(dict(best.files), KEEP_BEST_WHY)

    def kept_words(self, best: Attempt, written: bool) -> str:
        """What the files hold at a failing end (`written`: whether keeping `best` wrote any)."""
        counted = "" if best.failures is None else f", {best.failures} failed"
        number = next((n for n, a in enumerate(self.retries.attempts, 1) if a is best), None)
        if number is not None:
            return f"the files hold attempt {number}, which failed fewest checks{counted}"
        if best.failures == 0:
            were = "were put back" if written else "are"
            return f"the files {were} as they were when the checks last passed"
        back = "they were put back as they were" if written else "they are as they were"
        return (f"no attempt failed fewer than the {best.failures} check(s) the files failed "
                f"before the task: {back}")  # fmt: skip

    # --- endings -------------------------------------------------------------------------------

    def ending(self, prose: str) -> tuple[Outcome, str, str]:
        """How a task ends on a reply with nothing left to run."""
        if self.files.changed:
            if self.checks.failed():
                return "tests_failed", prose, self.failed_reason_now()
            return self.completed(prose)
        if wants_change(self.task):
            return "no_change", prose, "no file was changed"
        problem = finish_problem(prose)
        if problem is not None:
            return "no_answer", "", no_answer_reason(problem)
        return "completed", prose, ""

    def completed(self, prose: str) -> tuple[Outcome, str, str]:
        """A change task done: its summary is the model's words, else the files it changed.
        Words that still end on a colon led into something that was taken out of them and is
        not a file's code (that is named where it stood, `Reply.answer`): a tool call written
        as a block, say; the files changed follow them, or the answer would stop mid-air."""
        changed = f"Changed {', '.join(self.files.changed)}."
        if prose.rstrip().endswith(":"):
            return "completed", f"{prose.rstrip()}\n\n{changed}", ""
        return "completed", prose or changed, ""

    def nudge(self, prose: str) -> str | None:
        """What to ask once when a reply would end the task without doing it (a change task
        with no change, an answer that is empty or our own placeholder); None: end now."""
        if self.nudged or self.files.changed:
            return None
        self.nudged = True
        if wants_change(self.task):
            return NO_CHANGE_NOTE
        problem = finish_problem(prose)
        return None if problem is None else RETRY_NOTE.format(problem=problem)

    def failed_reason_now(self) -> str:
        """Why the checks still fail, as the run stands."""
        return self.checks.failed_reason(self.retries.used + 1, self.rounds)

    def failed_reason(self) -> str:
        """Why a task that ran out of time or steps is not done, when its checks still fail."""
        return self.failed_reason_now() if self.failing else ""

    async def finalize(self, reason: Outcome, partial: str = "",
                       pending: tuple[str, str] | None = None) -> tuple[Outcome, str]:  # fmt: skip
        """The reserved summary step, on a fresh deadline of its own, on the same slot."""
        if not self.cfg.finalize:
            return reason, partial
        why = (
            "The time limit was reached"
            if reason == "time_ceiling"
            else "The step limit was reached"
        )
        if self.failing:  # said, or the summary claims the tests pass (the 1.5B did)
            why += f"; {self.failed_reason_now()}"
        elif self.retries.attempts and self.retries.point is None:  # a fresh one, not written
            n = len(self.retries.attempts)
            why += f"; the {n} attempt(s) before this one failed the checks and were undone"
        note = f"{why}. In a few sentences, say what was done and what remains; no code."
        if pending is not None:
            self.packer.add_user(f"{pending[0]}\n\n{note}", kind=pending[1])
        else:
            if self.packer.awaiting_reply:  # keep what the slot holds: the prefix stays exact
                self.packer.add_assistant(partial, kind="raw")
            self.packer.add_user(note, kind="note")
        deadline = min(self.clock.now() + self.cfg.finalization_ms / 1000, self.end)
        if deadline <= self.clock.now():  # a tool ran past the task's end: no time is left
            self.unask_summary(pending)
            return reason, partial
        reply = await self.request("summary", deadline, self.cfg.summary_n_predict)
        if reply.ended != "ok":  # stopped, overran or failed: the reason stands, with the words
            self.unask_summary(pending)
            return reason, reply.text
        self.packer.add_assistant(reply.text, kind="summary")
        summary = finish_as_prose(parse_reply(reply.text)).prose or reply.text
        if self.failing and claims_passing(summary):  # the end says why the task is not done
            return reason, ""
        return reason, "" if finish_problem(summary) else summary

    def unask_summary(self, pending: tuple[str, str] | None) -> None:
        """A summary that did not come: its question leaves the transcript, which then ends on
        the model's last words. Left unanswered, a resumed session marks it "interrupted", and
        the 1.5B gave that marker back word for word as its next summary."""
        if pending is None and self.packer.messages[-1].kind == "note":
            self.packer = self.packer.rewound(len(self.packer.messages) - 1)

    async def run(self) -> tuple[Outcome, str, str]:
        try:
            outcome, summary, reason = await self.steps()
        except TaskStop as stop:
            outcome, summary, reason = stop.outcome, "", stop.reason
        except anyio.get_cancelled_exc_class():
            await self.keep_best_when_stopped()
            raise
        if outcome not in ("completed", "cancelled"):
            if await self.keep_best():
                summary = ""  # the last attempt's words, of code that was just put back
            if self.kept:
                reason = f"{reason}; {self.kept}" if reason else self.kept
        return outcome, summary, reason

    async def steps(self) -> tuple[Outcome, str, str]:
        pending: tuple[str, str] | None = None
        carried = self.packer.take_carried()  # the summary compacted after the last task
        if not self.packer.awaiting_reply:
            opening = await self.first_message()
            pending = (f"{carried}\n\n{opening}" if carried else opening, "task")
        self.task_at = len(self.packer.messages) + (pending is not None)
        failed = 0
        while True:
            if self.step > 0 and self.clock.now() >= self.ceiling:  # a tool ended past it
                return (*await self.finalize("time_ceiling", pending=pending), self.failed_reason())
            if self.step >= self.cfg.max_steps:
                return (*await self.finalize("max_steps", pending=pending), self.failed_reason())
            if pending is not None:
                self.packer.add_user(*pending)
                pending = None
            self.step += 1
            self.emit(StepStarted(self.step, self.cfg.max_steps, self.ms_left()))
            reply = await self.next_reply()
            if reply.ended == "time_ceiling":
                ended = await self.finalize("time_ceiling", partial=reply.text)
                return (*ended, self.failed_reason())
            if reply.ended == "cancelled":
                return "cancelled", "", ""
            if reply.ended == "error":
                return "error", "", reply.error
            self.reply_at = len(self.packer.messages)
            self.packer.add_assistant(reply.text)
            parsed = finish_as_prose(parse_reply(reply.text))
            if self.failing and self.replies.changes_nothing(parsed):
                if self.retries.can_retry():
                    await self.retry("the fix changed nothing of the code that failed its checks")
                    continue
                if self.retries.used:  # the last attempt copies its failed code: it is over
                    reason = f"{self.failed_reason_now()}; the last fix changed nothing"
                    return "tests_failed", parsed.prose, reason  # its edit never ran
            if not parsed.items and not parsed.problems:
                declined = wants_change(self.task) and declines(parsed.prose)
                if declined and await self.try_again("the model declined the task"):
                    continue
                if self.resample("the fresh attempt gave words but no code"):
                    continue
                nudge = self.nudge(parsed.prose)
                if nudge is None:
                    words = "the model gave words but no code, twice"
                    if wants_change(self.task) and self.start_over(words):
                        continue
                    return self.ending(parsed.prose)
                pending = (nudge + self.tail(), "repair")
                continue
            try:
                wrote, notes, open_ends = await self.replies.run(parsed, reply.text)
            except TaskStop as stop:
                if stop.outcome == "stuck" and await self.retry_instead(stop.reason):
                    continue
                return stop.outcome, "", stop.reason
            except ReplyBlocked as blocked:
                pending = (str(blocked) + self.tail(), "note")
                continue
            if not parsed.items or (parsed.problems and not wrote and not parsed.tool_calls):
                problems = "; ".join(parsed.problems) or "the reply could not be read"
                if self.resample(f"the fresh attempt's reply could not be used ({problems})"):
                    continue
                failed += 1
                self.emit(StepFailed(self.step, problems, reply.text))
                if failed >= self.cfg.max_failed_steps:
                    why = f"{failed} replies in a row could not be used: {problems}"
                    if await self.try_again(why):
                        failed = 0
                        continue
                    return "error", "", why
                pending = (REPAIR_NOTE.format(problems=problems[:1].upper() + problems[1:])
                           + self.tail(), "repair")  # fmt: skip
                continue
            failed = 0
            if wrote:
                rounds_left = self.cfg.test_rounds - self.rounds - 1
                feedback = await self.checks.check(wrote, self.rounds + 1, rounds_left)
                self.failing = feedback is not None
                if feedback is None:
                    self.retries.passed()
                    if not open_ends or self.checks.passed():
                        return self.completed(parsed.answer)
                else:
                    if self.rounds >= self.cfg.test_rounds:
                        if self.retries.can_retry():
                            await self.retry(f"the checks still fail after {self.rounds} "
                                             "round(s) of fixes")  # fmt: skip
                            continue
                        if self.checks.failed():
                            return "tests_failed", parsed.answer, self.failed_reason_now()
                        return "tests_failed", parsed.answer, "the files still do not compile"
                    self.rounds += 1
                    notes.append(feedback)
            pending = ("\n\n".join(notes) + self.tail(), "observation")


def finish_as_prose(parsed: Reply) -> Reply:
    """A `finish` call (the model's habit from other agents) is its answer: its summary becomes
    the prose, so a reply of nothing else ends the task."""
    finishes = [i for i in parsed.items if isinstance(i, ToolCall) and i.name == "finish"]
    if not finishes:
        return parsed
    said = [str(f.arguments.get("summary", "")) for f in finishes]
    items = [i for i in parsed.items if i not in finishes]
    prose = "\n\n".join(p for p in (parsed.prose, *said) if p.strip())
    answer = "\n\n".join(p for p in (parsed.answer, *said) if p.strip())
    return Reply(items, prose, parsed.problems, parsed.cut_off, answer)


async def compact_ahead(
    *,
    session_id: str,
    deps: AgentDeps,
    packer: PromptPacker,
    config: AgentConfig | None = None,
    cancel: CancelToken | None = None,
) -> tuple[PromptPacker, list[dict[str, Any]]] | None:
    """After a task: the session's transcript compacted when the next task would not fit it
    (`_Run.compact_ahead`), with the transcript it replaced (for the session's record); None
    when it fits, or the summary could not be had (the next task then compacts if it must)."""
    run = _Run("", session_id, deps, config or AgentConfig(), cancel, packer)
    if not await run.compact_ahead():
        return None
    return run.packer, run.archived


async def run_task(
    task: str,
    *,
    session_id: str,
    deps: AgentDeps,
    config: AgentConfig | None = None,
    cancel: CancelToken | None = None,
    resume: PromptPacker | None = None,
) -> TaskResult:
    """Run one agent task to an outcome; never raises for server or tool failures."""
    run = _Run(task, session_id, deps, config or AgentConfig(), cancel, resume)
    outcome, summary, error = await run.run()
    deps.on_event(TaskOutcome(outcome, summary, run.step, session_id, error))
    return TaskResult(
        outcome, summary, run.step, session_id, run.packer, run.requests, error, run.slot,
        run.archived, run.files.left_changed(), run.checks.vouch(outcome),
    )  # fmt: skip
