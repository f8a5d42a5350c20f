"""Runs one agent task for a stored session: the glue between the loop, the server and the store.

Why a separate layer: `loop.run_task` knows nothing about daemons, pins or files. Here
`SessionRunner` runs a session's turns on an `AgentHost` (`host.py`: what is fixed for one
daemon): the user's words are saved *before* the task starts, and whatever happens (completed,
cancelled from outside, a crash) the turn is saved after it: tool calls and results, request
telemetry, the outcome, and the packer's transcript. Where each request goes is the given
`SlotPolicy`'s business (`slot_policy.py`), else the host's pins.

The packer's transcript lives beside the session file (`transcript.py`); a resumed session
rebuilds its packer from it, so on the same daemon the prompt is byte-identical to the last one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from fusion_tui.agent.approval import ApprovalGate, Approver
from fusion_tui.agent.deadline import CancelToken
from fusion_tui.agent.events import (
    AgentEvent,
    EventSink,
    Outcome,
    RequestDone,
    StepFailed,
    ToolFinished,
    WorkerEvent,
)
from fusion_tui.agent.finish_check import INTERRUPTED
from fusion_tui.agent.host import AgentHost
from fusion_tui.agent.loop import AgentConfig, AgentDeps, TaskResult, compact_ahead, run_task
from fusion_tui.agent.prompt import PromptMessage, PromptPacker
from fusion_tui.agent.slot_policy import PolicySlots, SlotPolicy
from fusion_tui.agent.tools.workspace import Workspace
from fusion_tui.agent.transcript import load_transcript, save_transcript
from fusion_tui.clock import Clock, MonotonicClock
from fusion_tui.sessions import model as sm
from fusion_tui.sessions.store import SessionStore

AGENT_MIN_TOKENS = 2048
"""A step's answer may hold whole files: an answer cut at the chat's token cap writes nothing."""


def agent_config(settings: Any, workspace: str | None = None, **overrides: Any) -> AgentConfig:
    """An `AgentConfig` from `Settings` (agent.maxSteps, agent.task.*, agent.testCmd(s),
    llm.*) for the task's `workspace` folder, then overrides."""
    values: dict[str, Any] = {
        "max_steps": settings.agent.max_steps,
        "test_cmd": settings.agent.test_cmd_for(workspace) if workspace else None,
        "test_rounds": settings.agent.test_rounds,
        "retries": settings.agent.retries,
        "find_tests": settings.agent.find_tests,
        "long_files_in_part": settings.agent.long_files_in_part,
        "max_duration_ms": settings.agent.task.max_duration_ms,
        "finalization_ms": settings.agent.task.finalization_ms,
        "n_predict": settings.agent.max_tokens or max(settings.llm.max_tokens, AGENT_MIN_TOKENS),
        "fit_whole_files": settings.agent.max_tokens is None,
        "summary_n_predict": min(
            AgentConfig.summary_n_predict, settings.agent.max_tokens or settings.llm.max_tokens
        ),
        "sampling": {"temperature": settings.llm.temperature},
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    return AgentConfig(**values)


def resume_packer(host: AgentHost, messages: list[PromptMessage]) -> PromptPacker:
    """The session's transcript on this daemon's frame and prefix, ready for a new task."""
    packer = PromptPacker(host.frame, host.stable_prefix, list(messages))
    if packer.awaiting_reply:  # the last task stopped before the model answered
        packer.add_assistant(INTERRUPTED, kind="interrupted")
    return packer


# --- running a turn ---------------------------------------------------------------------------


@dataclass
class TurnReport:
    """What one task did to the session (the session itself is already saved)."""

    outcome: Outcome
    session: sm.Session
    result: TaskResult | None = None
    error: str = ""
    save_error: str | None = None
    tools: list[ToolFinished] = field(default_factory=list)


class SessionRunner:
    """Runs a session's agent turns on a host; approvals granted "always" last for the runner."""

    def __init__(
        self,
        host: AgentHost,
        store: SessionStore,
        session: sm.Session,
        *,
        workspace: Workspace,
        approver: Approver,
        config: AgentConfig | None = None,
        clock: Clock | None = None,
        wall_clock: sm.WallClock = time.time,
        slots: SlotPolicy | None = None,
    ) -> None:
        self.host = host
        self.slots = slots
        """The shared slot policy (its pool and gate are the host's); None: the host's pins."""
        self.store = store
        self.session = session
        self.workspace = workspace
        self.gate = ApprovalGate(approver)
        self.config = config or AgentConfig()
        self.clock = clock or MonotonicClock()
        self.wall_clock = wall_clock
        """What turns and requests are stamped with."""
        stored = load_transcript(store, session.id)
        self._messages: list[PromptMessage] = stored["messages"] if stored else []
        self._archived: list[dict[str, Any]] = stored["archived"] if stored else []
        server, slot = session.server, session.pinned_slot
        same = server is not None and server.same_server(host.identity)
        if slots is None and same and slot is not None:
            host.pool.pin(session.id, slot)  # warm resume on its own slot

    async def _count_tokens(self, text: str) -> int:
        return len(await self.host.current.client.tokenize(text))

    def _save(self) -> str | None:
        return self.store.try_save(self.session)

    def _save_step(self) -> None:
        """A finished step reaches the disk at once: a kill (SIGTERM, SIGKILL) later keeps it.
        A failure here is said by the turn's final save, which tries again."""
        self.session.touch()
        self._save()

    async def run(
        self,
        task: str,
        *,
        on_event: EventSink | None = None,
        cancel: CancelToken | None = None,
    ) -> TurnReport:
        """Run `task` to an outcome and save the turn; a failure is reported, never raised
        (only an outer cancellation propagates, after the turn is saved as `cancelled`)."""
        session = self.session
        session.begin_turn(task, workspace=str(self.workspace.root), clock=self.wall_clock)
        early_save = self._save()  # the user's words reach the disk before anything can fail
        tools: list[ToolFinished] = []
        if self.slots is not None:  # where the task's first request goes, by the one policy
            brand_new = session.brand_new
            await self.slots.warm_resume()
            slot = await self.slots.next_slot()
            self.slots.take_notes()
            if slot >= 0:
                self.host.pool.pin(session.id, slot)
                if brand_new:  # another agent session's system prompt and tools, copied in
                    prefix = self.host.stable_prefix
                    await self.slots.seed(slot, self.host.prefix_hash, len(prefix) // 4)
        packer = resume_packer(self.host, self._messages)
        sink = on_event or (lambda _e: None)

        reused_checked: list[bool] = []

        def record(event: AgentEvent) -> None:
            inner = event.event if isinstance(event, WorkerEvent) else event
            if isinstance(inner, RequestDone) and self.host.routing is not None:  # endpoints
                main = not isinstance(event, WorkerEvent)
                inner = self.host.routing.annotate(inner, main=main)
                event = inner if main else replace(event, event=inner)  # type: ignore[arg-type]
            if isinstance(inner, RequestDone):
                _record_request(session, inner, self.wall_clock)
                if self.slots is not None and inner is event and not reused_checked:
                    reused_checked.append(True)  # the task's first answer: as promised?
                    self.slots.answered_reusing(inner.cache_n)
            elif isinstance(event, ToolFinished):
                tools.append(event)
                session.messages.append(_tool_message(event))
                self._save_step()
            elif isinstance(event, StepFailed):
                session.messages.append(
                    sm.Message(
                        role="assistant",
                        content=event.raw,
                        partial=True,
                        partial_reason=f"invalid step: {event.error}",
                    )
                )
                self._save_step()
            sink(event)

        deps = self._deps(record)
        result: TaskResult | None = None
        outcome: Outcome = "cancelled"
        error = ""
        try:
            result = await run_task(
                task, session_id=session.id, deps=deps, config=self.config, cancel=cancel,
                resume=packer,
            )  # fmt: skip
            outcome, error = result.outcome, result.error
        except Exception as exc:  # a bug or an unexpected failure: the turn is still saved
            outcome, error = "error", f"{type(exc).__name__}: {exc}"
        finally:
            save_error = self._finish(result, packer, outcome, error)
        return TurnReport(outcome, session, result, error, save_error or early_save, tools)

    def _deps(self, on_event: EventSink) -> AgentDeps:
        return AgentDeps(
            completion=self.host.completion(),
            slots=self.host.pool if self.slots is None else PolicySlots(self.host.pool, self.slots),
            gate=self.gate,
            workspace=self.workspace,
            frame=self.host.frame,
            stable_prefix=self.host.stable_prefix,
            n_ctx=self.host.n_ctx,
            context_size=None if self.host.routing is None else lambda: self.host.n_ctx,
            prefix_reuse=self.host.machine.prefix_reuse,
            clock=self.clock,
            on_event=on_event,
            delegate=self.host.delegate,
            count_tokens=self._count_tokens,
        )

    async def compact_ahead(
        self, *, on_event: EventSink | None = None, cancel: CancelToken | None = None
    ) -> bool:
        """After a turn, while its outcome is read: compact the transcript now when the next
        task would not fit it, so that task's first token waits for no summary (the chat does
        the same after an answer). Saved at once; False when nothing was due or it failed (the
        next task compacts before its first step when it must)."""
        sink = on_event or (lambda _e: None)

        def record(event: AgentEvent) -> None:
            if isinstance(event, RequestDone):
                _record_request(self.session, event, self.wall_clock)
            sink(event)

        try:
            ahead = await compact_ahead(
                session_id=self.session.id, deps=self._deps(record), config=self.config,
                packer=resume_packer(self.host, self._messages), cancel=cancel,
            )  # fmt: skip
        except Exception:  # a fault of any kind: the next task compacts before it if it must
            return False
        if ahead is None:
            return False
        packer, archived = ahead
        self._messages, self._archived = list(packer.messages), self._archived + archived
        try:
            save_transcript(self.store, self.session.id, packer, self._archived)
        except OSError:
            return False
        self._save()
        return True

    def _finish(
        self, result: TaskResult | None, packer: PromptPacker, outcome: Outcome, error: str
    ) -> str | None:
        session = self.session
        final = result.packer if result is not None else packer
        if result is not None:
            self._archived += result.archived
        self._messages = list(final.messages)
        summary = result.summary if result is not None else ""
        slot = self.host.pool.pins.get(session.id)
        if slot is not None:
            session.pinned_slot = slot
            session.server = self.host.identity
            if self.slots is not None:
                self.slots.pin_answer(slot)  # the shared ledger: this session holds the slot
        if self.host.routing is not None:  # several endpoints: the endpoint the pin is on
            self.host.routing.finish(session)
        session.prefix_hash = self.host.prefix_hash
        steps = result.steps if result is not None else 0
        detail = error or f"{steps} step(s)"
        session.end_turn(outcome, summary, detail, self.wall_clock)
        problems = []
        try:
            save_transcript(self.store, session.id, final, self._archived)
        except OSError as exc:
            problems.append(f"could not save the agent transcript: {exc}")
        err = self._save()
        if err:
            problems.append(err)
        return "; ".join(problems) or None


def _record_request(session: sm.Session, event: RequestDone, clock: sm.WallClock) -> None:
    ttft = event.ttft_ms if event.ttft_ms is not None else event.duration_ms
    record = session.record_request(
        id_slot=event.id_slot,
        prompt_n=event.prompt_n,
        cache_n=event.cache_n,
        ttft_ms=ttft,
        predicted_per_second=event.predicted_per_second,
        side_call=event.purpose == "compaction",
        clock=clock,
    )
    if event.endpoint is not None:  # several endpoints: where it ran, and where it came from
        session.requests[-1] = replace(record, endpoint=event.endpoint, moved_from=event.moved_from)


def _tool_message(event: ToolFinished) -> sm.Message:
    status = "ok" if event.ok else "error"
    return sm.Message(
        role="tool",
        content=f"{event.name} ({status}, {event.duration_ms:.0f} ms)",
        tool_name=event.name,
        tool_arguments=dict(event.args),
        tool_result=event.result,
    )


def open_session(
    store: SessionStore, session_id: str | None, workspace: str | None = None
) -> sm.Session:
    """The stored session (`SessionNotFound`, `SessionFileError`), or a new one."""
    if session_id is None:
        return sm.Session.new(workspace=workspace)
    session = store.load(session_id)
    load_transcript(store, session_id)  # a damaged transcript is said now, not mid-run
    return session
