"""Shared parts of bench/cache_reuse.py: the texts, the traced client, per-request rows and the
re-read explanations of the trace.

Every request of every side goes through `TracedClient`, a `LlamaClient` that timestamps what
happens before the first token (`/slots` polls, stream open, first event, first text), keeps the
server's timings, the prompt sent and the answer (for the minimum, `_minimum.py`) and, unless the
bench runs on real answers, asks every answer to run to `max_tokens` (`ignore_eos`), so both
sides' answers have the same length whatever the model says; the bench driver labels each request
(phase, session, turn or side call) through a context variable, so concurrent sessions keep their
labels.
"""

from __future__ import annotations

import contextvars
import statistics
import sys
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fusion_tui.chat.turn_content import SYSTEM_PROMPT
from fusion_tui.config import Settings
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.types import PromptProgress, SlotState, StreamEnd, StreamEvent, TextDelta

WORDS = ["parser", "lexer", "token", "buffer", "module", "import", "cache", "slot", "session",
         "prompt", "layer", "tensor"]  # fmt: skip
SYSTEM = SYSTEM_PROMPT  # the plain client gets the product's system prompt: same tokens to read


def opening(k: int, words: int) -> str:
    body = " ".join(f"{WORDS[(i * 5 + k) % len(WORDS)]}{(i * 3 + k) % 89}" for i in range(words))
    return f"Session {k}. Read these notes, then answer briefly.\n{body}"


def follow_up(k: int, r: int) -> str:
    return f"Round {r}: which item of session {k} matters most?"


# --- labels and rows -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Label:
    phase: str
    session: str
    kind: str = "turn"  # turn | side | agent | summary | readahead
    turn: int = 0

    @property
    def is_turn(self) -> bool:
        """A session's own request (a turn or an agent step), not a side call, a summary or a
        read-ahead of the next turn's opening."""
        return self.kind not in ("side", "summary", "readahead")


LABEL: contextvars.ContextVar[Label | None] = contextvars.ContextVar("label", default=None)


@dataclass
class Row:
    """One request as the bench saw it."""

    policy: str
    label: Label
    asked_slot: int
    slot: int = -1
    prompt_n: int = 0
    cache_n: int = 0
    predicted_n: int = 0
    prompt_ms: float = 0.0
    t0: float = 0.0
    t_open: float | None = None
    t_first_event: float | None = None
    t_first_text: float | None = None
    t_end: float | None = None
    t_call: float | None = None
    """When Enter was pressed (a turn's user-visible first-token time starts here)."""
    probes: list[tuple[float, float]] = field(default_factory=list)
    error: str = ""
    minimum: int = 0
    """Tokens new given the conversation (`_minimum.py`); 0 for what is not a turn."""
    prompt_tokens: int = 0
    """The prompt as the server's `/tokenize` counts it (set with the minimum)."""
    why: str = ""
    epoch: int = 0
    """Which daemon launch served it (a restart starts a new one)."""
    compacted: bool = False
    """The session's prompt was rewritten (compaction summary) just before this request."""
    request: Any = None
    """What was sent: the `/completion` prompt (a string) or the chat `messages`."""
    answer: str = ""
    typing_s: float = 0.0
    """The message's typing time (a turn's first request)."""
    ahead_s: float = 0.0
    """How long the client's keystroke work took (read-ahead: restore, room, the request)."""

    @property
    def total(self) -> int:
        return self.prompt_n + self.cache_n

    @property
    def ttft_ms(self) -> float | None:
        start = self.t_call if self.t_call is not None else self.t0
        first = self.t_first_text or self.t_end
        return None if first is None else (first - start) * 1000

    @property
    def seconds(self) -> float:
        return 0.0 if self.t_end is None else self.t_end - self.t0


