"""Provides `ServerPanel`: the server's side of the main screen, an object the screen holds.

Connecting at start (a failure said in the chat with its next step), the status line and the
ready toast, the slot map beside the chat (and its placeholder while the launch wizard starts
another server), and Stop server. The screen keeps what must live on a Screen (the `@work` start,
the key actions) and calls in here; this object reaches the screen only through `PanelHost`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from textual.app import App
from textual.css.query import DOMQuery
from textual.widgets import Static

from fusion_tui.chat.backend import Backend, Unavailable
from fusion_tui.chat.endpoint_view import GroupedSlotView  # several endpoints
from fusion_tui.status import ServerStatus
from fusion_tui.tui.notices import ReadyToast, notify_server_crashed
from fusion_tui.tui.start_failure import notify_start_failed, start_failure_notice
from fusion_tui.tui.widgets.chat_view import ChatView
from fusion_tui.tui.widgets.endpoint_slot_map import EndpointSlotMap  # several endpoints
from fusion_tui.tui.widgets.slot_map import NARROW_BELOW, SlotMap
from fusion_tui.tui.widgets.status_line import StatusLine
from fusion_tui.tui.widgets.welcome import Welcome


class PanelHost(Protocol):
    """What the panel uses of the screen that holds it."""

    backend: Backend

    @property
    def app(self) -> App[Any]: ...

    @property
    def chat(self) -> ChatView: ...

    @property
    def status_line(self) -> StatusLine: ...

    @property
    def query(self) -> Callable[..., DOMQuery[Any]]: ...

    @property
    def query_one(self) -> Callable[..., Any]: ...


class ServerPanel:
    """The server behind the chat: its start, its status, its slots and its stop."""

    def __init__(self, screen: PanelHost) -> None:
        self.screen = screen
        self.status = ServerStatus()
        self.ready_toast = ReadyToast()  # shown again with the rate once the probe lands

    @property
    def app(self) -> App[Any]:
        return self.screen.app

    def report(self, status: ServerStatus) -> None:
        self.status = status
        self.screen.status_line.server = status
        self.ready_toast.rate_landed(self.app, status)
        for welcome in self.screen.query(Welcome):
            welcome.update_status(status)
        if status.state in ("ready", "error", "stopped"):
            self.screen.query("#slots-pending").remove()  # the launch placeholder's time is over

    async def start(self) -> None:
        """Connect (adopt or launch); every failure becomes a message the user can act on."""
        try:
            status = await self.screen.backend.start(self.report)
        except Exception as exc:
            first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self.report(ServerStatus(state="error", detail=first_line))
            notice = start_failure_notice(self.app, exc)  # what, cause, next step; no log dump
            if notice is not None:
                await self.screen.chat.add_message("notice", notice)
                notify_start_failed(self.app, exc)
                return
            await self.screen.chat.add_message(
                "notice", f"**The server did not start.**\n\n```\n{exc}\n```"
            )
            notify_server_crashed(self.app, first_line, getattr(exc, "log_tail", ""))
            return
        await self.connected(status)

    async def connected(self, status: ServerStatus) -> None:
        """A server serves the chat: say so, and show its slots."""
        self.report(status)
        self.ready_toast.show(self.app, status)
        if status.fallback:  # the managed start failed, a remote endpoint serves
            await self.screen.chat.add_message("notice", status.fallback)
        await self.mount_slot_map()

    async def mount_slot_map(self) -> None:
        """Beside the chat once the server is up, when the backend can read `/slots`."""
        view = self.screen.backend.slot_view()
        settings = getattr(self.app, "settings", None)
        if view is None or (settings is not None and not settings.ui.slot_map):
            return
        if self.screen.query(SlotMap):
            return
        slot_map: SlotMap = SlotMap(
            view.slots,
            view.slot_owners,
            prompt_totals_fn=view.prompt_totals,
            on_disk_fn=view.sessions_on_disk,
            id="slots",
        )
        if isinstance(view, GroupedSlotView):  # several endpoints: slots grouped by endpoint
            slot_map = EndpointSlotMap(
                view.endpoint_groups, view.slot_owners, prompt_totals_fn=view.prompt_totals,
                id="slots",
            )  # fmt: skip
        await self.screen.query_one("#body").mount(slot_map)

    async def remove_slot_map(self) -> None:
        for slot_map in self.screen.query(SlotMap):
            await slot_map.remove()

    def toggle_slot_map(self) -> None:
        for slot_map in self.screen.query(SlotMap):
            slot_map.display = not slot_map.display
        if not self.screen.query(SlotMap):
            self.app.notify("The slot map appears once a server is up (F2 launches one).")

    async def replaced(self, model: str) -> None:
        """The launch wizard closed the old server to launch `model`: its slot map goes, and
        a placeholder says which server the next map will show."""
        await self.remove_slot_map()
        await self.screen.query("#slots-pending").remove()
        narrow = self.app.size.width < NARROW_BELOW  # as the map itself: one line on top
        text = f"slots · launching {model}…" if narrow else f"slots\n\nlaunching {model}…"
        note = Static(text, id="slots-pending", markup=False, classes="-narrow" if narrow else "")
        await self.screen.query_one("#body").mount(note)
        self.report(ServerStatus(state="starting", model=model))

    async def stop(self) -> None:
        """Stop the managed server (a remote endpoint that serves the session is left up)."""
        try:
            said = await self.screen.backend.stop_server()
        except Unavailable as exc:
            self.app.notify(str(exc))
            return
        if said:  # the session's endpoint is remote and still serves it
            self.app.notify(said, title="Server", markup=False)
            return
        self.report(ServerStatus(state="stopped", model=self.status.model))
        self.app.notify("The managed llama-server was stopped.", title="Server")
