"""Provides `EndpointPins`: which endpoint (and slot) a session's next request goes to, and why.

The backends (the chat's `LocalBackend`, the agent's `AgentHost` for `fusion-tui run`) hold one
when more than one endpoint is configured; with one endpoint they hold none and behave exactly as
a single-server app. It owns the registry and the health watcher, keeps a `Connection` per
endpoint (the managed one is the connection `server.connect.connect` made), the pins of the sessions
this process placed, our requests in flight per endpoint, and the measured speeds; every decision is
one of the pure placement functions (`place_new`, `place_resumed`, `check_pin`, `failover`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from fusion_tui.config import Settings
from fusion_tui.endpoints.health import PROBE_TIMEOUT, HealthWatcher
from fusion_tui.endpoints.model import endpoints_from_settings
from fusion_tui.endpoints.placement import (
    Pin,
    Placement,
    check_pin,
    failover,
    place_new,
    place_resumed,
)
from fusion_tui.endpoints.registry import ClientFactory, EndpointRegistry
from fusion_tui.endpoints.slot_groups import EndpointSlots
from fusion_tui.models.catalog import catalog_model, default_model
from fusion_tui.server.connect import Connection
from fusion_tui.server.errors import (
    BinaryNotFound,
    DaemonStartError,
    ServerError,
    ServerUnreachable,
)
from fusion_tui.server.process.probe import model_display_name
from fusion_tui.status import ServerStatus

Connector = Callable[..., Awaitable[Connection]]


START_FAILED = (BinaryNotFound, DaemonStartError, ServerUnreachable)
"""A managed start that failed this way (no binary, a crash, a missing local model file, no
answer) falls back to a healthy remote endpoint with the same model, said."""


def wanted_model(settings: Settings, override: str | None = None) -> str | None:
    """The model the managed server was to serve (`--model`, `localModels.model`, else the
    default model when installed), as a file name or path: models are compared across machines
    by file name only, so a short name stands for its catalogue file's name."""
    chosen = override or settings.local_models.model
    entry = catalog_model(chosen) if chosen else default_model()[0]
    if chosen and entry is None:
        return chosen
    return entry.file_name if entry is not None else None


def wants_endpoints(settings: Settings) -> bool:
    """More than one endpoint, or one that is a `url:` entry: the backends route through
    `EndpointPins`. No `server.endpoints` (or only the managed one) is the single-server app."""
    entries = settings.server.endpoints
    return len(entries) > 1 or any(not e.managed for e in entries)


@dataclass(frozen=True)
class Route:
    """Where one request goes: the endpoint's connection and slot, and the decision behind it."""

    label: str
    conn: Connection
    slot: int
    placement: Placement

    @property
    def note(self) -> str:
        """What the session's telemetry says about this request's placement ("" when it simply
        stayed on its pin)."""
        p = self.placement
        return "" if p.reason == "pinned" and not p.repinned else p.reason


class EndpointWait(ServerError):
    """Nowhere to send the request now (the placement says `wait`); the reason says why."""


