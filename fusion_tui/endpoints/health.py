"""Provides the health watcher: `/health`, `/props` and `/slots` of every endpoint, and speeds.

A probe is bounded (each call has its own timeout and the whole probe a deadline), so a remote
server that is slow or hostile marks that endpoint unhealthy instead of hanging the app. Speeds
come from the launch probe (`record_speed`) and from recent turns (`record_turn`, the server's
own `predicted_per_second`); the median of the last few is used.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from fusion_tui.endpoints.model import Endpoint
from fusion_tui.endpoints.placement import EndpointView, SlotLoad
from fusion_tui.endpoints.registry import EndpointNotReady, EndpointRegistry
from fusion_tui.server.errors import ServerError, SlotsUnavailable
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process.probe import PROBE_PROMPT, model_display_name
from fusion_tui.server.types import SlotState, StreamEnd

PROBE_TIMEOUT = 5.0
"""The longest a whole probe of one endpoint may take."""
RATE_WINDOW = 8


@dataclass(frozen=True)
class EndpointHealth:
    """One probe of one endpoint."""

    label: str
    url: str | None
    healthy: bool
    model: str | None = None
    """Display name of the served model."""
    model_path: str | None = None
    total_slots: int | None = None
    n_ctx: int | None = None
    """Per-slot context."""
    slots: tuple[SlotState, ...] | None = None
    """None when `/slots` is off or was not read."""
    error: str = ""
    checked_at: float = 0.0

    def to_json(self, tok_s: float | None = None) -> dict[str, Any]:
        """The `status --json` entry (`label`, `url`, `healthy`, `model`, `total_slots`, ...)."""
        return {
            "label": self.label,
            "url": self.url,
            "healthy": self.healthy,
            "model": self.model,
            "total_slots": self.total_slots,
            "n_ctx": self.n_ctx,
            "tok_s": tok_s,
            "error": self.error or None,
        }


async def probe_endpoint(
    endpoint: Endpoint,
    client: LlamaClient | None,
    *,
    with_slots: bool = True,
    timeout: float = PROBE_TIMEOUT,
    clock: Callable[[], float] = time.time,
) -> EndpointHealth:
    """Health, props and (optionally) slots of one endpoint, never longer than `timeout`."""
    now = clock()
    if client is None or endpoint.url is None:
        return EndpointHealth(
            endpoint.label, endpoint.url, False, error="not running", checked_at=now
        )
    try:
        with anyio.fail_after(timeout):
            await client.health()
            props = await client.props()
            slots: tuple[SlotState, ...] | None = None
            if with_slots:
                try:
                    slots = tuple(await client.slots(timeout=min(timeout, 3.0)))
                except SlotsUnavailable:
                    slots = None
    except TimeoutError:
        return EndpointHealth(
            endpoint.label, endpoint.url, False,
            error=f"no complete answer within {timeout:g} s", checked_at=now,
        )  # fmt: skip
    except ServerError as exc:
        return EndpointHealth(endpoint.label, endpoint.url, False, error=str(exc), checked_at=now)
    model = model_display_name(props.model_path) if props.model_path else props.model_alias or None
    return EndpointHealth(
        endpoint.label, endpoint.url, True, model=model, model_path=props.model_path or None,
        total_slots=props.total_slots, n_ctx=props.n_ctx, slots=slots, checked_at=now,
    )  # fmt: skip


class HealthWatcher:
    """The latest probe and measured speed of every endpoint in a registry."""

    def __init__(
        self,
        registry: EndpointRegistry,
        *,
        timeout: float = PROBE_TIMEOUT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = registry
        self.timeout = timeout
        self._clock = clock
        self._latest: dict[str, EndpointHealth] = {}
        self._rates: dict[str, deque[float]] = {}

    def latest(self, label: str) -> EndpointHealth | None:
        return self._latest.get(label)

    def all(self) -> list[EndpointHealth]:
        return [self._latest[lb] for lb in self.registry.labels if lb in self._latest]

    def record_speed(self, label: str, tok_s: float | None) -> None:
        """A measured decode speed (the ready-line probe, or a turn's `predicted_per_second`)."""
        if tok_s is None or not tok_s > 0 or tok_s != tok_s or tok_s > 1e7:
            return
        self._rates.setdefault(label, deque(maxlen=RATE_WINDOW)).append(float(tok_s))

    record_turn = record_speed

    def speed(self, label: str) -> float | None:
        rates = self._rates.get(label)
        return statistics.median(rates) if rates else None

    async def measure(
        self, label: str, id_slot: int, *, n_predict: int = 32, timeout: float = 60.0
    ) -> float | None:
        """Measure `label`'s decode speed with the ready-line probe's prompt on `id_slot` (give
        it the side slot: the probe overwrites that slot's cache); None when it fails."""
        body = {
            "prompt": PROBE_PROMPT, "n_predict": n_predict, "ignore_eos": True,
            "cache_prompt": False, "temperature": 0.0, "id_slot": id_slot,
        }  # fmt: skip
        try:
            with anyio.fail_after(timeout):
                async for event in self.registry.client(label).stream_completion(
                    body, idle_timeout=timeout
                ):
                    if isinstance(event, StreamEnd):
                        rate = event.timings.predicted_per_second
                        self.record_speed(label, rate)
                        return rate if rate > 0 else None
        except (TimeoutError, ServerError, EndpointNotReady):
            return None
        return None

    async def poll_once(
        self, *, with_slots: bool = True, labels: Collection[str] | None = None
    ) -> list[EndpointHealth]:
        """Probe every endpoint (or only `labels`) at once; returns them in config order."""
        results: dict[str, EndpointHealth] = {}

        async def one(ep: Endpoint) -> None:
            try:
                client = self.registry.client(ep.label)
            except EndpointNotReady:
                client = None
            results[ep.label] = await probe_endpoint(
                ep, client, with_slots=with_slots, timeout=self.timeout, clock=self._clock
            )

        async with anyio.create_task_group() as tg:
            for ep in self.registry.endpoints:
                if labels is None or ep.label in labels:
                    tg.start_soon(one, ep)
        self._latest.update(results)
        return [results[lb] for lb in self.registry.labels if lb in results]

    async def watch(
        self,
        on_change: Callable[[EndpointHealth], None],
        *,
        interval: float = 5.0,
        with_slots: bool = True,
    ) -> None:
        """Probe every `interval` s until cancelled; `on_change` gets each endpoint whose health
        flipped since the previous probe (gone away, or back)."""
        before: dict[str, bool] = {}
        while True:
            for h in await self.poll_once(with_slots=with_slots):
                if h.label in before and before[h.label] != h.healthy:
                    on_change(h)
                before[h.label] = h.healthy
            await anyio.sleep(interval)

    def changes(self, before: Mapping[str, bool]) -> list[EndpointHealth]:
        """Endpoints whose health differs from `before` (label → healthy)."""
        return [
            h
            for h in self.all()
            if before.get(h.label) is not None and before[h.label] != h.healthy
        ]

    def views(
        self,
        *,
        in_flight: Mapping[str, set[int]] | None = None,
        queued: Mapping[str, int] | None = None,
        pinned: Mapping[str, set[int]] | None = None,
        reserved: Mapping[str, set[int]] | None = None,
        slot_files: Mapping[str, set[str]] | None = None,
    ) -> list[EndpointView]:
        """Placement snapshots from the latest probes plus what the backends know: our slots
        in flight, our queued requests, other sessions' pins and the side-call slots."""
        out: list[EndpointView] = []
        for ep in self.registry.endpoints:
            h = self._latest.get(ep.label)
            ours = (in_flight or {}).get(ep.label, set())
            slots = None
            if h is not None and h.slots is not None:
                slots = tuple(
                    SlotLoad(s.id, s.is_processing, s.id in ours, s.n_prompt_tokens)
                    for s in h.slots
                )
            out.append(
                EndpointView(
                    label=ep.label,
                    healthy=bool(h and h.healthy),
                    model=h.model_path or h.model if h else None,
                    total_slots=(h.total_slots or 0) if h else 0,
                    tok_s=self.speed(ep.label),
                    slots=slots,
                    queued=(queued or {}).get(ep.label, len(ours)),
                    pinned=frozenset((pinned or {}).get(ep.label, set())),
                    reserved=frozenset((reserved or {}).get(ep.label, set())),
                    error=h.error if h else "not probed yet",
                    slot_files=frozenset((slot_files or {}).get(ep.label, set())),
                )
            )
        return out
