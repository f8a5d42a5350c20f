"""Provides `EndpointSlots`: one endpoint's slots as the slot map groups them.

The slot map of an app with several endpoints shows each endpoint under a header with its label,
model, measured decode speed and health; this is the data, built from the health watcher's latest
probes, so the TUI draws without knowing how it was gathered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fusion_tui.server.types import SlotState


@dataclass(frozen=True)
class EndpointSlots:
    """An endpoint's header facts and its slots (empty when it cannot be read)."""

    label: str
    healthy: bool
    model: str | None = None
    tok_s: float | None = None
    slots: tuple[SlotState, ...] = ()
    owners: Mapping[int, str] = field(default_factory=dict)
    """Slot id → who holds it (this session's title, "side"); the current endpoint only."""
    current: bool = False
    """The endpoint of this session's turns."""
    error: str = ""


def header_text(group: EndpointSlots) -> str:
    """Two lines: `◆ gpu-box · ok · 1/2 busy · 41 tok/s` (`down: why` when unhealthy; `◆`
    marks the endpoint of this session), then the model."""
    mark = "◆ " if group.current else "  "
    parts = [f"{mark}{group.label}"]
    if group.healthy:
        busy = sum(1 for s in group.slots if s.is_processing)
        parts.append(f"ok · {busy}/{len(group.slots)} busy" if group.slots else "ok")
        if group.tok_s:
            parts.append(f"{group.tok_s:,.0f} tok/s")
    else:
        why = group.error.splitlines()[0][:60] if group.error else "unreachable"
        parts.append(f"down: {why}")
    head = " · ".join(parts)
    return f"{head}\n  {group.model}" if group.model else head