class EndpointPins:
    """The app's endpoints, and the (endpoint, slot) pin of each session it placed."""

    def __init__(
        self,
        settings: Settings,
        *,
        env: Mapping[str, str] | None = None,
        client_factory: ClientFactory | None = None,
        probe_timeout: float = PROBE_TIMEOUT,
    ) -> None:
        self.settings = settings
        kw: dict[str, Any] = {"env": env}
        if client_factory is not None:
            kw["client_factory"] = client_factory
        self.registry = EndpointRegistry(endpoints_from_settings(settings), **kw)
        self.watcher = HealthWatcher(self.registry, timeout=probe_timeout)
        self.model: str | None = None
        """The model path the app serves (the first connection's); placement compares names."""
        self._conns: dict[str, Connection] = {}
        self._own: set[str] = set()
        """Labels whose connection this object built (and closes); the managed one is not."""
        self._pins: dict[str, tuple[str, int]] = {}
        self._in_flight: dict[str, dict[int, int]] = {}
        self._side: dict[str, set[int]] = {}
        self._dead: list[Connection] = []
        self._probed: set[str] = set()

    @property
    def labels(self) -> tuple[str, ...]:
        return self.registry.labels

    # --- connections ---------------------------------------------------------------------------

    async def connect(
        self, connector: Connector, settings: Settings, paths: Any, report: Any, **kw: Any
    ) -> Connection:
        """The first connection: the managed server through `connector` (it launches or adopts
        it), else the best reachable remote endpoint. Binds it and probes every endpoint. When
        the managed start fails (`START_FAILED`) and a healthy remote endpoint serves the same
        model, that one, its status's `fallback` saying so; otherwise the start's error."""
        managed = next((ep for ep in self.registry.endpoints if ep.managed), None)
        if managed is not None:
            try:
                conn = await connector(settings, paths, report, **kw)
            except START_FAILED as exc:  # a remote endpoint with the model may serve instead
                fallback = await self._fall_back(managed.label, exc, settings, kw.get("model"))
                if fallback is None:
                    raise
                if report is not None:
                    report(fallback.status)
                return fallback
            self.bind(managed.label, conn)
            await self.watcher.poll_once()
            return conn
        await self.watcher.poll_once()
        placed = place_new(self.views(), None)
        if placed.endpoint is None:
            raise ServerUnreachable(f"no endpoint is reachable: {placed.reason}")
        conn = await self.connection(placed.endpoint)
        self.model = conn.props.model_path or None
        if report is not None:
            report(conn.status)
        return conn

    async def _fall_back(
        self, managed: str, exc: ServerError, settings: Settings, model: str | None
    ) -> Connection | None:
        """The managed start failed (`exc`): the best healthy remote endpoint serving the model
        the managed server was to serve, its status carrying the sentence; None when there is
        none (or no model is named), and the start fails as before."""
        wanted = wanted_model(settings, model)
        if wanted is None:
            return None
        await self.watcher.poll_once()
        views = [v for v in self.views() if v.label != managed]
        placed = place_new(views, wanted)
        if placed.endpoint is None:
            return None
        conn = await self.connection(placed.endpoint)
        self.model = conn.props.model_path or wanted
        why = (getattr(exc, "what", "") or str(exc) or type(exc).__name__).splitlines()[0]
        line = (
            f"the managed llama-server did not start ({why}); using {placed.endpoint} instead, "
            f"a remote endpoint serving {conn.status.model}"
        )
        conn.status = replace(conn.status, fallback=line)
        return conn

    def adopt(self, conn: Connection) -> Connection:
        """A connection made elsewhere (the launch wizard's managed launch): bound to the managed
        endpoint, else to the endpoint at its URL; returned for the caller to keep."""
        managed = next((ep for ep in self.registry.endpoints if ep.managed), None)
        url = conn.client.base_url.rstrip("/")
        label = next((ep.label for ep in self.registry.endpoints if ep.url == url), None)
        if managed is not None and (label is None or conn.record is not None):
            label = managed.label
        if label is not None:
            self.bind(label, conn)
        return conn

    def bind(self, label: str, conn: Connection) -> None:
        """`conn` is `label`'s connection (the managed server once launched or adopted)."""
        self.registry.bind(label, conn.client.base_url)
        self._conns[label] = conn
        self.model = self.model or conn.props.model_path or None
        self._probe_speeds()

    async def connection(self, label: str) -> Connection:
        """`label`'s connection, made on first use (health and props of that server)."""
        held = self._conns.get(label)
        if held is not None and not held.client.is_closed:
            return held
        client = self.registry.client(label)
        await client.health()
        props = await client.props()
        name = model_display_name(props.model_path) if props.model_path else label
        status = ServerStatus(
            state="ready", model=name, slots=props.total_slots, n_ctx=props.n_ctx,
            tok_s=self.watcher.speed(label),
        )  # fmt: skip
        conn = Connection(client, props, status)
        self._conns[label] = conn
        self._own.add(label)
        return conn

    def label_of(self, conn: Connection | None) -> str | None:
        for label, held in self._conns.items():
            if held is conn:
                return label
        return None

    async def aclose(self) -> None:
        """Close the clients this object made (the managed connection is its owner's)."""
        for label in list(self._own):
            conn = self._conns.pop(label, None)
            if conn is not None:
                await conn.client.aclose()
        self._own.clear()
        dead, self._dead = self._dead, []
        for conn in dead:
            await conn.client.aclose()
        await self.registry.aclose()

    # --- what we know about our own requests ---------------------------------------------------

    @contextmanager
    def using(self, label: str, slot: int) -> Iterator[None]:
        """One of our requests is in flight on (`label`, `slot`): not another client's work."""
        flights = self._in_flight.setdefault(label, {})
        flights[slot] = flights.get(slot, 0) + 1
        try:
            yield
        finally:
            flights[slot] -= 1
            if not flights[slot]:
                del flights[slot]

    def side_slot(self, label: str, slot: int | None) -> None:
        """`slot` on `label` is kept for side calls (never given to a new session)."""
        self._side[label] = set() if slot is None or slot < 0 else {slot}

    def settle(self, session_id: str, label: str, slot: int, tok_s: float | None = None) -> None:
        """The server answered the session on (`label`, `slot`): the pin, and the turn's speed."""
        if slot >= 0:
            self._pins[session_id] = (label, slot)
        self.watcher.record_turn(label, tok_s)

    def forget(self, session_id: str) -> None:
        self._pins.pop(session_id, None)

    def views(self, *, exclude: str | None = None) -> list[Any]:
        pinned: dict[str, set[int]] = {}
        for sid, (label, slot) in self._pins.items():
            if sid != exclude:
                pinned.setdefault(label, set()).add(slot)
        in_flight = {lb: set(f) for lb, f in self._in_flight.items()}
        queued = {lb: sum(f.values()) for lb, f in self._in_flight.items()}
        return self.watcher.views(
            in_flight=in_flight, queued=queued, pinned=pinned, reserved=self._side
        )

    # --- the decision --------------------------------------------------------------------------

    async def place(
        self,
        session_id: str,
        *,
        pinned_endpoint: str | None,
        pinned_slot: int | None,
        resumed: bool,
        prompt_tokens: int = 0,
        refresh: bool = True,
    ) -> Placement:
        """The placement of the session's next request. A session this process has not placed
        yet is new (`place_new`) or resumed (`place_resumed`: its endpoint, or the one holding
        its slot file); a placed one keeps its pin unless `/slots` shows another client's work
        there (`check_pin`) or its endpoint is gone (`failover`)."""
        self._probe_speeds()
        held = self._pins.get(session_id)
        if refresh:  # a kept pin needs only its own endpoint's /slots (a slow other one must
            # not delay every turn); a new, resumed or moving session looks at them all
            await self.watcher.poll_once(labels=None if held is None else (held[0],))
            home = self.watcher.latest(held[0]) if held is not None else None
            if held is not None and (home is None or not home.healthy):
                await self.watcher.poll_once()
        views = self.views(exclude=session_id)
        if held is None and not resumed:
            placed = place_new(views, self.model)
        elif held is None:
            placed = place_resumed(
                Pin(pinned_endpoint, pinned_slot), views, self.model, session_id=session_id,
                prompt_tokens=prompt_tokens, default_endpoint=self.registry.default.label,
            )  # fmt: skip
        else:
            label, slot = held
            home = next((v for v in views if v.label == label), None)
            if home is not None and home.healthy:
                placed = check_pin(Pin(label, slot), home, prompt_tokens=prompt_tokens)
            else:
                placed = failover(Pin(label, slot), views, self.model, prompt_tokens=prompt_tokens)
        if placed.action != "wait" and placed.endpoint is not None:
            if placed.slot >= 0:
                self._pins[session_id] = (placed.endpoint, placed.slot)
            elif held is not None and held[0] != placed.endpoint:
                self._pins.pop(session_id, None)
        return placed

    def _probe_speeds(self) -> None:
        """The ready-line probe's tok/s of a connection, once it has landed (it runs beside the
        app after a fresh launch)."""
        for label, conn in self._conns.items():
            if label not in self._probed and conn.probe is not None:
                self._probed.add(label)
                self.watcher.record_speed(label, conn.probe.tok_s)

    async def route(self, placed: Placement) -> Route:
        """The connection for a `use` / `move` placement; `EndpointWait` for a `wait`."""
        if placed.action == "wait" or placed.endpoint is None:
            raise EndpointWait(placed.reason or "no endpoint can take the request now")
        conn = await self.connection(placed.endpoint)
        return Route(placed.endpoint, conn, placed.slot, placed)

    def gone(self, label: str) -> None:
        """`label` did not answer: drop its connection so the next use reconnects."""
        if label in self._own:
            conn = self._conns.pop(label, None)
            if conn is not None:
                self._dead.append(conn)


def slot_groups(
    pins: EndpointPins, current: str | None, owners: Mapping[int, str]
) -> list[EndpointSlots]:
    """Every endpoint's latest probe as a slot-map group (config order); `owners` belong to
    the `current` endpoint."""
    out: list[EndpointSlots] = []
    for ep in pins.registry.endpoints:
        h = pins.watcher.latest(ep.label)
        out.append(
            EndpointSlots(
                label=ep.label,
                healthy=bool(h and h.healthy),
                model=h.model if h else None,
                tok_s=pins.watcher.speed(ep.label),
                slots=tuple(h.slots or ()) if h else (),
                owners=dict(owners) if ep.label == current else {},
                current=ep.label == current,
                error=h.error if h else "not probed yet",
            )
        )
    return out
