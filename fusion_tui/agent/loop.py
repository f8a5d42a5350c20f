"""The step loop: one constrained action per step, tools, repair, ceiling, finalization.

Outcomes: `completed` (the model called finish), `cancelled` (the user), `time_ceiling` (the task
ceiling fired; a summary step ran on its own deadline), `max_steps` (step limit, or a summary
that overran its deadline), `error` (the server failed, or steps kept failing), `stuck` (the
same failing call again after the loop guard's warning, `loop_guard.py`), `no_answer` (finish
with an empty summary or a placeholder of ours, twice: `finish_check.py`). What a task is given
and gives back (`AgentConfig`, `AgentDeps`, `TaskResult`) lives in `task.py`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fusion_tui.agent.deadline import CancelToken, run_guarded
from fusion_tui.agent.delegate import run_delegate
from fusion_tui.agent.events import (
    Compacted,
    EventSink,
    Outcome,
    RepeatBlocked,
    RequestDone,
    RequestPurpose,
    StepFailed,
    StepStarted,
    TaskOutcome,
    ToolFinished,
    ToolStarted,
)
from fusion_tui.agent.finish_check import RETRY_NOTE, finish_problem, no_answer_reason
from fusion_tui.agent.loop_guard import LoopGuard
from fusion_tui.agent.prompt import ContextMeter, PromptPacker, observation, volatile_tail
from fusion_tui.agent.protocol import Action, StepInvalid, parse_step, step_schema
from fusion_tui.agent.request import Reply, stream_request
from fusion_tui.agent.task import AgentConfig, AgentDeps, TaskResult, tools_for
from fusion_tui.agent.tools import ToolContext, ToolResult
from fusion_tui.agent.tools.registry import FINISH, RUNNERS
from fusion_tui.agent.tools.workspace import ToolError
from fusion_tui.agent.workspace_facts import task_prefix
from fusion_tui.server.errors import ContextExceeded

__all__ = ["AgentConfig", "AgentDeps", "TaskResult", "run_task", "tools_for"]
"""`session_run` and the tests import the task's types from here too (they live in `task`)."""


