"""Provides `StatusLine`: server state, model, slots, speed, and the last turn's cache use."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Static

from fusion_tui.status import ServerStatus


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

    def render(self) -> str:
        """One line when it fits; else the turn's telemetry goes on a second line, never lost."""
        parts = [self.server.summary()]
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
