"""One completion request of the agent: body, streaming, telemetry, deadline and cancel.

The server client is injected as a `CompletionFn` (the integrator passes
`LlamaClient.stream_completion`), so the loop is tested with scripted fakes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import anyio

from fusion_tui.agent.deadline import CancelToken, run_guarded
from fusion_tui.agent.events import (
    EventSink,
    PromptProgressed,
    RequestDone,
    RequestPurpose,
    RequestSent,
    StepDraft,
    TokenDelta,
)
from fusion_tui.agent.reply_draft import read_draft
from fusion_tui.clock import Clock
from fusion_tui.server.errors import ServerError
from fusion_tui.server.types import PromptProgress, StreamEnd, StreamEvent, TextDelta


@dataclass(frozen=True)
class StreamRestart:
    """The request is being sent again from the start (its endpoint went away mid-answer and
    it moved): what streamed so far is dropped."""


CompletionFn = Callable[[dict[str, Any]], AsyncIterator[StreamEvent | StreamRestart]]
"""POST /completion with `stream: true`; yields TextDelta/PromptProgress, then one StreamEnd
(and, only when a request is sent again elsewhere, a `StreamRestart` first)."""


class SlotChooser(Protocol):
    """Session→slot pins (the integrator passes `slots.pins.SlotPool`)."""

    def slot_for(self, session_id: str) -> int:
        """The pinned slot, or -1 to let the server choose."""
        ...

    def pin(self, session_id: str, slot: int) -> object: ...

    def side_call_slot(self) -> int:
        """The reserved slot for side calls (compaction), or -1."""
        ...


DRAFT_INTERVAL_S = 0.1
"""StepDraft events at most this often (reading the draft costs per call)."""

Ended = Literal["ok", "time_ceiling", "cancelled", "error", "deadline", "repeated"]
"""`repeated`: the answer was stopped once it went round in a loop (`repetition_start`)."""

REPEAT_WINDOW = 600
"""Characters an answer must repeat verbatim before it counts as a loop: code that is legitimately
repetitive (verses, tables) differs within far fewer, and the 1.5B's loops are longer."""


SHAPE_PERIOD = 200
"""A loop that differs only in its digits must go round at least this many characters a time:
a long list of numbers (`[2, 3, 5, 7, 11, ...]`) has the same shape every few characters."""
_DIGITS = str.maketrans("123456789", "000000000")


def repetition_start(text: str, window: int = REPEAT_WINDOW) -> int | None:
    """Where an answer that went round in a loop started its first repeat, or None.

    Seen with the 1.5B coder on Exercism: told its tests failed, it wrote the fix, invented the
    test output, said "it seems the tests are still failing", and wrote the same fix again, four
    times over, until the 2,048-token cap (8,860 characters, about 200 s of a 300 s try). Once the
    last `window` characters stand earlier in the answer word for word, the rest can only repeat
    them: the answer is cut where the repeat began (the first round kept whole).

    A loop that counts goes round too: on scale-generator the 1.5B wrote `elif interval ==
    "Bb": notes.append(notes[-1] + chr(97 + 26))` and the same sixteen branches again with the
    numbers one higher, until the cap (7,340 characters, most of a try). So the answer is also
    read with every digit as 0 (the lengths stay, so the cut falls in the same place), for a
    loop of at least `SHAPE_PERIOD` characters."""
    exact = _loop_start(text, window, 1)
    if exact is not None:
        return exact
    return _loop_start(text.translate(_DIGITS), window, SHAPE_PERIOD)


def _loop_start(text: str, window: int, min_period: int) -> int | None:
    n = len(text)
    if n < 2 * window:
        return None
    tail_at = n - window
    earlier = text.rfind(text[tail_at:], 0, n - 1)
    if earlier < 0:
        return None
    period = tail_at - earlier
    if period < min_period:
        return None
    start = tail_at
    while start - period > 0 and text[start - 1] == text[start - 1 - period]:
        start -= 1
    return start


@dataclass(frozen=True)
class Streamed:
    """One request's streamed answer: its text, how it ended, the server's end event or error."""

    text: str
    ended: Ended
    end: StreamEnd | None = None
    error: str = ""
    exc: ServerError | None = None


