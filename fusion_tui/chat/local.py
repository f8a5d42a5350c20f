"""Provides `LocalBackend`: chat turns of one session against a (managed or external) server.

Each turn rides the session's pinned slot, one request in flight per slot, and the session is
saved atomically after every turn, also a cancelled or failed one. A brand-new session's first
request names an empty slot no known session holds (else `-1`): with `-1` a shared system prompt
can pass the server's similarity threshold and evict a short session from its slot. A resumed
session's first request goes `-1`, so the server finds the slot holding its prompt; the answer's
`id_slot` is pinned.

Warm resume: on the same server the first request goes `-1` and lands on the slot still holding
the prompt; on a new daemon the session's saved slot file is restored into a free slot first and
pinned (refused, with the reason, when it was made for another model or context). The slot is
saved when the session is left, when the app exits and before the daemon this app owns stops.

Until the first byte, `watch_first_token` polls `/slots` next to the stream; a request that got
no data at all (lost, stalled, connection dropped) is retried once on the same slot.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from fusion_tui.chat.backend import StatusCallback
from fusion_tui.chat.events import Notice, Progress, ReplyDone, ReplyEvent
from fusion_tui.chat.resume import ResumeState, WarmResume
from fusion_tui.chat.titles import TITLE_TOKENS, clean_title, title_messages
from fusion_tui.chat.warm import (
    archive_for,
    first_event,
    save_sessions_before_stop,
    server_facts,
    watch_config,
)
from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.runtime import Connection, connect, make_daemon
from fusion_tui.server.errors import (
    ContextExceeded,
    ProtocolError,
    ServerError,
    ServerUnreachable,
    StreamStalled,
)
from fusion_tui.server.types import PromptProgress, StreamEnd, StreamEvent, TextDelta
from fusion_tui.sessions.model import Message, RequestRecord, Session, TurnRecord
from fusion_tui.sessions.store import SessionStore, SessionStoreError
from fusion_tui.slots.archive import (
    DEFAULT_MAX_BYTES,
    SlotArchive,
)
from fusion_tui.slots.gate import SlotGate, slots_busy_probe, waiting_message
from fusion_tui.slots.pins import SlotPool
from fusion_tui.slots.progress import ProgressTracker
from fusion_tui.slots.watch import REAL_CLOCK, Clock, FirstTokenStall
from fusion_tui.status import ServerStatus

SYSTEM_PROMPT = (
    "You are a concise, careful coding assistant running on the user's own machine. "
    "Answer in Markdown; put code in fenced blocks."
)
Connector = Callable[..., Awaitable[Connection]]
NO_DATA = (FirstTokenStall, ServerUnreachable, ProtocolError)
"""Failures that, before any event arrived, mean the request got no answer: retried once."""


@dataclass
class _Flag:
    data: bool = False


class LocalBackend(WarmResume):
    """The real backend used by the TUI and by `fusion-tui run`."""

    def __init__(
        self,
        settings: Settings,
        paths: AppPaths,
        *,
        model: str | None = None,
        resume: str | None = None,
        clock: Any = time.monotonic,
        watch_clock: Clock = REAL_CLOCK,
        connector: Connector | None = None,
        archive_max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.settings = settings
        self.paths = paths
        self.model = model
        self.resume = resume
        self.clock = clock
        self.watch_clock = watch_clock
        self.connector = connector or connect
        self.archive_max_bytes = archive_max_bytes
        self.store = SessionStore.default(paths)
        self.pool = SlotPool()
        self.conn: Connection | None = None
        self.gate: SlotGate | None = None
        self.archive: SlotArchive | None = None
        self.session = self._open_session(resume)
        self.store.claim(self.session.id)  # SessionLocked: another instance has it open
        self._resume: ResumeState | None = None
        self._resume_checked = False
        self._side_slot: int | None = None
        self._live_totals: dict[int, int] = {}
        self.save_error: str | None = None
        """The last save failure, shown to the user; the session stays in memory."""

    def _open_session(self, resume: str | None) -> Session:
        if resume is None:
            return Session.new()
        if resume == "":
            entries = [e for e in self.store.list() if e.ok]
            if not entries:
                return Session.new()
            resume = max(entries, key=lambda e: e.updated).id
        return self.store.load(resume)

    # --- Backend -------------------------------------------------------------------------------

    async def start(self, report: StatusCallback) -> ServerStatus:
        conn = await self.connector(self.settings, self.paths, report, model=self.model)
        return self.adopt(conn)

    def adopt(self, conn: Connection) -> ServerStatus:
        """Take over a connection made elsewhere (the launch wizard) instead of connecting."""
        self.conn = conn
        props = conn.props
        self.pool.update(props.total_slots, props.model_path, conn.launch_id)
        self.gate = SlotGate(
            lambda: self.pool.total_slots, busy_probe=slots_busy_probe(conn.client.slots)
        )
        self.archive = archive_for(conn, self.archive_max_bytes)
        return conn.status

    def history(self) -> list[tuple[str, str]]:
        return [
            (m.role, m.content) for m in self.session.messages if m.role in ("user", "assistant")
        ]

    async def close(self) -> None:
        """Save the session's slot, close the client; stop the daemon this app launched (after
        saving every session's slot) unless told to keep it."""
        conn = self.conn
        if conn is None:
            return
        stopping = conn.launched and not self.settings.local_models.managed.keep_running
        try:
            await self.leave()
            if stopping and self.archive is not None:
                await save_sessions_before_stop(
                    conn.client,
                    self.archive,
                    self.store,
                    server_facts(conn),
                    self.pool.total_slots,
                    skip=frozenset({self.session.id}),
                )
        finally:
            self.conn = None
            await conn.client.aclose()
            if stopping:
                await make_daemon(self.settings, self.paths).stop()

    def chat_messages(self) -> list[dict[str, str]]:
        """The request's messages: a fixed system prompt, then the transcript, append-only."""
        out = [{"role": "system", "content": SYSTEM_PROMPT}]
        out += [
            {"role": m.role, "content": m.content}
            for m in self.session.messages
            if m.role in ("user", "assistant") and m.content
        ]
        return out

    # --- warm resume ---------------------------------------------------------------------------

    # --- turns ---------------------------------------------------------------------------------

    async def reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        if self.conn is None or self.gate is None:
            raise ServerError("the server is not connected yet")
        session = self.session
        if not session.title:
            session.title = " ".join(text.split())[:60]
        session.messages.append(Message(role="user", content=text))
        answer: list[str] = []
        outcome, detail = "cancelled", "cancelled"
        try:
            for note in await self.warm_resume():
                yield Notice(note)
            slot = self.pool.slot_for(session.id)
            if slot < 0 and not any(not r.side_call for r in session.requests):
                slot = await self._fresh_slot()
            for attempt in (1, 2):
                got = _Flag()
                try:
                    # aclosing: a cancelled turn must release the slot's lock in this task
                    async with aclosing(self._attempt(slot, got)) as events:
                        async for event in events:
                            if isinstance(event, TextDelta):
                                answer.append(event.text)
                            yield event
                    break
                except NO_DATA as exc:
                    if got.data or attempt == 2:
                        raise
                    where = f"slot {slot}" if slot >= 0 else "the slot the server picks"
                    yield Notice(f"no data from llama-server ({exc}); retrying once on {where}")
            outcome, detail = "completed", self._cost_note()
        except StreamStalled as exc:
            outcome, detail = "error", self._stall_message(exc)
            yield ReplyDone("error", note=f"error · {detail}", partial=True)
            return
        except ContextExceeded as exc:
            outcome, detail = "error", context_full_message(exc)
            yield ReplyDone("error", note=f"error · {detail}", partial=True)
            return
        except ServerError as exc:
            outcome, detail = "error", str(exc)
            yield ReplyDone("error", note=f"error · {exc}", partial=True)
            return
        finally:
            self._finish_turn("".join(answer), outcome, detail)
        yield ReplyDone("completed", note=detail)

    def _stall_message(self, exc: StreamStalled) -> str:
        if isinstance(exc, FirstTokenStall):
            return f"after one retry: {exc}"
        idle = self.settings.local_models.request_timeout_ms / 1000
        if "middle of an answer" in str(exc):
            return (
                f"the answer stalled: no bytes from llama-server for {idle:g} s "
                "(localModels.requestTimeoutMs); the partial answer is kept"
            )
        return str(exc)

    def _open_stream(self, body: dict[str, Any]) -> AsyncGenerator[StreamEvent, None]:
        """The HTTP stream of one request (tests swap the endpoint)."""
        assert self.conn is not None
        idle = self.settings.local_models.request_timeout_ms / 1000
        return self.conn.client.stream_chat(body, idle_timeout=idle)

    async def _attempt(self, slot: int, got: _Flag) -> AsyncGenerator[ReplyEvent, None]:
        """One request on `slot`: gate, stream with the first-token watch, progress, record."""
        assert self.gate is not None
        if slot >= 0 and self.gate.is_held(slot):
            yield Notice(waiting_message(slot))
        async with self.gate.hold(slot) as lease:
            started = self.clock()
            first: float | None = None
            tracker = ProgressTracker()
            try:
                async with aclosing(self._open_stream(self._body(lease.slot))) as events:
                    it = events.__aiter__()
                    event = await self._first_event(it, lease.slot)
                    if event is None:
                        raise ProtocolError(
                            "llama-server closed the stream without sending anything"
                        )
                    while event is not None:
                        got.data = True
                        if isinstance(event, TextDelta):
                            first = self.clock() if first is None else first
                            yield event
                        elif isinstance(event, PromptProgress):
                            if lease.slot >= 0:
                                self._live_totals[lease.slot] = event.total
                            yield event
                            p = tracker.on_event(event)
                            yield Progress(
                                p.processed, p.total, p.cache, p.tokens_per_second, p.eta_s
                            )
                        elif isinstance(event, StreamEnd):
                            ttft = ((first or self.clock()) - started) * 1000
                            self._record_request(event, ttft)
                            yield event
                        event = await anext(it, None)
            finally:
                self._live_totals.pop(lease.slot, None)

    async def _first_event(self, it: AsyncIterator[StreamEvent], slot: int) -> StreamEvent | None:
        assert self.conn is not None
        config = watch_config(self.settings)
        return await first_event(it, self.conn.client.slots, slot, config, self.watch_clock)

    def _body(self, slot: int) -> dict[str, Any]:
        return {
            "messages": self.chat_messages(),
            "id_slot": slot,
            "cache_prompt": True,
            "return_progress": True,
            "n_predict": self.settings.llm.max_tokens,
            "temperature": self.settings.llm.temperature,
        }

    # --- side calls ----------------------------------------------------------------------------

    async def make_title(self) -> str | None:
        """Title the session with a short side call on the side-call slot (never the session's
        own, unless the pool has one slot); saves the session. None when there is nothing to
        title from or the model said nothing usable."""
        if self.conn is None or self.gate is None:
            raise ServerError("the server is not connected yet")
        session = self.session
        first = next((m.content for m in session.messages if m.role == "user"), "")
        if not first.strip():
            return None
        own = self.pool.pins.get(session.id)
        side = self.pool.side_call_slot(busy=self.gate.held, avoid=() if own is None else (own,))
        body = {
            "messages": title_messages(first),
            "cache_prompt": True,
            "n_predict": TITLE_TOKENS,
            "temperature": 0.0,
        }
        pieces: list[str] = []
        self._side_slot = side if side >= 0 else None
        async with self.gate.hold(side) as lease:
            started = self.clock()
            first_at: float | None = None
            async with aclosing(self._open_stream({**body, "id_slot": lease.slot})) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        first_at = self.clock() if first_at is None else first_at
                        pieces.append(event.text)
                    elif isinstance(event, StreamEnd):
                        ttft = ((first_at or self.clock()) - started) * 1000
                        session.requests.append(self._request_record(event, ttft, side=True))
        title = clean_title("".join(pieces))
        if not title:
            return None
        session.title = title
        self._save()
        return title

    # --- records -------------------------------------------------------------------------------

    def _request_record(self, end: StreamEnd, ttft_ms: float, *, side: bool) -> RequestRecord:
        t = end.timings
        return RequestRecord(
            id_slot=end.id_slot,
            prompt_n=t.prompt_n,
            cache_n=t.cache_n,
            ttft_ms=round(ttft_ms, 1),
            predicted_per_second=round(t.predicted_per_second, 2),
            time=time.time(),
            side_call=side,
        )

    def _record_request(self, end: StreamEnd, ttft_ms: float) -> None:
        session = self.session
        self.pool.pin(session.id, end.id_slot)
        session.pinned_slot = self.pool.pins.get(session.id)
        session.server = self.identity()
        session.requests.append(self._request_record(end, ttft_ms, side=False))

    def _cost_note(self) -> str:
        own = [r for r in self.session.requests if not r.side_call]
        if not own:
            return ""
        last = own[-1]
        total = last.prompt_n + last.cache_n
        cached = f"{last.cache_n:,} of {total:,} prompt tokens cached"
        resume, self._resume = self._resume, None
        if resume is not None:
            how = {"same": "", "restored": " (restored from disk)", "cold": " cold"}[resume.kind]
            why = f" ({resume.reason})" if resume.reason else ""
            return (
                f"resumed{how} on slot {last.id_slot}{why} · {cached} · {last.ttft_ms / 1000:.1f} s"
            )
        return (
            f"slot {last.id_slot} · {cached} · first token {last.ttft_ms / 1000:.1f} s · "
            f"{last.predicted_per_second:.0f} tok/s"
        )

    def _finish_turn(self, answer: str, outcome: str, detail: str) -> None:
        session = self.session
        partial = outcome != "completed"
        if answer or partial:
            session.messages.append(
                Message(
                    role="assistant",
                    content=answer,
                    partial=partial,
                    partial_reason=outcome if partial else None,
                )
            )
        session.turns.append(TurnRecord(outcome=outcome, time=time.time(), detail=detail))  # type: ignore[arg-type]
        session.touch()
        self._save()

    def _save(self) -> None:
        try:
            self.store.save(self.session)
            self.save_error = None
        except SessionStoreError as exc:
            self.save_error = str(exc)


def context_full_message(exc: ContextExceeded) -> str:
    """What to do when a session no longer fits its slot (the server refuses, nothing is lost)."""
    return (
        f"this session no longer fits the slot: {exc.n_prompt_tokens:,} prompt tokens for a "
        f"{exc.n_ctx:,}-token context. Your message is saved; start a new session (Ctrl+N) or "
        "launch with fewer slots or a larger context (F2)"
    )
