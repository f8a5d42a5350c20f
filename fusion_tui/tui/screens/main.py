"""Provides `MainScreen`: the chat, the prompt box, the status line; runs turns in a worker.

The server's side (start, status, slot map, stop) is an object it holds, `self.server`
(`server_panel.ServerPanel`); the screen keeps what must live on a Screen: the `@work` start and
the key actions.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing, suppress

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, TextArea
from textual.worker import Worker, WorkerError

from fusion_tui.chat.backend import Backend, Unavailable
from fusion_tui.chat.events import (
    AnswerRestarted,  # several endpoints: a broken answer sent again elsewhere
    Compacted,
    LiveStep,  # agent mode: the step in progress
    Notice,
    Progress,  # the prompt being read
    ReplyDone,
    StreamEnd,
    TextDelta,
    ToolBlock,  # agent mode: tool-call blocks
    TurnEndpoint,  # several endpoints
)
from fusion_tui.server.errors import ServerError
from fusion_tui.status import ServerStatus, turn_summary
from fusion_tui.tui.bindings import MAIN_SCREEN_BINDINGS
from fusion_tui.tui.screens.server_panel import ServerPanel
from fusion_tui.tui.sigill_relaunch import relaunch_after_sigill  # a request's SIGILL
from fusion_tui.tui.widgets.chat_view import ChatView
from fusion_tui.tui.widgets.live_step import LiveStepBlock, show_live_step
from fusion_tui.tui.widgets.prompt_input import PromptInput
from fusion_tui.tui.widgets.prompt_progress import hide_progress, show_progress
from fusion_tui.tui.widgets.slot_map import SlotMap
from fusion_tui.tui.widgets.status_line import StatusLine
from fusion_tui.tui.widgets.tool_call import ToolCallBlock
from fusion_tui.tui.widgets.welcome import Welcome

QUIT_WINDOW_S = 3.0
"""How long after one idle Ctrl+C a second one quits."""


class MainScreen(Screen[None]):
    """The session: what was said, what is being said, and what the server is doing."""

    BINDINGS = [
        Binding("escape", "cancel_reply", "Cancel", id="cancel"),
        # Ctrl+C: a selection in the prompt box copies (TextArea's own binding); else this
        Binding("ctrl+c", "interrupt", show=False),
        Binding("ctrl+l", "focus_prompt", "Prompt", id="focus-prompt", show=False),
        Binding("f5", "relaunch_server", "Relaunch server", id="relaunch-server", show=False),
        *MAIN_SCREEN_BINDINGS,
    ]

    DEFAULT_CSS = """
    MainScreen > #body { height: 1fr; }
    MainScreen #chat-column { width: 1fr; }
    MainScreen #slots-pending {
        width: 46; height: 1fr; padding: 0 0 0 1;
        border-left: vkey $panel-lighten-2; color: $text-muted;
    }
    MainScreen #slots-pending.-narrow {
        dock: top; width: 100%; height: 1; border-left: none; padding: 0 1; background: $panel;
    }
    """

    def __init__(self, backend: Backend, *, autostart: bool = True) -> None:
        super().__init__()
        self.backend = backend
        self.server = ServerPanel(self)
        self.autostart = autostart
        self._quit_armed = False
        """Ctrl+C was pressed once while idle: a second press quits."""
        self.reply_answered = False
        """The running turn has its answer (`ReplyDone`); what it still does (compaction
        ahead) gives way to the user's next move."""
        self.read_ahead_asked = False
        """The backend was told the user started the next message (`next_message_started`)."""
        self.queued = False
        """The user sent a message while the model was loading or a reply ran: it waits in
        the box and goes as soon as the server is ready and the reply over (Esc keeps it
        there). Typed during a load of a minute or an agent's task, it would otherwise wait
        for the user to notice and press Enter again."""

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
        under it, and a read-ahead of the next message (`next_message_started`)."""
        lingering = [w for w in self.workers if w.group == "read-ahead" and w.is_running]
        for worker in [*self._reply_workers(), *lingering]:
            worker.cancel()
            with suppress(WorkerError):
                await worker.wait()

    @work(exclusive=True, group="server-start", exit_on_error=False)
    async def start_server(self) -> None:
        await self.server.start()
        await self.send_queued()

    def queue(self, prompt: PromptInput, text: str, *, after: str) -> None:
        """Keep a message sent while the model loads or a reply runs in the box, to go once
        that is over (`after`: what it waits for, as the box says it)."""
        prompt.give_back(text)
        self.queued = True
        prompt.border_subtitle = f"queued: goes {after} · esc keeps it here"
        self.refresh_bindings()

    def unqueue(self) -> None:
        self.queued = False
        self.query_one(PromptInput).border_subtitle = ""
        self.refresh_bindings()

    async def send_queued(self) -> None:
        """The server is up (or failed), or the reply before it ended: send the message
        queued meanwhile, as the box holds it now. After a failed start it stays in the box,
        the notice says why."""
        if not self.queued or self.reply_running:
            return
        self.unqueue()
        prompt = self.query_one(PromptInput)
        text = prompt.text.strip()
        if self.server.status.state != "ready" or not text:
            return
        prompt.clear()
        await self.chat.add_message("user", text)
        self.run_reply(text)

    def action_toggle_slot_map(self) -> None:
        self.server.toggle_slot_map()

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
        await self.server.stop()

    def compose(self) -> ComposeResult:
        with Horizontal(id="body"), Vertical(id="chat-column"):
            yield ChatView(id="chat")
            yield PromptInput(id="prompt")
        yield StatusLine(id="status")
        yield Footer()

    async def on_mount(self) -> None:
        prompt = self.query_one(PromptInput)
        prompt.cursor_blink = self.app_cursor_blink
        prompt.focus()
        await self.draw_history()
        if self.autostart:
            self.start_server()

    def on_key(self, event: events.Key) -> None:
        """A key typed while the app started reaches the screen, not the box: Textual sent it
        on before anything had focus (seen in the trial: a task typed in the first second after
        the command went nowhere, the box empty). It goes to the box now, an Enter sends."""
        prompt = self.query_one(PromptInput)
        if self.focused not in (None, prompt) or not (event.is_printable or event.key == "enter"):
            return
        event.stop()
        prompt.focus()
        if event.key != "enter":
            prompt.insert(event.character or "")
        else:
            prompt.submit()

    async def draw_history(self) -> None:
        """The session's messages; a turn cut short keeps its mark ("cancelled") on resume."""
        history = self.backend.history()
        for said in history:
            message = await self.chat.add_message(said.role, said.text)
            if said.partial_reason:
                await message.finish(cut_short_note(said.partial_reason, said.text), partial=True)
        if not history:
            await self.show_welcome()

    async def show_welcome(self) -> None:
        """An empty chat says what to do: the model, how to send, the keys that matter."""
        if self.chat.query(Welcome):
            return
        key_for = getattr(self.app, "key_for", None) or (lambda _id: "")
        workspace = getattr(self.app, "workspace", None)
        await self.chat.mount(
            Welcome(self.server.status, key_for, workspace=str(workspace) if workspace else None)
        )

    @property
    def app_cursor_blink(self) -> bool:
        return bool(getattr(self.app, "cursor_blink", True))

    @on(SlotMap.SlotSelected)
    async def open_slot_session(self, event: SlotMap.SlotSelected) -> None:
        view = self.backend.slot_view()
        session_id = view.session_on_slot(event.slot_id) if view is not None else None
        if session_id:
            await self.open_session(session_id)
        else:
            self.app.notify(f"slot {event.slot_id} holds no session of this app")

    def action_sessions(self) -> None:
        from fusion_tui.tui.screens.sessions import SessionsScreen

        catalog = self.backend.sessions()
        if catalog is None:
            self.app.notify("sessions are not available with this backend")
            return

        async def chosen(session_id: str | None) -> None:
            if session_id:
                await self.open_session(session_id)

        self.app.push_screen(SessionsScreen(catalog), chosen)

    async def use_backend(self, backend: Backend, status: ServerStatus) -> None:
        """Switch to a backend that is already connected (the launch wizard made it)."""
        self.workers.cancel_group(self, "reply")
        self.backend = backend
        await self.server.remove_slot_map()
        await self.chat.clear_messages()
        await self.draw_history()
        self.status_line.last_turn = ""
        await self.server.connected(status)
        await self.send_queued()

    @work(group="title", exit_on_error=False)
    async def make_title(self) -> None:
        """A side call (on the reserved slot) names the session after its first turn."""
        await self.backend.make_title()

    @work(group="compact", exclusive=True, exit_on_error=False)
    async def compact_session(self) -> None:
        """The palette's "Compact session": older turns summarised in the prompt (a side call);
        the chat keeps every message."""
        if self.reply_running:
            self.app.notify("A reply is streaming; compact after it ends.")
            return
        await self.settle_reply()
        try:
            note = await self.backend.compact()
        except ServerError as exc:  # Unavailable included
            self.app.notify(str(exc), markup=False)
            return
        self.app.notify(note or "Nothing to compact yet.", markup=False)

    async def action_new_session(self) -> None:
        """Start a fresh session; the current one stays saved (and its slot warm)."""
        if self.reply_running:
            self.app.notify("A new session cannot start now (a reply is streaming?)")
            return
        await self.settle_reply()
        try:
            await self.backend.new_session()
        except Unavailable as exc:
            self.app.notify(str(exc))
            return
        await self.chat.clear_messages()
        self.status_line.last_turn = ""
        await self.show_welcome()

    async def open_session(self, session_id: str) -> None:
        """Switch the chat to another saved session; its next request rides its warm slot."""
        if self.reply_running:
            self.app.notify("A reply is still streaming; Esc cancels it first.")
            return
        await self.settle_reply()
        try:
            await self.backend.open_session(session_id)
        except Exception as exc:
            self.app.notify(str(exc).splitlines()[0], title="Sessions", severity="error")
            return
        await self.chat.clear_messages()
        await self.draw_history()

    @on(TextArea.Changed, "#prompt")
    def next_message_started(self) -> None:
        """The first keys of the next message (or keys typed while the answer streamed, once it
        is done): the backend prepares its turn while the user types (the plain chat reads the
        next prompt's opening into the session's slot), so that work is off the first token.
        Once per message."""
        if self.read_ahead_asked or self.reply_running or self.server.status.state != "ready":
            return
        if not self.query_one(PromptInput).text.strip():
            return
        self.read_ahead_asked = True
        self.run_worker(self.backend.read_ahead(), group="read-ahead", exit_on_error=False)

    @on(PromptInput.Submitted)
    async def send(self, event: PromptInput.Submitted) -> None:
        if self.server.status.state == "error":  # the notice in the chat says why
            self.app.notify(
                "The server did not start; your message is still in the box. "
                "F2 picks a model, F5 tries again."
            )
            event.prompt_input.give_back(event.text)
            return
        if self.server.status.state != "ready":
            self.queue(event.prompt_input, event.text, after="once the model is ready")
            return
        if self.reply_running:
            self.queue(event.prompt_input, event.text, after="when this reply ends")
            return
        await self.chat.add_message("user", event.text)
        self.run_reply(event.text)

    @on(PromptInput.SendWhenFree)
    async def send_when_free(self, event: PromptInput.SendWhenFree) -> None:
        """A message typed into a modal and ended with Enter there: sent as if Enter had been
        pressed in the box (queued behind the running turn)."""
        text = event.prompt_input.text.strip()
        if not text:
            return
        event.prompt_input.clear()
        await self.send(PromptInput.Submitted(event.prompt_input, text))

    @property
    def first_turn(self) -> bool:
        return sum(1 for said in self.backend.history() if said.role == "user") == 1

    @work(exclusive=True, group="reply", exit_on_error=False)
    async def run_reply(self, text: str) -> None:
        self.reply_answered = False
        self.read_ahead_asked = False  # the next message, typed after this one, reads ahead
        message = await self.chat.add_message("assistant")
        status = self.status_line
        measured = False
        """A request of this turn reported its telemetry."""
        live: LiveStepBlock | None = None  # agent mode: the step in progress
        tools = 0
        sigill = False  # the server died of SIGILL at this request
        try:
            async with aclosing(self.backend.reply(text)) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        status.activity = ""
                        hide_progress(self)  # prompt progress bar: gone at the first token
                        await message.append(event.text)
                    elif isinstance(event, Progress):
                        if live is None:  # the bar says it; a notice before it is over
                            status.activity = ""
                            await show_progress(self, event)
                        else:  # an agent step: its block shows the reading, the line the count
                            status.activity = progress_text(event)
                    elif isinstance(event, AnswerRestarted):  # the new answer replaces it
                        status.activity = event.text
                        await message.restart()
                    elif isinstance(event, Notice):
                        status.activity = event.text
                        if isinstance(event, Compacted):
                            self.app.notify(event.text, markup=False)
                            if self.reply_answered:  # compacted ahead: the turn is over
                                status.activity = ""
                    elif isinstance(event, StreamEnd):
                        measured = True
                        status.turn_finished(
                            event.timings, turn_summary(event.timings, event.id_slot)
                        )
                    elif isinstance(event, ReplyDone):
                        self.reply_answered = True
                        self.refresh_bindings()
                        status.activity = ""
                        if event.outcome != "completed" and not measured:
                            status.last_turn = f"last turn {event.outcome}"  # not the one before
                        if live is not None:
                            await live.remove()
                            live = None
                        await message.finish(event.note, partial=event.partial)
                        self.next_message_started()  # typed while the answer streamed
                        if event.outcome == "completed" and self.first_turn:
                            self.make_title()
                        elif event.outcome == "error" and await self.backend.died_of_sigill():
                            sigill = True
                        elif event.outcome == "error":
                            kept = "the partial answer and " if message.text.strip() else ""
                            self.app.notify(
                                f"{event.note}\nF5 relaunches the server; {kept}the session "
                                "is saved.",
                                title="Turn failed",
                                severity="error",
                                markup=False,
                            )
                    elif isinstance(event, TurnEndpoint):  # several endpoints
                        status.endpoint = event.label
                    elif isinstance(event, ToolBlock):  # agent mode: above the answer
                        tools += 1
                        await self.chat.mount(ToolCallBlock(event), before=live or message)
                    elif isinstance(event, LiveStep):
                        live = await show_live_step(self.chat, live, event, before=message)
            if sigill:  # relaunched with repacking off; the message back in the box
                self.run_worker(relaunch_after_sigill(self, text), exit_on_error=False)
        except asyncio.CancelledError:
            status.activity = ""
            if self.reply_answered:  # only the compaction ahead was cut short
                raise
            status.last_turn = "last turn cancelled"
            note = cut_short_note("cancelled", message.text)
            if tools and not message.text.strip():  # agent mode: the steps above are kept
                note = "cancelled · no answer yet; the tool calls above are kept"
            await message.finish(note, partial=True)
            raise
        except Exception as exc:
            status.activity = ""
            if self.reply_answered:  # the answer stands; the next turn compacts if it must
                self.app.notify(f"compacting ahead failed: {exc}", markup=False)
                return
            await message.finish(f"error · {exc}", partial=True)
        finally:
            hide_progress(self)
            if live is not None:
                live.remove()

    def action_cancel_reply(self) -> None:
        if self.queued:
            self.unqueue()
            self.app.notify("Your message stays in the box: Enter sends it.")
            return
        self.workers.cancel_group(self, "reply")

    def action_interrupt(self) -> None:
        """Ctrl+C: cancel a running reply first (the partial answer kept, as Esc; a message
        queued behind it stays in the box, not sent); when idle, quit on a second press within
        a few seconds (one stray press loses nothing)."""
        if self.reply_running:
            if self.queued:
                self.unqueue()
            self.workers.cancel_group(self, "reply")
            return
        if self._quit_armed:
            self.app.exit()
            return
        self._quit_armed = True
        self.set_timer(QUIT_WINDOW_S, self._disarm_quit)
        self.app.notify(
            f"Press Ctrl+C again to quit ({self.app_quit_key} quits at once).", title="Quit?"
        )

    def _disarm_quit(self) -> None:
        self._quit_armed = False

    @property
    def app_quit_key(self) -> str:
        key_for = getattr(self.app, "key_for", None)
        return (key_for("quit") if key_for else "") or "Ctrl+Q"

    def action_scroll_chat(self, direction: int) -> None:
        """A page of the chat up or down, wherever the focus is (the prompt box keeps it)."""
        if direction < 0:
            self.chat.scroll_page_up()
        else:
            self.chat.scroll_page_down()

    def action_focus_prompt(self) -> None:
        self.query_one(PromptInput).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_reply":
            return self.reply_running or self.queued
        return True

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.refresh_bindings()
        if self.queued and event.worker.group == "reply" and event.worker.is_finished:
            self.call_later(self.send_queued)  # a message queued behind this reply


def cut_short_note(reason: str, text: str) -> str:
    """The footnote of a turn that did not finish: why, and whether anything was kept."""
    kept = "partial answer kept" if text.strip() else "nothing was generated"
    return f"{reason} · {kept}"


def progress_text(event: Progress) -> str:
    total = max(event.total, 1)
    share = (event.processed) / total
    return (
        f"reading prompt {event.processed:,}/{event.total:,} ({share:.0%}, {event.cache:,} cached)"
    )