async def stream_request(
    completion: CompletionFn,
    body: dict[str, Any],
    *,
    step: int,
    purpose: RequestPurpose,
    clock: Clock,
    deadline: float | None,
    cancel: CancelToken | None,
    on_event: EventSink,
    deadline_means: Ended = "time_ceiling",
    stop_repeating: bool = False,
) -> Streamed:
    """Stream one completion; a fired deadline reads as `deadline_means`, checked first. With
    `stop_repeating` an answer that goes round in a loop is stopped and cut where the loop
    began (`repeated`; the server's final event, and with it the slot that served and the
    timings, never comes, so only a request to a named slot is stopped so)."""
    parts: list[str] = []
    got_end: list[StreamEnd] = []
    looped: list[int] = []
    t0 = clock.now()
    first: list[float] = []
    live = _Live(step, purpose, clock, on_event, parts, first)
    on_event(RequestSent(step, purpose, int(body.get("id_slot", -1)), len(body.get("prompt", ""))))

    async def consume() -> None:
        agen = completion(body)
        try:
            async for ev in agen:
                if isinstance(ev, TextDelta):
                    if not first:
                        first.append(clock.now())
                    parts.append(ev.text)
                    on_event(TokenDelta(step, ev.text, purpose))
                    live.draft()
                    if stop_repeating and len(parts) % 8 == 0:  # every few tokens: cheap
                        cut = repetition_start("".join(parts))
                        if cut is not None:
                            looped.append(cut)
                            return  # closing the stream stops the server's generation
                elif isinstance(ev, PromptProgress):
                    live.progress(ev)
                elif isinstance(ev, StreamEnd):
                    got_end.append(ev)
                elif isinstance(ev, StreamRestart):  # sent again elsewhere: start over
                    parts.clear()
                    first.clear()
                    got_end.clear()
                    live.restart()
        finally:
            aclose = getattr(agen, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()  # closes the HTTP stream: the server frees the slot

    error = ""
    exc: ServerError | None = None
    try:
        guarded = await run_guarded(consume, clock=clock, deadline=deadline, cancel=cancel)
        ended: Ended = {"ok": "ok", "deadline": deadline_means, "cancelled": "cancelled"}[
            guarded.ended
        ]
    except ServerError as e:
        ended, error, exc = "error", str(e), e
    live.draft(done=True)
    end = got_end[-1] if got_end else None
    text = "".join(parts)
    if ended == "ok" and looped:
        ended, text = "repeated", text[: looped[0]]
    elif ended == "ok" and end is None:
        ended, error = "error", "the stream ended without a final event"
    timings = end.timings if end else None
    on_event(
        RequestDone(
            step=step,
            purpose=purpose,
            id_slot=end.id_slot if end else int(body.get("id_slot", -1)),
            prompt_n=timings.prompt_n if timings else 0,
            cache_n=timings.cache_n if timings else 0,
            predicted_n=timings.predicted_n if timings else 0,
            ttft_ms=(first[0] - t0) * 1000 if first else None,
            predicted_per_second=timings.predicted_per_second if timings else 0.0,
            duration_ms=(clock.now() - t0) * 1000,
            prompt_chars=len(str(body.get("prompt", ""))),
            ended=ended,
        )
    )
    return Streamed(text, ended, end, error, exc)


class _Live:
    """The live view of one request: prompt progress with its rate, throttled drafts."""

    def __init__(
        self,
        step: int,
        purpose: RequestPurpose,
        clock: Clock,
        on_event: EventSink,
        parts: list[str],
        first: list[float],
    ) -> None:
        self.step, self.purpose, self.clock, self.on_event = step, purpose, clock, on_event
        self.parts, self.first = parts, first
        self.last_draft: float | None = None
        self.progress_start: tuple[float, int] | None = None

    def restart(self) -> None:
        self.last_draft = None
        self.progress_start = None

    def progress(self, ev: PromptProgress) -> None:
        now = self.clock.now()
        rate = None
        if self.progress_start is None:
            self.progress_start = (now, ev.processed)
        elif now > self.progress_start[0]:
            rate = (ev.processed - self.progress_start[1]) / (now - self.progress_start[0])
        self.on_event(
            PromptProgressed(self.step, ev.total, ev.cache, ev.processed, rate, self.purpose)
        )

    def draft(self, *, done: bool = False) -> None:
        now = self.clock.now()
        n = len(self.parts)
        if n == 0:
            return
        if not done and self.last_draft is not None and now - self.last_draft < DRAFT_INTERVAL_S:
            return
        self.last_draft = now
        text = "".join(self.parts)
        draft = read_draft(text)
        elapsed = now - self.first[0] if self.first else 0.0
        rate = (n - 1) / elapsed if elapsed > 0 and n > 1 else None
        self.on_event(
            StepDraft(self.step, self.purpose, text, draft.kind, draft.name, draft.args,
                      draft.body, n, rate, done)
        )  # fmt: skip
