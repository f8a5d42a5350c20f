"""Provides the plain-text status facts shown by the app and printed by the CLI.

Pure formatting: the TUI's status line and `fusion-tui status` read the same words.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_tui.server.probe import format_rate
from fusion_tui.server.types import Timings


@dataclass(frozen=True)
class ServerStatus:
    """What the app knows about its server right now."""

    state: str = "starting"
    """`starting`, `building`, `loading`, `ready`, `error`, `stopped`."""
    model: str = ""
    slots: int = 0
    n_ctx: int = 0
    """Per-slot context."""
    tok_s: float | None = None
    """Measured single-stream decode speed."""
    detail: str = ""

    def summary(self) -> str:
        if self.state != "ready":
            return " · ".join(p for p in (self.state, self.model, self.detail) if p)
        parts = ["ready", self.model, f"{self.slots} slots × {self.n_ctx} ctx"]
        if self.tok_s:
            parts.append(f"~{format_rate(self.tok_s)} tok/s single stream")
        return " · ".join(p for p in parts if p)


def turn_summary(timings: Timings, id_slot: int) -> str:
    """One line of telemetry for a finished request, e.g. for the status line and the chat."""
    total = timings.cache_n + timings.prompt_n
    return (
        f"slot {id_slot} · {timings.cache_n:,}/{total:,} prompt tokens cached · "
        f"{timings.prompt_n:,} evaluated · {timings.predicted_per_second:.1f} tok/s"
    )