class Recorder:
    """Collects rows, `/slots` polls and slot actions of one side's run."""

    def __init__(self, policy: str, *, ignore_eos: bool = True) -> None:
        self.policy = policy
        self.ignore_eos = ignore_eos
        """Ask every answer (turns, titles, summaries; not agent steps) to run to its limit."""
        self.rows: list[Row] = []
        self.actions: list[tuple[Label | None, str, int, dict[str, Any], float]] = []
        self._pending_probes: list[tuple[float, float]] = []
        self._pending_call: dict[Label, float] = {}
        self._compacted: set[str] = set()
        """Sessions whose next turn sends a compacted prompt."""
        self.epoch = 0

    def mark_call(self, at: float | None = None) -> None:
        """Enter was pressed for the current turn (`at`, else now), before any poll, gate wait
        or keystroke work still running."""
        label = LABEL.get()
        if label is not None:
            self._pending_call[label] = time.monotonic() if at is None else at

    def note_typing(self, typing_s: float, ahead_s: float) -> None:
        """The current turn's typing time and keystroke work, on its first request."""
        label = LABEL.get()
        row = next((r for r in self.rows if r.label == label), None)
        if row is not None:
            row.typing_s, row.ahead_s = typing_s, ahead_s

    def mark_compacted(self) -> None:
        """The driver saw a compaction: the session's next turn sends a new prompt. Seen before
        the turn's request (the prompt would not fit), what the turn sent so far was the
        summary: those rows become `summary` ones and the turn's first token still counts from
        the moment it was asked. (A compaction ahead, after the answer, is labelled `summary`
        by the driver already.)"""
        label = LABEL.get()
        if label is None:
            return
        self._compacted.add(label.session)
        if label.kind == "summary":
            return
        for i, row in enumerate(self.rows):
            if row.label == label:
                self.rows[i].label = replace(label, kind="summary")
                if row.t_call is not None:
                    self._pending_call.setdefault(label, row.t_call)

    def retry_turn(self) -> None:
        """The driver sends the turn again (a rolling-window client trimmed its history after a
        refusal): the refused attempt is dropped, its wait counts in the turn's first token."""
        label = LABEL.get()
        if label is None or not self.rows or self.rows[-1].label != label:
            return
        refused = self.rows.pop()
        if refused.t_call is not None:
            self._pending_call.setdefault(label, refused.t_call)

    def new_row(self, asked: int, *, read_ahead: bool = False) -> Row:
        label = LABEL.get() or Label("?", "?")
        if read_ahead:  # `n_predict: 0` after an answer: the next turn's opening, read ahead
            label = replace(label, kind="readahead")
        row = Row(self.policy, label, asked, t0=time.monotonic(), epoch=self.epoch)
        if (label.is_turn or read_ahead) and label.session in self._compacted:
            self._compacted.discard(label.session)
            row.compacted = True
        row.t_call = self._pending_call.pop(label, None)
        row.probes, self._pending_probes = self._pending_probes, []
        self.rows.append(row)
        return row


class TracedClient(LlamaClient):
    """A `LlamaClient` that records every stream, `/slots` poll and slot action."""

    def __init__(self, url: str, recorder: Recorder) -> None:
        super().__init__(url)
        self.recorder = recorder

    async def slots(self, timeout: float = 3.0) -> list[SlotState]:
        t = time.monotonic()
        try:
            return await super().slots(timeout)
        finally:
            self.recorder._pending_probes.append((t, time.monotonic()))

    async def slot_action(self, slot_id: int, action: Any, filename: str | None = None,
                          **kw: Any) -> dict[str, Any]:  # fmt: skip
        t = time.monotonic()
        data = await super().slot_action(slot_id, action, filename, **kw)
        self.recorder.actions.append((LABEL.get(), action, slot_id, data, time.monotonic() - t))
        return data

    def _body(self, body: dict[str, Any]) -> dict[str, Any]:
        """`ignore_eos` on an answer of a turn, title or summary (an agent step's answer is
        parsed for tool calls: it stays the model's own)."""
        label = LABEL.get()
        limit = body.get("n_predict", body.get("max_tokens", -1))
        if not self.recorder.ignore_eos or limit == 0 or (label and label.kind == "agent"):
            return body
        return {**body, "ignore_eos": True}

    async def _traced(self, body: dict[str, Any], events: AsyncGenerator[StreamEvent, None]
                      ) -> AsyncGenerator[StreamEvent, None]:  # fmt: skip
        read_ahead = body.get("n_predict") == 0
        row = self.recorder.new_row(int(body.get("id_slot", -1)), read_ahead=read_ahead)
        messages = body.get("messages")  # copied: a client goes on appending to its history
        row.request = body.get("prompt", None if messages is None else [dict(m) for m in messages])
        pieces: list[str] = []
        try:
            async for event in events:
                now = time.monotonic()
                row.t_open = row.t_open or now
                if isinstance(event, (PromptProgress, TextDelta)):
                    row.t_first_event = row.t_first_event or now
                if isinstance(event, TextDelta):
                    row.t_first_text = row.t_first_text or now
                    pieces.append(event.text)
                elif isinstance(event, StreamEnd):
                    t = event.timings
                    row.slot, row.prompt_n, row.cache_n = event.id_slot, t.prompt_n, t.cache_n
                    row.predicted_n, row.prompt_ms, row.t_end = t.predicted_n, t.prompt_ms, now
                    if read_ahead:
                        row.predicted_n = 0  # sampled, never decoded into the slot
                yield event
        except Exception as exc:
            row.error = type(exc).__name__
            raise
        finally:
            row.answer = "".join(pieces)

    def stream_chat(self, body: dict[str, Any], **kw: Any) -> AsyncGenerator[StreamEvent, None]:
        body = self._body(body)
        return self._traced(body, super().stream_chat(body, **kw))

    def stream_completion(self, body: dict[str, Any], **kw: Any
                          ) -> AsyncGenerator[StreamEvent, None]:  # fmt: skip
        body = self._body(body)
        return self._traced(body, super().stream_completion(body, **kw))


