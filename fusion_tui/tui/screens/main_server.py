"""Provides `ServerScreen`, the base of `MainScreen`: the server's side of the main screen.

Why a base screen (not a mixin): `start_server` is a Textual `@work` method, which must live on
a Screen class. Here: connecting at start (a failure said in the chat with its next step), the
status line and the ready toast, the slot map beside the chat (and its placeholder while the
launch wizard starts another server), relaunch after a crash, and Stop server.
"""

from __future__ import annotations

from contextlib import suppress

from textual import work
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import Worker, WorkerError

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


class ServerScreen(Screen[None]):
    """The server behind the chat: its start, its status, its slots, its relaunch and stop."""

    def __init__(self, backend: Backend) -> None:
        super().__init__()
        self.backend = backend
        self.server_status = ServerStatus()
        self.ready_toast = ReadyToast()  # shown again with the rate once the probe lands
        self.reply_answered = False
        """The running turn has its answer (`ReplyDone`); what it still does (compaction
        ahead) gives way to the user's next move."""
        self.read_ahead_asked = False
        """The backend was told the user started the next message (`next_message_started`)."""

    @property
    def chat(self) -> ChatView:
        return self.query_one(ChatView)

    @property
    def status_line(self) -> StatusLine:
        return self.query_one(StatusLine)

    @property
    def reply_running(self) -> bool:
        """A turn is in flight; once answered, its compaction ahead is no reply (a new turn
        cuts it short: that turn compacts before its request if it must)."""
        return self._reply_workers() != [] and not self.reply_answered

    def _reply_workers(self) -> list[Worker[None]]:
        return [w for w in self.workers if w.group == "reply" and w.is_running]

    async def settle_reply(self) -> None:
        """Cut short what an answered turn still does before the session or the server changes
        under it, and a read-ahead of the next message (`MainScreen.next_message_started`)."""
        lingering = [w for w in self.workers if w.group == "read-ahead" and w.is_running]
        for worker in [*self._reply_workers(), *lingering]:
            worker.cancel()
            with suppress(WorkerError):
                await worker.wait()

    def report_status(self, status: ServerStatus) -> None:
        self.server_status = status
        self.status_line.server = status
        self.ready_toast.rate_landed(self.app, status)
        for welcome in self.query(Welcome):
            welcome.update_status(status)
        if status.state in ("ready", "error", "stopped"):
            self.query("#slots-pending").remove()  # the launch placeholder's time is over

    @work(exclusive=True, group="server-start", exit_on_error=False)
    async def start_server(self) -> None:
        try:
            status = await self.backend.start(self.report_status)
        except Exception as exc:  # every failure becomes a message the user can act on
            first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self.report_status(ServerStatus(state="error", detail=first_line))
            notice = start_failure_notice(self.app, exc)  # what, cause, next step; no log dump
            if notice is not None:
                await self.chat.add_message("notice", notice)
                notify_start_failed(self.app, exc)
                return
            await self.chat.add_message(
                "notice", f"**The server did not start.**\n\n```\n{exc}\n```"
            )
            notify_server_crashed(self.app, first_line, getattr(exc, "log_tail", ""))
            return
        self.report_status(status)
        self.ready_toast.show(self.app, status)
        if status.fallback:  # the managed start failed, a remote endpoint serves
            await self.chat.add_message("notice", status.fallback)
        await self.mount_slot_map()

    async def mount_slot_map(self) -> None:
        """Beside the chat once the server is up, when the backend can read `/slots`."""
        view = self.backend.slot_view()
        settings = getattr(self.app, "settings", None)
        if view is None or (settings is not None and not settings.ui.slot_map):
            return
        if self.query(SlotMap):
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
        await self.query_one("#body").mount(slot_map)

    def action_toggle_slot_map(self) -> None:
        for slot_map in self.query(SlotMap):
            slot_map.display = not slot_map.display
        if not self.query(SlotMap):
            self.app.notify("The slot map appears once a server is up (F2 launches one).")

    async def server_replaced(self, model: str) -> None:
        """The launch wizard closed the old server to launch `model`: its slot map goes, and
        a placeholder says which server the next map will show."""
        for slot_map in self.query(SlotMap):
            await slot_map.remove()
        await self.query("#slots-pending").remove()
        narrow = self.app.size.width < NARROW_BELOW  # as the map itself: one line on top
        text = f"slots · launching {model}…" if narrow else f"slots\n\nlaunching {model}…"
        note = Static(text, id="slots-pending", markup=False, classes="-narrow" if narrow else "")
        await self.query_one("#body").mount(note)
        self.report_status(ServerStatus(state="starting", model=model))

    async def action_relaunch_server(self) -> None:
        """After a crash: close what is left, then connect again (adopt or launch)."""
        if self.reply_running:
            self.app.notify("A reply is still streaming; Esc cancels it first.")
            return
        await self.settle_reply()
        await self.backend.close()
        self.start_server()

    async def action_stop_server(self) -> None:
        self.workers.cancel_group(self, "reply")
        try:
            said = await self.backend.stop_server()
        except Unavailable as exc:
            self.app.notify(str(exc))
            return
        if said:  # the session's endpoint is remote and still serves it
            self.app.notify(said, title="Server", markup=False)
            return
        self.report_status(ServerStatus(state="stopped", model=self.server_status.model))
        self.app.notify("The managed llama-server was stopped.", title="Server")
