"""Provides the plain chat's side of several endpoints: where `LocalBackend`'s turn goes.

`LocalBackend` calls these at a few marked places when it holds an `EndpointPins` (more than
one endpoint configured); with one endpoint it holds none and never comes here. Before a turn the
session is placed (new, resumed, or its pin checked against `/slots`) and the backend's
`SlotKeeper` is attached to that endpoint's connection, so the turn, its retry, its side call and
its slot save all go to the same server. When a request gets no answer and its endpoint is gone,
the session moves (asking first when the backend has someone to ask: the TUI), and the request
record says where it ran and where it came from. A turn on the endpoint the session moved to is
built (and compacted) again for that endpoint's slot and measured there first (`check_fit`):
another machine may run a smaller context per slot.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Protocol, runtime_checkable

from fusion_tui.chat.endpoint_view import EndpointSlotView, follow, grouped_view
from fusion_tui.chat.events import EndpointMoved, Notice, ReplyEvent, TurnEndpoint
from fusion_tui.chat.server_stop import stop_beside_remote
from fusion_tui.config import Settings
from fusion_tui.endpoints.context_fit import check_moved
from fusion_tui.endpoints.placement import Placement
from fusion_tui.endpoints.session_pins import (
    Connector,
    EndpointPins,
    EndpointWait,
    Route,
    wants_endpoints,
)
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection, release, stops_on_exit
from fusion_tui.server.types import StreamEnd
from fusion_tui.sessions.model import Session
from fusion_tui.slots.keeper import SlotKeeper

FailoverAsk = Callable[[Placement], Awaitable[bool]]
"""Asked before a session moves to another endpoint: True moves (a cold re-read), False waits."""


@runtime_checkable
class FailoverAsker(Protocol):
    """Someone to ask before a session moves (the TUI's approver); headless: nobody, move."""

    async def ask_failover(self, placed: Placement) -> bool: ...


class RoutedBackend(Protocol):
    """What these functions use of `chat.local.LocalBackend` when its turns are routed over
    several endpoints (a protocol, so this module does not import the backend that calls it)."""

    settings: Settings
    paths: AppPaths
    keeper: SlotKeeper
    endpoints: EndpointPins | None
    endpoint_turn: TurnRoute | None
    ask_failover: FailoverAsk | None

    @property
    def session(self) -> Session: ...


class ConnectingBackend(Protocol):
    connector: Connector
    endpoints: EndpointPins | None


def endpoint_pins_for(settings: Settings) -> EndpointPins | None:
    """An `EndpointPins` when the config lists several endpoints (or a `url:` one), else None."""
    return EndpointPins(settings) if wants_endpoints(settings) else None


def connector(backend: ConnectingBackend) -> Connector:
    """The backend's connector, or with several endpoints the one that reaches the managed
    server through it, else the best remote endpoint (`EndpointPins.connect`)."""
    pins = backend.endpoints
    return backend.connector if pins is None else partial(pins.connect, backend.connector)


@dataclass
class TurnRoute:
    """The current turn's endpoint, and where the session came from if it moved."""

    route: Route
    moved_from: str | None = None


def prompt_estimate(backend: RoutedBackend) -> int:
    """The prompt tokens a cold re-read costs: the last request's prompt (cached + evaluated)."""
    own = [r for r in backend.session.requests if not r.side_call]
    return own[-1].prompt_n + own[-1].cache_n if own else 0


async def before_turn(backend: RoutedBackend) -> tuple[int, list[ReplyEvent]]:
    """Place the session's next request and attach the keeper there: (slot, the events that
    say where: the endpoint, and a note when the placement is worth saying)."""
    pins = backend.endpoints
    assert pins is not None
    session = backend.session
    here = pins.label_of(backend.keeper.conn)
    if here is not None:  # the title's side slot is not free for a new session
        pins.side_slot(here, backend.keeper.side_slot)
    placed = await pins.place(
        session.id, pinned_endpoint=session.pinned_endpoint, pinned_slot=session.pinned_slot,
        resumed=bool(session.requests), prompt_tokens=prompt_estimate(backend),
    )  # fmt: skip
    notes: list[ReplyEvent] = []
    if placed.action == "move" and not await _may_move(backend, placed):
        raise EndpointWait(f"{placed.reason.split(';')[0]}; waiting (your message is kept)")
    route = await pins.route(placed)
    moved = placed.moved_from if placed.action == "move" else None
    backend.endpoint_turn = TurnRoute(route, moved)
    follow(backend.keeper, route.conn)
    if len(pins.labels) > 1:  # the status line names it only with several endpoints
        notes.append(TurnEndpoint(route.label))
    if moved is not None:  # headless chat says it on stderr (the TUI asked first)
        notes.append(EndpointMoved(route.note, endpoint=route.label, moved_from=moved))
    elif route.note:
        notes.append(Notice(route.note))
    return route.slot, notes


async def after_no_data(backend: RoutedBackend) -> tuple[int, list[ReplyEvent]] | None:
    """The request got no answer: if its endpoint is gone, the placement elsewhere (slot,
    notes); None to retry on the same endpoint."""
    pins, turn = backend.endpoints, backend.endpoint_turn
    assert pins is not None and turn is not None
    await pins.watcher.poll_once(labels=(turn.route.label,))
    health = pins.watcher.latest(turn.route.label)
    if health is None or health.healthy:
        return None
    pins.gone(turn.route.label)
    before = turn.moved_from or turn.route.label
    slot, notes = await before_turn(backend)
    if backend.endpoint_turn is not None and backend.endpoint_turn.route.label != turn.route.label:
        backend.endpoint_turn.moved_from = before
    return slot, notes


async def check_fit(backend: RoutedBackend, content: dict[str, Any]) -> None:
    """The turn runs on an endpoint the session moved to: its prompt (compacted already for
    that endpoint's slot) is measured against a slot there; `MovedTooLarge` (nothing sent) when
    it still does not fit. Elsewhere nothing to check: the prompt was built for this slot."""
    turn, conn = backend.endpoint_turn, backend.keeper.conn
    if turn is None or turn.moved_from is None or conn is None or "prompt" not in content:
        return
    await check_moved(
        conn.client, str(content["prompt"]), conn.props.n_ctx, backend.settings.llm.max_tokens,
        turn.route.label, turn.moved_from,
    )  # fmt: skip


def restart_note(backend: RoutedBackend) -> str:
    """Said when a broken answer is sent again on the endpoint the session moved to."""
    turn = backend.endpoint_turn
    where = turn.route.label if turn is not None else "another endpoint"
    return f"the answer broke off; sending the turn again on {where} (the partial one is dropped)"


async def _may_move(backend: RoutedBackend, placed: Placement) -> bool:
    ask = backend.ask_failover
    return True if ask is None else await ask(placed)


def after_request(backend: RoutedBackend, end: StreamEnd, *, side: bool) -> None:
    """Mark the request just recorded with its endpoint (and `moved_from`); pin the session."""
    pins, turn = backend.endpoints, backend.endpoint_turn
    if pins is None or turn is None:
        return
    session = backend.session
    label = turn.route.label
    record = session.requests[-1]
    moved = None if side else turn.moved_from
    session.requests[-1] = replace(record, endpoint=label, moved_from=moved)
    if not side:
        turn.moved_from = None
        session.pinned_endpoint = label
        pins.settle(session.id, label, end.id_slot, end.timings.predicted_per_second)


def cost_note(backend: RoutedBackend, detail: str) -> str:
    """The turn's note (kept in the session's turn record) names its endpoint when there are
    several, and says why the placement changed when it did (a re-pin, a move)."""
    pins, turn = backend.endpoints, backend.endpoint_turn
    if pins is None or turn is None or not detail:
        return detail
    if len(pins.labels) > 1:
        detail = f"{turn.route.label} · {detail}"
    placed = turn.route.placement
    if (placed.repinned and placed.action == "move") or placed.cold_tokens:
        detail += f" · {placed.reason}"
    return detail


async def close(
    backend: RoutedBackend, primary: Connection | None, attached: Connection | None
) -> None:
    """Release the first connection (the managed server's rule) when the keeper was attached
    elsewhere, every other session's slot on it saved first when that stops it (as agent mode
    does; a failed save never keeps the server running), then close every client the endpoints
    made."""
    pins = backend.endpoints
    if pins is None:
        return
    try:
        if primary is not None and primary is not attached:
            try:
                if stops_on_exit(backend.settings, primary):
                    follow(backend.keeper, primary)  # the server that stops
                    await backend.keeper.save_others()
            finally:
                backend.keeper.detach()
                await release(backend.settings, backend.paths, primary)
    finally:
        await pins.aclose()


async def stop_managed(backend: RoutedBackend) -> str | None:
    """`stop_server` with several endpoints: when the session's endpoint is remote, only the
    managed server here is stopped (every session's slot on it saved first) and the sentence
    says what was done; None when the session is on the managed server (stopped as before)."""
    conn = backend.keeper.conn
    return await stop_beside_remote(backend.settings, backend.paths, backend.endpoints, conn)


def slot_view(backend: RoutedBackend) -> EndpointSlotView:
    """The slot map's view: the current endpoint through the keeper, every endpoint grouped."""
    pins = backend.endpoints
    assert pins is not None

    def current() -> str | None:
        turn = backend.endpoint_turn
        return turn.route.label if turn is not None else pins.label_of(backend.keeper.conn)

    return grouped_view(backend.keeper, pins, current)
