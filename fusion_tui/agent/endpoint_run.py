"""Provides `EndpointRun`: an agent session's requests over several endpoints.

`fusion-tui run` (and any `AgentHost` given one) places the session once per run on an endpoint
(`place_run`: new, resumed, or a stated move), then every request of the task goes through
`EndpointRun.completion`: before it, `check_pin` against the endpoint's `/slots` (a slot another
client keeps busy is never named; the request goes to a free slot and a note says why); a request
that gets no answer (or whose stream breaks mid-answer) on an endpoint that is gone moves to
another endpoint with the same model (a cold re-read, stated; asked first when there is someone
to ask: the TUI), once, and is sent again there. Request events are marked with the endpoint's
label and, on the first request after a move, `moved_from`. After a move `follow` (the backend's
`SlotKeeper` attached there) gives the gate of the new endpoint. Every request of the run on an
endpoint it moved to (mid-run, or placed there by a move) is first measured against a slot there
(`context_fit.fits`: its `n_ctx` may be smaller): one that does not fit is never sent; its
`ContextExceeded` makes the loop compact, and when that does not help the turn ends with
`moved_too_large`'s sentence.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from fusion_tui.agent.events import RequestDone
from fusion_tui.agent.request import CompletionFn, StreamRestart
from fusion_tui.endpoints.context_fit import check_moved
from fusion_tui.endpoints.placement import Pin, Placement, check_pin, failover
from fusion_tui.endpoints.session_pins import EndpointPins, Route
from fusion_tui.server.connect import Connection
from fusion_tui.server.errors import ProtocolError, ServerUnreachable, StreamStalled
from fusion_tui.server.types import StreamEvent
from fusion_tui.sessions import model as sm
from fusion_tui.slots.gate import OnWait, SlotGate, slots_busy_probe

Say = Callable[[str], None]
Ask = Callable[[Placement], Awaitable[bool]]
"""Asked before a session moves to another endpoint: True moves (a cold re-read), False waits."""
Follow = Callable[[Route], SlotGate]
"""Told where the session moved (the slot policy follows it there); the gate to use there."""
NO_ANSWER = (ServerUnreachable, ProtocolError)


async def place_run(
    pins: EndpointPins, primary: Connection, session: sm.Session, say: Say
) -> Route:
    """Where the run's session goes: its endpoint (resumed), the best one (new), or, when its
    endpoint is gone, another one (said on `say`: headless runs move by default)."""
    own = [r for r in session.requests if not r.side_call]
    placed = await pins.place(
        session.id, pinned_endpoint=session.pinned_endpoint, pinned_slot=session.pinned_slot,
        resumed=bool(session.requests), prompt_tokens=own[-1].prompt_n + own[-1].cache_n if own
        else 0, refresh=False,
    )  # fmt: skip
    if placed.action == "move" or (placed.repinned and placed.reason):
        say(placed.reason)
    return await pins.route(placed)


@dataclass
class EndpointRun:
    """The run's current endpoint and what its request events are marked with."""

    pins: EndpointPins
    route: Route
    session_id: str
    say: Say
    moved_from: str | None = None
    """Set by a move; the next request event carries it, then it is cleared."""
    moves: list[Placement] = field(default_factory=list)
    ask: Ask | None = None
    """Asked before a move (the TUI's agent mode); None moves (headless `run`)."""
    follow: Follow | None = None
    """Told after a move (the keeper attached to the new endpoint); None: a gate of its own."""
    _slot_map: dict[int, int] = field(default_factory=dict)
    _gates: dict[str, SlotGate] = field(default_factory=dict)
    _last_prompt: int = 0

    @property
    def label(self) -> str:
        return self.route.label

    @property
    def conn(self) -> Connection:
        """The connection of the endpoint the run is on now."""
        return self.route.conn

    def _gate(self, home: SlotGate) -> SlotGate:
        if self.route.conn is self._first_conn:
            return home
        gate = self._gates.get(self.label)
        if gate is None:
            conn = self.route.conn
            gate = self._gates[self.label] = SlotGate(
                lambda: conn.props.total_slots, busy_probe=slots_busy_probe(conn.client.slots)
            )
        return gate

    def __post_init__(self) -> None:
        self._first_conn = self.route.conn
        self._came_from = self.label
        if self.route.placement.action == "move":  # placed elsewhere at the start of the run
            self.moved_from = self.route.placement.moved_from
            self._came_from = self.moved_from or self.label

    async def _checked_slot(self, slot: int) -> int:
        """The slot to name on the current endpoint: the loop's slot (mapped after a re-pin or a
        move), unless `/slots` shows another client's work there."""
        slot = self._slot_map.get(slot, slot)
        await self.pins.watcher.poll_once(labels=(self.label,))
        view = next(v for v in self.pins.views(exclude=self.session_id) if v.label == self.label)
        if not view.healthy:
            return slot
        checked = check_pin(Pin(self.label, slot), view, prompt_tokens=self._last_prompt)
        if checked.repinned and checked.slot >= 0:
            self.say(checked.reason)
            self._slot_map[slot] = checked.slot
            return checked.slot
        return slot

    async def _move(self, slot: int) -> int | None:
        """The endpoint did not answer: if it is gone, move (said) and return the new slot."""
        await self.pins.watcher.poll_once()  # every endpoint: where could it go
        health = self.pins.watcher.latest(self.label)
        if health is None or health.healthy:
            return None
        views = self.pins.views(exclude=self.session_id)
        placed = failover(
            Pin(self.label, slot), views, self.pins.model, prompt_tokens=self._last_prompt
        )
        if placed.action != "move":
            self.say(placed.reason)
            return None
        if self.ask is not None and not await self.ask(placed):  # the TUI asked: wait
            self.say(f"{placed.reason.split(';')[0]}; waiting (your message is kept)")
            return None
        self.say(placed.reason)
        self.pins.gone(self.label)
        before = self.label
        self.route = await self.pins.route(placed)
        self.moved_from = self.moved_from or before
        self._came_from = before
        self.moves.append(placed)
        if self.follow is not None:  # the slot policy follows: its gate is the new server's
            self._gates[self.label] = self.follow(self.route)
        return placed.slot

    async def _check_fit(self, body: dict[str, Any]) -> None:
        """On the endpoint the run moved to: `MovedTooLarge` (nothing sent) when the prompt
        and its answer do not fit a slot there."""
        conn = self.route.conn
        await check_moved(
            conn.client, str(body.get("prompt", "")), conn.props.n_ctx,
            int(body.get("n_predict", -1)), self.label, self._came_from,
        )  # fmt: skip

    def completion(
        self, home_gate: SlotGate, idle_timeout: float | None, on_wait: OnWait | None
    ) -> CompletionFn:
        """Requests on the current endpoint under its slot gate; one move when it is gone."""

        async def completion(body: dict[str, Any]) -> AsyncIterator[StreamEvent | StreamRestart]:
            asked = int(body.get("id_slot", -1))
            slot = await self._checked_slot(asked)
            moved_once = restart = False
            while True:
                if restart:  # the answer broke off and moved: the consumer starts over
                    restart = False
                    yield StreamRestart()
                if self._came_from != self.label:  # moved: its slot may be smaller
                    await self._check_fit(body)
                got = False
                label, client = self.label, self.route.conn.client
                try:
                    async with self._gate(home_gate).hold(slot, on_wait) as lease:
                        with self.pins.using(label, lease.slot):
                            events = client.stream_completion(
                                {**body, "id_slot": lease.slot}, idle_timeout=idle_timeout
                            )
                            try:
                                async for event in events:
                                    got = True
                                    yield event
                            finally:
                                await events.aclose()
                    return
                except (*NO_ANSWER, StreamStalled) as exc:
                    # no answer, or the stream broke mid-answer: if the endpoint is gone, move
                    # (once) and send the request again there
                    if moved_once or not (got or isinstance(exc, NO_ANSWER)):
                        raise
                    moved = await self._move(slot)
                    if moved is None:
                        raise
                    moved_once, restart = True, got
                    self._slot_map[asked] = slot = moved

        return completion

    def finish(self, session: sm.Session) -> None:
        """The session's pin after the task: this endpoint, and the slot as it is named here."""
        session.pinned_endpoint = self.label
        if session.pinned_slot is not None:
            session.pinned_slot = self._slot_map.get(session.pinned_slot, session.pinned_slot)

    def annotate(self, event: RequestDone, *, main: bool) -> RequestDone:
        """The event marked with its endpoint (and `moved_from` once after a move)."""
        moved = self.moved_from if main else None
        if main:
            self.moved_from = None
            self._last_prompt = event.prompt_n + event.cache_n
            if event.ended == "ok" and event.purpose != "compaction":
                self.pins.settle(
                    self.session_id, self.label, event.id_slot, event.predicted_per_second
                )
        return replace(event, endpoint=self.label, moved_from=moved)
