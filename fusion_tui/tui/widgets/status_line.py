"""Provides `StatusLine`: server state, model, slots, speed, and the last turn's cache use.

The speed is the decode rate of recent turns once there is one (the start-up probe, measured on
a possibly busy machine, stays in the launch record and the ready toast).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from textual.reactive import reactive
from textual.widgets import Static

from fusion_tui.server.types import Timings
from fusion_tui.status import Acceptance, RecentRates, ServerStatus


class StatusLine(Static):
    """One line at the bottom of the main screen. Clock-free, so snapshots stay stable."""

    DEFAULT_CSS = """
    StatusLine {
        height: auto;
        max-height: 2;
        padding: 0 1;
        background: $panel;
        color: $text-muted;
    }
    StatusLine.-ready { color: $text; }
    StatusLine.-error { color: $error; }
    """

    server: reactive[ServerStatus] = reactive(ServerStatus, layout=True)
    """The server facts; replaced whole so an identical update costs nothing."""
    last_turn: reactive[str] = reactive("", layout=True)
    """Telemetry of the last request (slot, cached and evaluated prompt tokens)."""
    activity: reactive[str] = reactive("", layout=True)
    """What is happening right now (waiting for a slot, prompt progress)."""
    recent_rate: reactive[float | None] = reactive(None, layout=True)
    """Median decode rate of the last few turns."""
    acceptance: reactive[float | None] = reactive(None, layout=True)
    """Share of drafted tokens accepted over the last few turns that drafted."""
    endpoint: reactive[str] = reactive("", layout=True)
    """The endpoint of the turn (set only when several endpoints are configured)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rates = RecentRates()
        self._accepted = Acceptance()

    def turn_finished(self, timings: Timings, summary: str) -> None:
        """A request ended: show its telemetry and fold its decode rate into the recent rate."""
        self.last_turn = summary
        if timings.predicted_n > 1:  # a one-token answer has no meaningful rate
            self.recent_rate = self._rates.add(timings.predicted_per_second)
        if timings.draft_n:
            self.acceptance = self._accepted.add(timings.draft_n, timings.draft_n_accepted)

    def render(self) -> str:
        """One line when it fits; else the turn's telemetry goes on a second line, never lost."""
        acceptance = self.acceptance if self.server.speculative else None
        parts = [
            replace(self.server, recent_tok_s=self.recent_rate, acceptance=acceptance).summary()
        ]
        if self.endpoint:  # several endpoints
            parts[0] = f"{self.endpoint} · {parts[0]}"
        if self.activity:
            parts.append(self.activity)
        elif self.last_turn:
            parts.append(self.last_turn)
        line = "  │  ".join(parts)
        width = self.size.width - 2  # padding
        if len(line) <= width or len(parts) == 1:
            return line
        return "\n".join(parts)

    def on_resize(self) -> None:
        self.refresh(layout=True)

    def watch_server(self, status: ServerStatus) -> None:
        self.set_class(status.state == "ready", "-ready")
        self.set_class(status.state == "error", "-error")
