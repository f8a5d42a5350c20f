"""Provides `AgentHost`: what every agent session's runs share on one daemon.

Why apart from the runs: it is fixed for a daemon's lifetime — the connection, the slot pins, the
per-slot gate (one request of ours in flight per slot), the template frame (probed once per daemon
and cached: `/apply-template` on sentinel messages), the machine facts and the byte-stable prefix
they shape — while `session_run.SessionRunner` runs many sessions' turns on it.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fusion_tui.agent.delegate import DelegatePolicy
from fusion_tui.agent.endpoint_run import EndpointRun
from fusion_tui.agent.prompt import MachineFacts, PrefixReuse, build_stable_prefix
from fusion_tui.agent.request import CompletionFn
from fusion_tui.agent.task import tools_for
from fusion_tui.agent.tools.registry import CORE_TOOLS
from fusion_tui.server.connect import Connection
from fusion_tui.server.process.probe import model_display_name
from fusion_tui.server.template import TemplateFrame, template_frame
from fusion_tui.server.types import StreamEvent
from fusion_tui.sessions import model as sm
from fusion_tui.slots.gate import OnWait, SlotGate, slots_busy_probe
from fusion_tui.slots.pins import SlotPool

StreamFn = Callable[..., AsyncIterator[StreamEvent]]


def machine_facts(conn: Connection) -> MachineFacts:
    """Props, the launch probe's tok/s and the fit's prefix-reuse class ("full" when unknown)."""
    props = conn.props
    reuse: PrefixReuse = "full"
    fit = conn.record.fit if conn.record is not None else None
    if isinstance(fit, dict) and fit.get("prefix_reuse") in ("full", "checkpoint", "none"):
        reuse = fit["prefix_reuse"]
    name = model_display_name(props.model_path) if props.model_path else props.model_alias
    return MachineFacts(
        model=name or "unknown",
        slots=props.total_slots,
        ctx_per_worker=props.n_ctx,
        tok_per_s=conn.probe.tok_s if conn.probe is not None else None,
        prefix_reuse=reuse,
    )


def gated_completion(
    stream: StreamFn, gate: SlotGate, on_wait: OnWait | None = None
) -> CompletionFn:
    """`stream(body)` under the slot gate: at most one request of ours per slot at a time."""

    async def completion(body: dict[str, Any]) -> AsyncIterator[StreamEvent]:
        async with gate.hold(int(body.get("id_slot", -1)), on_wait) as lease:
            events = stream({**body, "id_slot": lease.slot})
            try:
                async for event in events:
                    yield event
            finally:
                aclose = getattr(events, "aclose", None)
                if aclose is not None:
                    await aclose()

    return completion


@dataclass
class AgentHost:
    """What every session's runs share on one daemon."""

    conn: Connection
    pool: SlotPool
    gate: SlotGate
    frame: TemplateFrame
    machine: MachineFacts
    stable_prefix: str
    delegate: DelegatePolicy | None = None
    idle_timeout: float | None = None
    on_wait: OnWait | None = None
    routing: EndpointRun | None = None
    """Several endpoints: the run's endpoint, its checks and its failover."""

    @classmethod
    async def open(
        cls,
        conn: Connection,
        *,
        pool: SlotPool | None = None,
        gate: SlotGate | None = None,
        frame: TemplateFrame | None = None,
        idle_timeout: float | None = None,
        configured_workers: int | None = None,
        project_facts: str = "",
    ) -> AgentHost:
        props = conn.props
        if pool is None:
            pool = SlotPool()
        pool.update(props.total_slots, props.model_path, conn.launch_id)
        if gate is None:
            gate = SlotGate(
                lambda: pool.total_slots, busy_probe=slots_busy_probe(conn.client.slots)
            )
        if frame is None:
            frame = await template_frame(conn)
        machine = machine_facts(conn)
        delegate = None
        if props.total_slots > 1:
            delegate = DelegatePolicy(
                total_slots=props.total_slots,
                slot_affine=conn.record is not None,
                configured_workers=configured_workers,
            )
        tools = tools_for(CORE_TOOLS, delegate is not None)
        prefix = build_stable_prefix(tools, machine, project_facts)
        return cls(conn, pool, gate, frame, machine, prefix, delegate, idle_timeout)

    def completion(self) -> CompletionFn:
        if self.routing is not None:  # several endpoints: checked per request
            return self.routing.completion(self.gate, self.idle_timeout, self.on_wait)
        client, idle = self.conn.client, self.idle_timeout

        def stream(body: dict[str, Any]) -> AsyncIterator[StreamEvent]:
            return client.stream_completion(body, idle_timeout=idle)

        return gated_completion(stream, self.gate, self.on_wait)

    @property
    def current(self) -> Connection:
        """The connection the session's requests go to now: with several endpoints the run's
        endpoint (it changes on a move), else the host's own."""
        return self.routing.conn if self.routing is not None else self.conn

    @property
    def n_ctx(self) -> int:
        """The context of a slot where the requests go now."""
        return self.current.props.n_ctx

    @property
    def identity(self) -> sm.ServerIdentity:
        conn = self.current
        props = conn.props
        return sm.ServerIdentity(props.model_path, conn.launch_id, props.total_slots)

    @property
    def prefix_hash(self) -> str:
        return hashlib.sha256(self.stable_prefix.encode()).hexdigest()[:16]
