"""Provides the notifications for server and session events, worded once for the whole app.

Each takes the app (anything with `notify`) so screens, workers and the integrator's runtime
hooks show the same words. Text from the server or the log is shown with markup off, so square
brackets in it are printed, never parsed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.notifications import Notification, Notify

from fusion_tui.server.process.probe import format_rate
from fusion_tui.status import ServerStatus
from fusion_tui.tui.bindings import SERVER_LOG

CRASH_TAIL_LINES = 4
LINE_WIDTH = 100


def _clip(line: str, width: int = LINE_WIDTH) -> str:
    line = line.rstrip()
    return line if len(line) <= width else line[: width - 1] + "…"


def _key_for(app: Any, binding_id: str, default: str) -> str:
    key_for = getattr(app, "key_for", None)
    return str(key_for(binding_id)) if callable(key_for) else default


def server_ready_text(status: ServerStatus) -> str:
    """`SmolLM2 · 4 slots × 4096 ctx` and, when measured, `~95 tok/s single stream`."""
    head = " · ".join(p for p in (status.model, f"{status.slots} slots × {status.n_ctx} ctx") if p)
    if status.tok_s:
        return f"{head}\n~{format_rate(status.tok_s)} tok/s single stream"
    return head


def notify_server_ready(app: Any, status: ServerStatus) -> None:
    app.notify(server_ready_text(status), title="Server ready", markup=False)


class ReadyToast:
    """The "Server ready" toast. A fresh launch is ready before its throughput probe lands, so
    the first toast has no rate; when the rate comes, the toast is shown again with it (in place
    of the first while that one is still up, else on its own)."""

    def __init__(self) -> None:
        self.shown: Notification | None = None
        self.waiting_for_rate = False

    def show(self, app: Any, status: ServerStatus, title: str = "Server ready") -> None:
        timeout = float(getattr(app, "NOTIFICATION_TIMEOUT", 5.0))
        self.shown = Notification(server_ready_text(status), title, timeout=timeout, markup=False)
        app.post_message(Notify(self.shown))
        self.waiting_for_rate = not status.tok_s

    def rate_landed(self, app: Any, status: ServerStatus) -> None:
        """Called with every status: shows the toast again once a shown one lacked the rate."""
        if not (self.waiting_for_rate and status.state == "ready" and status.tok_s):
            return
        old, title = self.shown, "Server ready"
        unnotify = getattr(app, "_unnotify", None)  # Textual keeps no public way to drop one
        if old is not None and not old.has_expired and callable(unnotify):
            try:
                unnotify(old)
            except KeyError:  # gone meanwhile
                pass
        elif old is not None:
            title = "Server speed measured"
        self.show(app, status, title)


def server_crashed_text(detail: str, log_tail: str | Sequence[str], log_key: str) -> str:
    lines = log_tail.splitlines() if isinstance(log_tail, str) else list(log_tail)
    lines = [_clip(line) for line in lines if line.strip()][-CRASH_TAIL_LINES:]
    first = (detail.strip().splitlines() or ["the server stopped"])[0]
    parts = [_clip(first)]
    if lines:
        parts.append("\n".join(f"  {line}" for line in lines))
    parts.append(f"{log_key} shows the full server log.")
    return "\n".join(parts)


def notify_server_crashed(app: Any, detail: str, log_tail: str | Sequence[str] = "") -> None:
    """An error toast with the last log lines and the key that opens the whole log."""
    text = server_crashed_text(detail, log_tail, _key_for(app, SERVER_LOG, "ctrl+o"))
    app.notify(text, title="Server crashed", severity="error", timeout=30, markup=False)


def notify_slot_restored(app: Any, slot: int, tokens: int, session: str = "") -> None:
    """A session's saved KV came back into its slot: the next turn starts warm."""
    whose = f" for {session!r}" if session else ""
    app.notify(
        f"Slot {slot}: {tokens:,} tokens of context restored{whose}; the next turn starts warm.",
        title="Slot restored",
        markup=False,
    )


def notify_session_saved_after_error(app: Any, session: str, error: str) -> None:
    """A turn failed, but everything up to it is on disk."""
    app.notify(
        f"{session!r} was saved up to the failure; nothing is lost.\n{_clip(error)}",
        title="Session saved after an error",
        severity="warning",
        timeout=12,
        markup=False,
    )
