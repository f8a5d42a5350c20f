"""Provides `ServerLogScreen`: a live tail of llama-server's log in a capped `Log` widget.

The file is polled by a worker that reads in a thread (file reads block) and stops while the
screen is hidden, so a log nobody looks at costs nothing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Log, Static

from fusion_tui.server.process.log_tail import LogTail
from fusion_tui.tui.bindings import CLOSE_BINDING

MAX_LINES = 5000
"""The widget keeps the newest lines only; the file on disk keeps everything."""
POLL_SECONDS = 0.5


def display_path(path: Path) -> str:
    """`~/...` for paths under the home folder: shorter, and the same on every machine."""
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


class ServerLogScreen(Screen[None]):
    """The daemon's log, newest at the bottom, following new lines as they are written."""

    BINDINGS = [CLOSE_BINDING]

    DEFAULT_CSS = """
    ServerLogScreen > #log-title {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $text;
        text-style: bold;
    }
    ServerLogScreen > Log {
        height: 1fr;
        padding: 0 1;
        scrollbar-size-vertical: 1;
    }
    ServerLogScreen > #log-empty {
        height: 1fr;
        padding: 1 2;
        color: $text-muted;
    }
    """

    def __init__(
        self,
        path: Path | None,
        *,
        poll_seconds: float | None = POLL_SECONDS,
        max_lines: int = MAX_LINES,
    ) -> None:
        super().__init__()
        self.path = path
        self.poll_seconds = poll_seconds
        """Seconds between reads; None reads once per showing (tests)."""
        self.max_lines = max_lines
        self._tail = LogTail(path) if path is not None else None
        self._read_lock = asyncio.Lock()

    def compose(self) -> ComposeResult:
        where = display_path(self.path) if self.path else "no log file"
        yield Static(f"server log · {where}", id="log-title", markup=False)
        yield Log(max_lines=self.max_lines, highlight=False, id="log")
        yield Static(self._empty_text(), id="log-empty", markup=False)
        yield Footer()

    def _empty_text(self) -> str:
        if self.path is None:
            return "This app was started without a log folder, so there is no server log to show."
        return (
            f"No log yet at {display_path(self.path)}.\nThe managed llama-server writes "
            "there once it starts; an external server logs wherever it was started."
        )

    @property
    def log_widget(self) -> Log:
        return self.query_one(Log)

    def on_mount(self) -> None:
        self._show_state()

    def on_screen_resume(self) -> None:
        self.follow_log()

    def on_screen_suspend(self) -> None:
        self.workers.cancel_group(self, "log-tail")

    @property
    def following(self) -> bool:
        return any(w.group == "log-tail" and w.is_running for w in self.workers)

    @work(exclusive=True, group="log-tail", exit_on_error=False, description="tail server log")
    async def follow_log(self) -> None:
        while True:
            await self.read_once()
            if self.poll_seconds is None:
                return
            await asyncio.sleep(self.poll_seconds)

    async def read_once(self) -> int:
        """Append whatever the file gained; returns the number of new lines."""
        if self._tail is None:
            return 0
        async with self._read_lock:  # the poller and a direct call must not read the same bytes
            lines = await asyncio.to_thread(self._tail.read_new)
        if lines:
            self.log_widget.write_lines(lines)
            self._show_state()
        elif not self.log_widget.line_count:
            self._show_state()
        return len(lines)

    def _show_state(self) -> None:
        has_lines = self.log_widget.line_count > 0
        self.log_widget.display = has_lines
        self.query_one("#log-empty").display = not has_lines

    def action_close(self) -> None:
        self.dismiss()