def settings_with(server: Any, **llm: Any) -> Settings:
    """The product settings of `server` (a `PlanServer`) with the LLM knobs of the bench."""
    s: Settings = server.settings
    return replace(s, local_models=replace(s.local_models, progress_watch=True), llm=replace(
        s.llm, **llm))  # fmt: skip


# --- explanations, trace ------------------------------------------------------------------------


def annotate(rows: list[Row]) -> None:
    """For a turn that read more than its minimum (`_minimum.py`, set before), why it did."""
    last_of: dict[str, Row] = {}
    on_slot: dict[int, tuple[str, str]] = {}
    epoch = -1
    for row in rows:
        lab = row.label
        if row.epoch != epoch:
            on_slot, epoch = {}, row.epoch
        if row.error:
            row.why = f"failed: {row.error}"
            continue
        prev = last_of.get(lab.session) if lab.kind != "side" else None
        if row.compacted:
            row.why = "compacted: the prompt now starts with the summary"
        elif lab.kind == "summary":
            on_own = prev is not None and prev.slot == row.slot and row.cache_n > 0
            row.why = "summary: continues the session's prompt" if on_own else (
                "summary: a prompt of its own")  # fmt: skip
        elif lab.kind == "readahead":
            row.why = "read ahead: the next turn's opening, while the user types"
        extra = row.prompt_n - row.minimum
        if extra > max(8, 0.05 * row.minimum) and prev is not None and lab.is_turn and not (
                row.compacted):  # fmt: skip
            holder = on_slot.get(row.slot)
            if prev.epoch != row.epoch:
                row.why = "new daemon: the session's prompt was not restored"
            elif holder is not None and holder[1] != lab.session:
                row.why = f"slot {row.slot} last held {holder[1]} ({holder[0]})"
            elif prev.slot != row.slot:
                row.why = f"served on slot {row.slot}, the session's prompt was on {prev.slot}"
            elif row.cache_n == 0 and "swa" in lab.phase:
                row.why = "SWA without --swa-full: the slot could not serve the prefix"
            else:
                row.why = f"prefix diverged after {row.cache_n} tokens on slot {row.slot}"
        on_slot[row.slot] = (lab.kind, lab.session)
        if lab.is_turn or lab.kind == "readahead":
            last_of[lab.session] = row


def trace_line(row: Row) -> str:
    lab = row.label
    probes = sum(b - a for a, b in row.probes) * 1000
    pre = ((row.t0 - row.t_call) * 1000) if row.t_call is not None else 0.0
    srv = (row.t_open - row.t0) * 1000 if row.t_open else 0.0
    ttft = row.ttft_ms
    typed = f" typed {row.typing_s:4.1f} s ahead {row.ahead_s * 1000:5.0f} ms" if (
        row.typing_s or row.ahead_s) else ""  # fmt: skip
    return (
        f"{row.policy:<10} {lab.phase:<19} {lab.session:<5} {lab.kind:<9} t{lab.turn:<3} "
        f"slot {row.asked_slot:>2}->{row.slot:>2} cached {row.cache_n:>5} eval {row.prompt_n:>5} "
        f"min {row.minimum:>5} answer {row.predicted_n:>4} | pre-send {pre:6.0f} ms "
        f"({len(row.probes)} /slots {probes:4.0f} ms) open {srv:6.0f} prompt {row.prompt_ms:6.0f} "
        f"ttft {(ttft or 0):6.0f}{typed}{'  ' + row.why if row.why else ''}"
    )


def print_trace(rows: list[Row], recorders: Sequence[Recorder] = ()) -> None:
    for row in rows:
        print(trace_line(row), file=sys.stderr)
    for rec in recorders:
        for label, action, slot, data, seconds in rec.actions:
            n = data.get("n_saved", data.get("n_restored", data.get("n_erased", "?")))
            who = f"{label.phase} {label.session}" if label else "leaving"
            print(f"{rec.policy:<10} slot {action} slot {slot}: {n} tokens in "
                  f"{seconds * 1000:.0f} ms ({who})", file=sys.stderr)  # fmt: skip


def median_spread(values: list[float]) -> tuple[float, float, float]:
    if not values:
        return 0.0, 0.0, 0.0
    return statistics.median(values), min(values), max(values)
