"""Provides the start-failure notice: what happened, the likely cause, the next step.

A `DaemonStartError` (or `ModelNotFound`) carries its own one-paragraph `message`; the chat shows
that paragraph, never the server log, which stays one key away (the server-log screen). A bad
model file has no log at all, so the notice points at F2 instead. Other exceptions keep the
generic notice of the main screen.
"""

from __future__ import annotations

from typing import Any

from fusion_tui.tui.bindings import LAUNCH_MODEL, SERVER_LOG


def _key_for(app: Any, binding_id: str, default: str) -> str:
    key_for = getattr(app, "key_for", None)
    keys = str(key_for(binding_id)) if callable(key_for) else ""
    return keys or default


def start_failure_notice(app: Any, exc: BaseException) -> str | None:
    """Markdown for the chat column, or None when `exc` has no structured message."""
    message = getattr(exc, "message", None)
    if not isinstance(message, str) or not message:
        return None
    if getattr(exc, "kind", "") == "model":  # no server ran: no log to point at
        return f"**The model cannot be used.**\n\n{message}"
    log = _key_for(app, SERVER_LOG, "ctrl+o")
    return f"**The server did not start.**\n\n{message}\n\n{log} shows the server log."


def notify_start_failed(app: Any, exc: BaseException) -> None:
    """A short toast; the notice in the chat holds the paragraph."""
    what = str(getattr(exc, "what", "") or exc).splitlines()[0]
    if getattr(exc, "kind", "") == "model":
        title, hint = "Model cannot be used", f"{_key_for(app, LAUNCH_MODEL, 'f2')} picks another"
    else:
        title, hint = "Server did not start", f"{_key_for(app, SERVER_LOG, 'ctrl+o')} shows its log"
    app.notify(f"{what}\n{hint}", title=title, severity="error", timeout=30, markup=False)
