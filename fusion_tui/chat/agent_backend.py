"""Provides `AgentBackend`: the chat's turns run as agent tasks in a workspace.

It speaks the same `Backend` protocol as `LocalBackend`, so the main screen needs nothing new
but a tool block: each user message becomes one `run_task` (through `session_run`), and the
agent's events are translated into reply events (step notices, prompt progress, request
telemetry, `ToolBlock`s, the summary as text, then `ReplyDone` with the outcome).

Cancel: the consumer closing the stream (Esc) sets the task's cancel token and waits for the
loop to close its request and save the turn, so a cancelled turn is on disk as `cancelled`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

from fusion_tui.agent.approval import Approver, DenyAll
from fusion_tui.agent.checks import check_label
from fusion_tui.agent.deadline import CancelToken
from fusion_tui.agent.endpoint_run import place_run
from fusion_tui.agent.events import (
    AgentEvent,
    PromptProgressed,
    RepeatBlocked,
    RequestDone,
    Retried,
    StepFailed,
    StepStarted,
    TestRan,
    ToolFinished,
    ToolStarted,
    TranscriptCompacted,
    WorkerEvent,
    retry_line,
)
from fusion_tui.agent.host import AgentHost
from fusion_tui.agent.session_run import (
    SessionRunner,
    TurnReport,
    agent_config,
    open_session,
)
from fusion_tui.agent.tools.workspace import Workspace
from fusion_tui.chat.agent_host import open_host, said_events
from fusion_tui.chat.backend import (
    Said,
    SessionCatalog,
    SlotView,
    StatusCallback,
    Unavailable,
    said,
)
from fusion_tui.chat.endpoint_turns import FailoverAsker
from fusion_tui.chat.endpoint_view import follow, grouped_view
from fusion_tui.chat.events import Compacted, Notice, Progress, ReplyDone, ReplyEvent, ToolBlock
from fusion_tui.chat.live_step import LiveStepTracker
from fusion_tui.chat.server_stop import stop_beside_remote, stop_own_daemon
from fusion_tui.config import Settings
from fusion_tui.endpoints.placement import Placement
from fusion_tui.endpoints.session_pins import EndpointPins, wants_endpoints
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection, connect, release, stops_on_exit
from fusion_tui.server.errors import ServerError
from fusion_tui.server.sigill_recovery import sigill_after_serving
from fusion_tui.server.types import StreamEnd, TextDelta, Timings
from fusion_tui.sessions.model import Session
from fusion_tui.sessions.store import SessionStore
from fusion_tui.slots.keeper import SlotKeeper
from fusion_tui.status import ServerStatus

Connect = Callable[..., Awaitable[Connection]]


def reply_events(event: AgentEvent) -> list[ReplyEvent]:
    """What the chat shows for one agent event (the JSON actions themselves are not prose)."""
    if isinstance(event, WorkerEvent):
        inner = event.event
        if isinstance(inner, ToolFinished):
            return [_block(inner, f"worker {event.worker} · {inner.name}")]
        if isinstance(inner, StepStarted):
            return [Notice(f"worker {event.worker}: step {inner.step}/{inner.max_steps}")]
        return []
    if isinstance(event, StepStarted):
        return [Notice(f"step {event.step}/{event.max_steps} · {_left(event.time_left_ms)} left")]
    if isinstance(event, PromptProgressed):
        return [Progress(event.processed, event.total, event.cache, event.tok_s)]
    if isinstance(event, RequestDone) and event.ended == "ok":
        timings = Timings(
            prompt_n=event.prompt_n,
            cache_n=event.cache_n,
            predicted_n=event.predicted_n,
            predicted_per_second=event.predicted_per_second,
        )
        return [StreamEnd(id_slot=event.id_slot, timings=timings)]
    if isinstance(event, ToolStarted):
        return [Notice(f"step {event.step}: running {event.name}")]
    if isinstance(event, ToolFinished):
        return [_block(event, event.name)]
    if isinstance(event, StepFailed):
        return [Notice(f"step {event.step}: no valid action ({event.error})")]
    if isinstance(event, RepeatBlocked):  # the loop guard: shown as a failed, unrun call
        verdict = "stuck" if event.stuck else "not run again"
        note = f"made {event.times}× · {verdict}"
        name, args = event.shown()
        block = ToolBlock(name, args, event.message, False, note=note)
        return [Notice(f"step {event.step}: {name} repeated · {verdict}"), block]
    if isinstance(event, Retried):
        return [Notice(f"attempt {event.attempt} of {event.attempts}: {retry_line(event)}")]
    if isinstance(event, TranscriptCompacted):
        return [Notice(f"compacted the transcript: {event.note}")]
    if isinstance(event, TestRan):
        return [test_block(event)]
    return []


def test_block(event: TestRan) -> ToolBlock:
    """A run of the task's test command, as a block: its verdict in the title, the end of its
    output inside."""
    if event.ok:
        verdict = "passed"
    else:
        verdict = "timed out" if event.exit is None else f"failed (exit {event.exit})"
    when = "before edits" if event.round == 0 else f"round {event.round}"
    return ToolBlock(
        "tests", {"command": check_label(event.command)}, event.tail, event.ok, event.duration_ms,
        note=f"{verdict} · {when}",
    )  # fmt: skip


def _block(event: ToolFinished, name: str) -> ToolBlock:
    return ToolBlock(
        name=name,
        args=dict(event.args),
        result=event.result,
        ok=event.ok,
        duration_ms=event.duration_ms,
        diff=event.detail,
    )


def _left(ms: int) -> str:
    minutes, seconds = divmod(max(0, ms) // 1000, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


def outcome_note(report: TurnReport) -> str:
    """The footnote of the turn: outcome, steps, and what the last request cost."""
    steps = report.result.steps if report.result is not None else 0
    parts = [report.outcome, f"{steps} step{'s' if steps != 1 else ''}"]
    requests = [r for r in (report.result.requests if report.result else []) if r.ended == "ok"]
    if requests:
        last = requests[-1]
        total = last.prompt_n + last.cache_n
        parts.append(f"slot {last.id_slot} · {last.cache_n:,} of {total:,} prompt tokens cached")
    if report.result is not None and report.result.changed:
        parts.append("changed " + ", ".join(report.result.changed))
    if report.result is not None and report.result.checked:
        parts.append(report.result.checked)
    if report.error:
        parts.append(report.error.splitlines()[0])
    if report.save_error:
        parts.append(f"not saved: {report.save_error}")
    return " · ".join(parts)


class AgentBackend:
    """The backend of the TUI's agent mode (`fusion-tui --workspace DIR`)."""

    def __init__(
        self,
        settings: Settings,
        paths: AppPaths,
        workspace: Path | str,
        *,
        model: str | None = None,
        resume: str | None = None,
        approver: Approver | None = None,
        connect_fn: Connect = connect,
    ) -> None:
        self.settings = settings
        self.paths = paths
        self.model = model
        self.workspace = Workspace(workspace)  # ToolError: not a directory, or a system folder
        self.store = SessionStore.default(paths)
        self.session = self._open_session(resume)
        self.store.claim(self.session.id)  # SessionLocked: another instance has it open
        self.approver: Approver = approver or DenyAll()
        """Asked before every write and command; fixed for the backend's life (the TUI's
        modal, or the headless rules)."""
        self.connect_fn = connect_fn
        self.conn: Connection | None = None
        self.host: AgentHost | None = None
        self.runner: SessionRunner | None = None
        self.keeper = SlotKeeper(self.store, self.session)
        """The slot policy every path shares (fresh slot, warm resume, save on leaving)."""
        # several endpoints (None with one: the single-server app, unchanged)
        self.endpoints = EndpointPins(settings) if wants_endpoints(settings) else None
        self._primary: Connection | None = None
        self._notes: list[str] = []
        self._ask = approver.ask_failover if isinstance(approver, FailoverAsker) else None
        """Asked before the session moves to another endpoint (the TUI); None: move, said."""
        self._unasked: Placement | None = None
        """A move found when the session was placed, not asked about yet (asked on its turn)."""

    def _open_session(self, resume: str | None) -> Session:
        if resume == "":
            entries = [e for e in self.store.list() if e.ok]
            resume = max(entries, key=lambda e: e.updated).id if entries else None
        session = open_session(self.store, resume)
        session.workspace = session.workspace or str(self.workspace.root)
        return session

    async def start(self, report: StatusCallback) -> ServerStatus:
        if self.endpoints is not None:  # several endpoints: the managed server or the best remote
            conn = await self.endpoints.connect(
                self.connect_fn, self.settings, self.paths, report, model=self.model
            )
            self._primary = conn
            return await self.adopt(conn)
        conn = await self.connect_fn(self.settings, self.paths, report, model=self.model)
        return await self.adopt(conn)

    async def adopt(self, conn: Connection) -> ServerStatus:
        self.conn = conn
        route = None
        self._unasked = None
        if self.endpoints is None:
            self.keeper.attach(conn)
        else:  # several endpoints: the session's; the keeper goes there (`open_host`)
            if conn is not self._primary:  # F2's launch: the managed endpoint's connection
                self._primary = self.endpoints.adopt(conn)
            said: list[str] = []
            route = await place_run(self.endpoints, conn, self.session, said.append)
            if self._ask is not None and route.placement.action == "move":
                self._unasked = route.placement  # the TUI asks before the turn runs there
            else:
                self._notes += said
        self.host = await open_host(
            self.keeper, conn, self.settings, pins=self.endpoints, route=route,
            say=self._notes.append, ask=self._ask,
        )  # fmt: skip
        self.runner = self._runner()
        return conn.status

    async def _follow_move(self) -> None:
        """The last task moved to another endpoint: the host is opened there (its
        facts, prefix and context are that server's) before the next one."""
        host = self.host
        if host is not None and host.current is not host.conn and self.conn is not None:
            await self.adopt(self.conn)

    def _runner(self) -> SessionRunner | None:
        if self.host is None:
            return None
        return SessionRunner(
            self.host, self.store, self.session, workspace=self.workspace,
            approver=self.approver, slots=self.keeper,
            config=agent_config(self.settings, str(self.workspace.root)),
        )  # fmt: skip

    # --- sessions ------------------------------------------------------------------------------

    async def compact(self) -> str | None:
        raise Unavailable(
            "an agent session compacts its transcript itself when it nears the slot's context"
        )

    async def new_session(self) -> str | None:
        self.session = self._open_session(None)
        note = await self.keeper.switch(self.session)  # the left session's slot saved first
        if self.endpoints is not None and self.conn is not None:  # several endpoints: placed afresh
            await self.adopt(self.conn)
        self.runner = self._runner()
        return note

    async def open_session(self, session_id: str) -> str | None:
        self.session = self._open_session(session_id)
        note = await self.keeper.switch(self.session)
        if (
            self.endpoints is not None and self.conn is not None
        ):  # several endpoints: back on its own
            await self.adopt(self.conn)
        self.runner = self._runner()
        return note

    def sessions(self) -> SessionCatalog:
        return self.store

    def current_session_id(self) -> str | None:
        return self.session.id

    async def make_title(self) -> str | None:
        return None  # the first message titles an agent session

    async def read_ahead(self) -> None:
        return None  # an agent's next prompt is its task and tool results: nothing to read yet

    # --- the server ----------------------------------------------------------------------------

    async def stop_server(self) -> str | None:
        """As the plain chat's Stop server (`chat.server_stop`): save the session's slot and
        every other session's, then stop the managed daemon, never an external server. With
        several endpoints and the session on a remote one, only the managed server here stops,
        the sentence says so, and the session keeps working there."""
        here = self.host.current if self.host is not None else self.keeper.conn
        said = await stop_beside_remote(self.settings, self.paths, self.endpoints, here)
        if said is not None:
            return said
        await stop_own_daemon(self.keeper, self.settings, self.paths)
        self.conn, self.host, self.runner = None, None, None  # F5 connects again
        return None

    def slot_view(self) -> SlotView | None:
        if self.keeper.conn is None:
            return None
        if self.endpoints is not None:  # every endpoint's slots, grouped
            return grouped_view(self.keeper, self.endpoints)  # current: the keeper's endpoint
        return self.keeper

    async def died_of_sigill(self) -> bool:
        return await sigill_after_serving(self.settings, self.paths, self.conn)

    def history(self) -> list[Said]:
        return [
            said(m)
            for m in self.session.messages
            if m.role in ("user", "assistant") and (m.content or m.partial)
        ]

    async def close(self) -> None:
        conn, self.conn = self.conn, None
        try:
            if conn is not None:
                try:
                    if self.keeper.conn is not None:
                        await self.keeper.leave()  # its slot saved for a warm resume
                        if stops_on_exit(self.settings, conn):
                            follow(
                                self.keeper, conn
                            )  # with several endpoints: the server that stops
                            await self.keeper.save_others()
                finally:
                    self.keeper.detach()
                    await release(self.settings, self.paths, conn)
        finally:
            if self.endpoints is not None:  # the clients the endpoints made
                await self.endpoints.aclose()

    async def _approve_move(self) -> str | None:
        """Before a turn, a move found when the session was placed is asked about:
        None to go on (moved, or its endpoint is back), else why the turn waits."""
        placed, pins = self._unasked, self.endpoints
        if placed is None or pins is None or self._ask is None or self.conn is None:
            return None
        gone = placed.moved_from
        if gone is not None:
            await pins.watcher.poll_once(labels=(gone,))
            home = pins.watcher.latest(gone)
            if home is not None and home.healthy:  # it came back: placed there again
                pins.forget(self.session.id)
                await self.adopt(self.conn)
                return None
        if await self._ask(placed):
            self._unasked = None
            self._notes.append(placed.reason)
            return None
        return f"{placed.reason.split(';')[0]}; waiting (your message is kept)"

    def _keep_words(self, text: str, why: str) -> None:
        """The turn did not run: the user's words are saved with an `error` turn."""
        self.session.begin_turn(text, workspace=str(self.workspace.root))
        self.session.end_turn("error", None, why)
        self.store.try_save(self.session)

    async def reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        await self._follow_move()
        wait = await self._approve_move()
        if wait is not None:
            self._keep_words(text, wait)
            yield ReplyDone("error", note=f"error · {wait}", partial=True)
            return
        runner = self.runner
        if runner is None:
            raise ServerError("the server is not connected yet")
        queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        cancel = CancelToken()
        task: asyncio.Task[TurnReport] = asyncio.create_task(
            runner.run(text, on_event=queue.put_nowait, cancel=cancel)
        )
        task.add_done_callback(lambda _t: queue.put_nowait(None))
        live = LiveStepTracker()
        shown: list[str] = []
        try:
            while (event := await queue.get()) is not None:
                told = said_events(self._notes, self.host, self.endpoints, shown)
                for out in [*told, *live.fold(event), *reply_events(event)]:
                    yield out
            report = task.result()
            for out in said_events(self._notes, self.host, self.endpoints, shown):
                yield out
            summary = report.result.summary if report.result is not None else ""
            if summary:
                yield TextDelta(summary)
            partial = report.outcome != "completed"
            yield ReplyDone(report.outcome, note=outcome_note(report), partial=partial)
        finally:
            if not task.done():  # the consumer went away (Esc): stop the task, let it save
                cancel.cancel()
                await _settle(task)
        if report.outcome != "cancelled":
            async with aclosing(self.compact_ahead(runner)) as after:
                async for notice in after:
                    yield notice

    async def compact_ahead(self, runner: SessionRunner) -> AsyncGenerator[Notice, None]:
        """After an answered task, while its outcome is read: the transcript compacted when the
        next task would not fit it (`SessionRunner.compact_ahead`), said while it runs. The
        user's next message closes these events, which cuts it short; that task then compacts
        before its first step if it must."""
        queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        cancel = CancelToken()
        task = asyncio.create_task(runner.compact_ahead(on_event=queue.put_nowait, cancel=cancel))
        task.add_done_callback(lambda _t: queue.put_nowait(None))
        said = False
        try:
            while (event := await queue.get()) is not None:
                if not said:  # a request went out: it was due
                    said = True
                    yield Notice("compacting the session ahead of the next task…")
                if isinstance(event, TranscriptCompacted):
                    note = f"compacted the transcript ahead of the next task: {event.note}"
                    yield Compacted(note)
        finally:
            if not task.done():
                cancel.cancel()
                await _settle(task)


async def _settle(task: asyncio.Task[Any]) -> None:
    """Wait for the cancelled task to save its turn, even if we are cancelled again."""
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                break
            continue
        except Exception:
            break