LOG_CHARS = 60_000
"""At most this much of the work log goes into a compaction's summary request."""
SUMMARY_OVERHEAD = 256
"""Tokens of the summary request besides the log: its instruction and the template."""
REPAIR_NOTE = "Your reply was not a valid action: {error}. Reply with exactly one JSON action."


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
        self.ceiling = self.started + config.max_duration_ms / 1000
        self.tools = tools_for(deps.tools, deps.delegate is not None)
        self.schema = step_schema(self.tools)
        stable = deps.stable_prefix
        if deps.workspace_facts:  # once per task: part of the cached prefix, byte-stable
            stable = task_prefix(stable, deps.workspace)
        if resume is not None:
            resume.set_stable(stable)
        self.packer = resume or PromptPacker(deps.frame, stable)
        self.meter = ContextMeter(deps.n_ctx)
        self.slot = deps.slots.slot_for(session_id)
        self.step = 0
        self.requests: list[RequestDone] = []
        self.archived: list[dict[str, Any]] = []
        self.guard = LoopGuard()
        self.ctx = ToolContext(
            deps.workspace, deps.gate, lambda: self.cancel.cancelled, config.shell_timeout_s
        )

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

    # --- requests --------------------------------------------------------------------------

    async def request(
        self, purpose: RequestPurpose, deadline: float, schema: dict[str, Any], n_predict: int
    ) -> Reply:
        prompt = self.packer.prompt()
        body: dict[str, Any] = {
            **self.cfg.sampling,
            "prompt": prompt,
            "id_slot": self.slot,
            "cache_prompt": True,
            "stream": True,
            "return_progress": True,
            "n_predict": n_predict,
            "json_schema": schema,
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
        )
        if reply.end is not None:
            t = reply.end.timings
            self.meter.record(len(prompt), t.cache_n, t.prompt_n, t.predicted_n)
            if self.slot < 0 <= reply.end.id_slot:
                self.slot = reply.end.id_slot
                self.deps.slots.pin(self.sid, self.slot)
        return reply

    def context(self) -> int:
        """The slot's context now (the meter follows a move to another endpoint)."""
        if self.deps.context_size is not None:
            self.meter.n_ctx = self.deps.context_size()
        return self.meter.n_ctx

    def summary_room(self) -> int:
        """Tokens the compaction's work log may take: the slot less the summary's answer and
        the request's own words."""
        n_ctx = self.context()
        if n_ctx <= 0:  # not known: the log as it always went
            return LOG_CHARS
        return n_ctx - min(self.cfg.summary_n_predict, n_ctx // 4) - SUMMARY_OVERHEAD

    async def compact(self) -> None:
        """Deliberate side call: summarize the transcript on the side slot, then restart on it.
        The log is cut to the slot (the meter's chars per token, else 2); when the slot still
        refuses it (a smaller endpoint after a move), once more cut by the refused count."""
        before = self.meter.used_tokens
        log = "\n\n".join(f"[{m.role}] {m.text}" for m in self.packer.messages)
        m, room = self.meter, self.summary_room()
        if room <= 0:  # the slot cannot hold a summary request: nothing to gain
            return
        per_token = m.prompt_chars / m.prompt_tokens if m.prompt_tokens > 0 else 2.0
        keep = min(LOG_CHARS, len(log), int(room * per_token))
        reply = await self.summary_of(log, keep)
        refused = reply.exc.n_prompt_tokens if isinstance(reply.exc, ContextExceeded) else 0
        if refused > 0 and keep > 0:
            keep = int(keep * room / refused * 0.9)
            reply = await self.summary_of(log, keep)
        if reply.ended != "ok":
            return
        self.archived.append(self.packer.to_dict())
        first = f"{self.task}\n\n### summary of the work so far\n{reply.text.strip()}{self.tail()}"
        self.packer = self.packer.restarted(first)
        if self.deps.prefix_reuse == "none":
            note = "compaction costs a full re-read: this model's prefix reuse is none"
        else:
            note = "the stable prefix stays cached; the summary and what follows are read anew"
        self.emit(Compacted(self.step, before, len(reply.text), note))

    async def summary_of(self, log: str, keep: int) -> Reply:
        """The compaction's summary request over the last `keep` characters of `log`."""
        side = PromptPacker(
            self.deps.frame,
            "Summarize this coding agent's work log: facts found, files changed, "
            "what remains. Be brief and concrete.",
        )
        side.add_user(log[-keep:] if keep > 0 else "", kind="note")
        body: dict[str, Any] = {
            **self.cfg.sampling,
            "prompt": side.prompt(),
            "id_slot": self.deps.slots.side_call_slot(),
            "cache_prompt": False,
            "stream": True,
            "n_predict": self.cfg.summary_n_predict,
        }
        return await stream_request(
            self.deps.completion, body, step=self.step, purpose="compaction", clock=self.clock,
            deadline=self.ceiling, cancel=self.cancel, on_event=self.emit,
        )  # fmt: skip

    # --- steps -----------------------------------------------------------------------------

    async def next_action(self) -> tuple[Action | None, Reply]:
        """One step's reply, with one in-step repair on the same slot."""
        if self.meter.near_limit(
            len(self.packer.prompt()), min(self.cfg.n_predict, self.context() // 4),
            self.cfg.compact_threshold,
        ):  # fmt: skip
            await self.compact()
        reply = await self.request("step", self.ceiling, self.schema, self.cfg.n_predict)
        if isinstance(reply.exc, ContextExceeded):
            await self.compact()
            reply = await self.request("step", self.ceiling, self.schema, self.cfg.n_predict)
        if reply.ended != "ok":
            return None, reply
        try:
            return parse_step(reply.text, self.tools), reply
        except StepInvalid as exc:
            self.packer.add_assistant(reply.text, kind="raw")
            self.packer.add_user(REPAIR_NOTE.format(error=exc), kind="repair")
        reply = await self.request("repair", self.ceiling, self.schema, self.cfg.n_predict)
        if reply.ended != "ok":
            return None, reply
        try:
            return parse_step(reply.text, self.tools), reply
        except StepInvalid as exc:
            self.packer.add_assistant(reply.text, kind="raw")
            self.emit(StepFailed(self.step, str(exc), reply.text))
            return None, Reply(reply.text, "ok", reply.end, str(exc))

    async def run_tool(self, action: Action) -> ToolResult | None:
        """Run a tool under the user's cancel only (never the task deadline); None = cancelled."""
        self.emit(ToolStarted(self.step, action.tool, action.args))
        t0 = self.clock.now()

        async def call() -> ToolResult:
            try:
                if action.tool == "delegate":
                    if self.deps.delegate is None:
                        return ToolResult(False, "delegate is not offered on this server")
                    return await run_delegate(self, self.deps.delegate, action.args)
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
                self.step, action.tool, action.args, result.ok, result.text,
                (self.clock.now() - t0) * 1000, result.detail,
            )
        )  # fmt: skip
        return None if guarded.ended == "cancelled" else result

    async def finalize(
        self, reason: Outcome, partial: str = "", pending: tuple[str, str] | None = None
    ) -> tuple[Outcome, str]:
        """The reserved summary step, on a fresh deadline of its own, on the same slot."""
        if not self.cfg.finalize:
            return reason, partial
        why = (
            "The time limit was reached"
            if reason == "time_ceiling"
            else "The step limit was reached"
        )
        note = f"{why}. Reply with the finish action: summarize what was done and what remains."
        if pending is not None:
            self.packer.add_user(f"{pending[0]}\n\n{note}", kind=pending[1])
        else:
            if self.packer.awaiting_reply:  # keep what the slot holds: the prefix stays exact
                self.packer.add_assistant(partial, kind="raw")
            self.packer.add_user(note, kind="note")
        deadline = self.clock.now() + self.cfg.finalization_ms / 1000
        reply = await self.request(
            "summary", deadline, step_schema((FINISH,)), self.cfg.summary_n_predict
        )
        if reply.ended == "cancelled":  # the user stopped the summary: the reason still stands
            return reason, reply.text
        if reply.ended != "ok":  # overran (or failed): end anyway, with what it has
            return "max_steps", reply.text
        self.packer.add_assistant(reply.text, kind="summary")
        try:
            summary = str(parse_step(reply.text, (FINISH,)).args["summary"])
        except StepInvalid:
            summary = reply.text
        return reason, "" if finish_problem(summary) else summary

    async def run(self) -> tuple[Outcome, str, str]:
        pending: tuple[str, str] | None = None
        if not self.packer.awaiting_reply:
            pending = (self.task + self.tail(), "task")
        failed, bad_finish = 0, False
        while True:
            if self.step > 0 and self.clock.now() >= self.ceiling:  # a tool ended past it
                return (*await self.finalize("time_ceiling", pending=pending), "")
            if self.step >= self.cfg.max_steps:
                return (*await self.finalize("max_steps", pending=pending), "")
            if pending is not None:
                self.packer.add_user(*pending)
                pending = None
            self.step += 1
            self.emit(StepStarted(self.step, self.cfg.max_steps, self.ms_left()))
            action, reply = await self.next_action()
            if reply.ended == "time_ceiling":
                return (*await self.finalize("time_ceiling", partial=reply.text), "")
            if reply.ended == "cancelled":
                return "cancelled", "", ""
            if reply.ended == "error":
                return "error", "", reply.error
            if action is None:
                failed += 1
                if failed >= self.cfg.max_failed_steps:
                    return "error", "", f"{failed} steps in a row produced no valid action"
                pending = (f"Step {self.step} failed: {reply.error}.{self.tail()}", "note")
                continue
            failed = 0
            self.packer.add_assistant(reply.text)
            if action.tool == "finish":
                summary = str(action.args.get("summary", ""))
                problem = finish_problem(summary)
                if problem is None:
                    return "completed", summary, ""
                if bad_finish:
                    return "no_answer", "", no_answer_reason(problem)
                bad_finish = True
                pending = (RETRY_NOTE.format(problem=problem) + self.tail(), "note")
                continue
            verdict = self.guard.check(action.tool, action.args)
            if verdict != "run":
                msg = self.guard.corrective(action.tool, action.args)
                self.emit(
                    RepeatBlocked(self.step, action.tool, action.args, self.guard.error,
                                  self.guard.failures, msg, stuck=verdict == "stuck")
                )  # fmt: skip
                if verdict == "stuck":
                    return "stuck", "", self.guard.stuck_reason(action.tool, action.args)
                pending = (msg + self.tail(), "note")
                continue
            result = await self.run_tool(action)
            if result is None:
                return "cancelled", "", ""
            self.guard.record(action.tool, action.args, result.ok, result.text)
            pending = (
                observation(action.tool, result.ok, result.text) + self.tail(),
                "observation",
            )


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
        run.archived,
    )  # fmt: skip
