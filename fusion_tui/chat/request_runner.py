"""Provides `RequestRunner`: one request of the plain chat on a slot, for `LocalBackend`.

Why apart from the turns: a turn's request, its retry and every side call (title, summary) go the
same way — under the slot's gate, streamed (native `/completion` for a `prompt`, else the chat
endpoint), the first event raced against `/slots` (`watch_first_token`), prompt progress turned
into `Progress`, and the finished request recorded on the session (and its endpoint).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from fusion_tui.chat.events import Notice, ReplyEvent
from fusion_tui.clock import Clock
from fusion_tui.config import Settings
from fusion_tui.server.errors import ProtocolError, ServerUnreachable
from fusion_tui.server.types import PromptProgress, StreamEnd, StreamEvent, TextDelta
from fusion_tui.sessions.model import WallClock
from fusion_tui.slots.gate import waiting_message
from fusion_tui.slots.keeper import SlotKeeper
from fusion_tui.slots.progress import ProgressTracker
from fusion_tui.slots.watch import FirstTokenStall, first_event, watch_config

NO_DATA = (FirstTokenStall, ServerUnreachable, ProtocolError)
"""Failures that, before any event arrived, mean the request got no answer: retried once."""


@dataclass
class GotData:
    """Whether an attempt received any event (then it is never retried)."""

    data: bool = False


OpenStream = Callable[[dict[str, Any]], AsyncGenerator[StreamEvent, None]]
"""The HTTP stream of one request body (`LocalBackend.open_stream`)."""

AfterRequest = Callable[[StreamEnd, bool], None]
"""Called once a request is recorded on the session, with whether it was a side call (several
endpoints: the record marked with its endpoint)."""


class RequestRunner:
    """Runs the requests of one backend on the slots its keeper names, and records them."""

    def __init__(
        self,
        settings: Settings,
        keeper: SlotKeeper,
        open_stream: OpenStream,
        after_request: AfterRequest,
        *,
        clock: Clock,
        wall_clock: WallClock,
    ) -> None:
        self.settings = settings
        self.keeper = keeper
        self.open_stream = open_stream
        self.after_request = after_request
        self.clock = clock
        """Monotonic time and sleeping: time to first token and the first-token watch."""
        self.wall_clock = wall_clock
        """What requests are stamped with."""

    async def attempt(
        self, slot: int, got: GotData, content: dict[str, Any]
    ) -> AsyncGenerator[ReplyEvent, None]:
        """One request on `slot`: gate, stream with the first-token watch, progress, record."""
        gate, totals = self.keeper.gate, self.keeper.live_totals
        assert gate is not None
        if slot >= 0 and gate.is_held(slot):
            yield Notice(waiting_message(slot))
        async with gate.hold(slot) as lease:
            started = self.clock.now()
            first: float | None = None
            tracker = ProgressTracker()
            try:
                async with aclosing(self.open_stream(self.body(lease.slot, content))) as events:
                    it = events.__aiter__()
                    event = await self.first_event(it, lease.slot)
                    if event is None:
                        raise ProtocolError(
                            "llama-server closed the stream without sending anything"
                        )
                    while event is not None:
                        got.data = True
                        if isinstance(event, TextDelta):
                            first = self.clock.now() if first is None else first
                            yield event
                        elif isinstance(event, PromptProgress):
                            if lease.slot >= 0:
                                totals[lease.slot] = event.total
                            yield tracker.on_event(event)
                        elif isinstance(event, StreamEnd):
                            ttft = ((first or self.clock.now()) - started) * 1000
                            self.record(event, ttft)
                            yield event
                        event = await anext(it, None)
            finally:
                totals.pop(lease.slot, None)

    async def first_event(self, it: AsyncIterator[StreamEvent], slot: int) -> StreamEvent | None:
        conn = self.keeper.conn
        assert conn is not None
        config = watch_config(self.settings)
        return await first_event(it, conn.client.slots, slot, config, self.clock)

    def body(self, slot: int, content: dict[str, Any]) -> dict[str, Any]:
        return {
            **content,
            "id_slot": slot,
            "cache_prompt": True,
            "return_progress": True,
            "n_predict": self.settings.llm.max_tokens,
            "temperature": self.settings.llm.temperature,
        }

    async def side_call(
        self, body: dict[str, Any], slot: int | None = None, *, record: bool = True
    ) -> str:
        """One side call (title, summary); its text. `slot` None: a slot no session holds
        (`SlotKeeper.side_slot_for`), else the one named (the session's own, for a title that
        continues its prompt). `record` False: not in the session's requests (a read-ahead)."""
        gate = self.keeper.gate
        assert gate is not None
        side = self.keeper.side_slot_for() if slot is None else slot
        assert side is not None
        pieces: list[str] = []
        async with gate.hold(side) as lease:
            started = self.clock.now()
            first_at: float | None = None
            request = {**body, "cache_prompt": True, "id_slot": lease.slot}
            async with aclosing(self.open_stream(request)) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        first_at = self.clock.now() if first_at is None else first_at
                        pieces.append(event.text)
                    elif isinstance(event, StreamEnd) and record:
                        ttft = ((first_at or self.clock.now()) - started) * 1000
                        self.record(event, ttft, side=True)
        return "".join(pieces)

    # --- records -------------------------------------------------------------------------------

    def record(self, end: StreamEnd, ttft_ms: float, *, side: bool = False) -> None:
        """The finished request on the session's record (a turn's also on the keeper: the slot
        that answered pinned, the prompt speed and reuse measured)."""
        t = end.timings
        if not side:
            self.keeper.pin_answer(end.id_slot)
            self.keeper.measured_prompt(t.prompt_n, t.prompt_per_second)
            self.keeper.answered_reusing(t.cache_n)
        self.keeper.session.record_request(
            id_slot=end.id_slot,
            prompt_n=t.prompt_n,
            cache_n=t.cache_n,
            ttft_ms=ttft_ms,
            predicted_per_second=t.predicted_per_second,
            side_call=side,
            clock=self.wall_clock,
        )
        self.after_request(end, side)
