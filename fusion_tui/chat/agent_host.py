"""Provides `open_host`: an agent session's `AgentHost` on the endpoint it runs on, its slots kept
by the one `SlotKeeper` there; shared by the TUI's agent mode (`AgentBackend`) and `fusion-tui run`.

Why one function: with several endpoints the session's requests go to the endpoint
its placement names, so the keeper must be attached to that endpoint's connection, as the plain
chat's is (`endpoint_turns.before_turn`): its pool and gate are the host's, the first request
names the placed slot, fresh and side slots are chosen among that server's, the shared ledger
and the saved slot files are that server's, and the slot map's current group is that endpoint
(`endpoint_view.grouped_view`). When a task moves mid-run (`EndpointRun`), the keeper follows
(`EndpointRun.follow`) and the session is pinned to the slot it moved to. Agent mode's turns
name their endpoint for the status line as the plain chat's do (`said_events`).
"""

from __future__ import annotations

from functools import partial

from fusion_tui.agent.endpoint_run import Ask, EndpointRun, Say
from fusion_tui.agent.host import AgentHost
from fusion_tui.chat.endpoint_view import follow
from fusion_tui.chat.events import Notice, ReplyEvent, TurnEndpoint
from fusion_tui.config import Settings
from fusion_tui.endpoints.session_pins import EndpointPins, Route
from fusion_tui.server.connect import Connection
from fusion_tui.slots.gate import SlotGate
from fusion_tui.slots.keeper import SlotKeeper


async def open_host(
    keeper: SlotKeeper,
    conn: Connection,
    settings: Settings,
    *,
    pins: EndpointPins | None = None,
    route: Route | None = None,
    say: Say | None = None,
    ask: Ask | None = None,
) -> AgentHost:
    """The host on `route`'s endpoint (several endpoints) or on `conn`, with the keeper there
    and, with a route, its `EndpointRun` (notes on `say`, a move asked through `ask`)."""
    target = conn if route is None else route.conn
    follow(keeper, target)
    if route is not None and route.slot >= 0:  # the placed slot, as the plain chat's turn
        keeper.pool.pin(keeper.session.id, route.slot)
    host = await AgentHost.open(
        target, pool=keeper.pool, gate=keeper.gate,
        idle_timeout=settings.local_models.request_timeout_ms / 1000,
        configured_workers=settings.llm.run_mode.fusion.workers,
    )  # fmt: skip
    if pins is not None and route is not None:
        host.routing = EndpointRun(
            pins, route, keeper.session.id, say or (lambda _s: None), ask=ask,
            follow=partial(_moved, keeper),
        )  # fmt: skip
    return host


def _moved(keeper: SlotKeeper, route: Route) -> SlotGate:
    """The task moved to `route`: the keeper follows and pins the session to the slot it moved
    to; the gate of that server."""
    follow(keeper, route.conn)
    if route.slot >= 0:
        keeper.pool.pin(keeper.session.id, route.slot)
    assert keeper.gate is not None
    return keeper.gate


def said_events(
    notes: list[str], host: AgentHost | None, pins: EndpointPins | None, shown: list[str]
) -> list[ReplyEvent]:
    """The notes of a move or a re-pinned slot (taken from `notes`) as chat notices; with several
    endpoints, the endpoint of the turn when it is new to the turn's `shown` ones (the status
    line names it, as the plain chat's `TurnEndpoint`)."""
    out: list[ReplyEvent] = [Notice(note) for note in notes]
    notes.clear()
    routing = host.routing if host is not None else None
    several = pins is not None and len(pins.labels) > 1
    if routing is not None and several and shown[-1:] != [routing.label]:
        shown.append(routing.label)
        out.append(TurnEndpoint(routing.label))
    return out
