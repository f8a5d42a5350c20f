"""Provides `LocalBackend`: chat turns of one session against a (managed or external) server.

Each turn rides the session's pinned slot (the first goes `-1` so the server picks the slot that
holds the most similar prompt, and the answer's `id_slot` is pinned), one request in flight per
slot, and the session is saved atomically after every turn, also a cancelled or failed one.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from typing import Any

from fusion_tui.chat.backend import StatusCallback
from fusion_tui.chat.events import Notice, ReplyDone, ReplyEvent
from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.runtime import Connection, connect, make_daemon
from fusion_tui.server.errors import ServerError
from fusion_tui.server.types import PromptProgress, StreamEnd, TextDelta
from fusion_tui.sessions.model import Message, RequestRecord, ServerIdentity, Session, TurnRecord
from fusion_tui.sessions.store import SessionStore, SessionStoreError
from fusion_tui.slots.gate import SlotGate, slots_busy_probe, waiting_message
from fusion_tui.slots.pins import SlotPool
from fusion_tui.status import ServerStatus

SYSTEM_PROMPT = (
    "You are a concise, careful coding assistant running on the user's own machine. "
    "Answer in Markdown; put code in fenced blocks."
)


class LocalBackend:
    """The real backend used by the TUI and by `fusion-tui run`."""

    def __init__(
        self,
        settings: Settings,
        paths: AppPaths,
        *,
        model: str | None = None,
        resume: str | None = None,
        clock: Any = time.monotonic,
    ) -> None:
        self.settings = settings
        self.paths = paths
        self.model = model
        self.resume = resume
        self.clock = clock
        self.store = SessionStore.default(paths)
        self.pool = SlotPool()
        self.conn: Connection | None = None
        self.gate: SlotGate | None = None
        self.session = self._open_session(resume)
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
        self.conn = await connect(self.settings, self.paths, report, model=self.model)
        props = self.conn.props
        self.pool.update(props.total_slots, props.model_path, self.conn.launch_id)
        client = self.conn.client
        self.gate = SlotGate(
            lambda: self.pool.total_slots, busy_probe=slots_busy_probe(client.slots)
        )
        return self.conn.status

    def history(self) -> list[tuple[str, str]]:
        return [
            (m.role, m.content) for m in self.session.messages if m.role in ("user", "assistant")
        ]

    async def close(self) -> None:
        """Close the client; stop the daemon this app launched unless told to keep it."""
        conn, self.conn = self.conn, None
        if conn is None:
            return
        await conn.client.aclose()
        if conn.launched and not self.settings.local_models.managed.keep_running:
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

    async def reply(self, text: str) -> AsyncGenerator[ReplyEvent, None]:
        if self.conn is None or self.gate is None:
            raise ServerError("the server is not connected yet")
        session = self.session
        if not session.title:
            session.title = " ".join(text.split())[:60]
        session.messages.append(Message(role="user", content=text))
        slot = self.pool.slot_for(session.id)
        answer: list[str] = []
        outcome, detail = "cancelled", "cancelled"
        try:
            if slot >= 0 and self.gate.is_held(slot):
                yield Notice(waiting_message(slot))
            async with self.gate.hold(slot) as lease:
                started = self.clock()
                first: float | None = None
                body = self._body(lease.slot)
                idle = self.settings.local_models.request_timeout_ms / 1000
                async for event in self.conn.client.stream_chat(body, idle_timeout=idle):
                    if isinstance(event, TextDelta):
                        if first is None:
                            first = self.clock()
                        answer.append(event.text)
                        yield event
                    elif isinstance(event, PromptProgress):
                        yield event
                    elif isinstance(event, StreamEnd):
                        ttft = ((first or self.clock()) - started) * 1000
                        self._record_request(event, ttft)
                        yield event
            outcome, detail = "completed", self._cost_note()
        except ServerError as exc:
            outcome, detail = "error", str(exc)
            yield ReplyDone("error", note=f"error · {exc}", partial=True)
            return
        finally:
            self._finish_turn("".join(answer), outcome, detail)
        yield ReplyDone("completed", note=detail)

    # --- helpers -------------------------------------------------------------------------------

    def _body(self, slot: int) -> dict[str, Any]:
        return {
            "messages": self.chat_messages(),
            "id_slot": slot,
            "cache_prompt": True,
            "return_progress": True,
            "n_predict": self.settings.llm.max_tokens,
            "temperature": self.settings.llm.temperature,
        }

    def _record_request(self, end: StreamEnd, ttft_ms: float) -> None:
        assert self.conn is not None
        session = self.session
        self.pool.pin(session.id, end.id_slot)
        session.pinned_slot = self.pool.pins.get(session.id)
        props = self.conn.props
        session.server = ServerIdentity(props.model_path, self.conn.launch_id, props.total_slots)
        t = end.timings
        session.requests.append(
            RequestRecord(
                id_slot=end.id_slot,
                prompt_n=t.prompt_n,
                cache_n=t.cache_n,
                ttft_ms=round(ttft_ms, 1),
                predicted_per_second=round(t.predicted_per_second, 2),
                time=time.time(),
            )
        )

    def _cost_note(self) -> str:
        if not self.session.requests:
            return ""
        last = self.session.requests[-1]
        total = last.prompt_n + last.cache_n
        return (
            f"slot {last.id_slot} · {last.cache_n:,} of {total:,} prompt tokens cached · "
            f"first token {last.ttft_ms / 1000:.1f} s · {last.predicted_per_second:.0f} tok/s"
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
        try:
            self.store.save(session)
            self.save_error = None
        except SessionStoreError as exc:
            self.save_error = str(exc)
