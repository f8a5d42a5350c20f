"""Provides `ChatView`: the scrolling column of chat messages, anchored to the newest."""

from __future__ import annotations

from textual import events
from textual.containers import VerticalScroll

from fusion_tui.tui.widgets import heap
from fusion_tui.tui.widgets.chat_message import ChatMessage
from fusion_tui.tui.widgets.welcome import Welcome


class ChatView(VerticalScroll):
    """Holds `ChatMessage`s; stays scrolled to the bottom while the user has not scrolled up."""

    DEFAULT_CSS = """
    ChatView {
        height: 1fr;
        padding: 1 1 0 1;
        scrollbar-size-vertical: 1;
    }
    """

    _parked_width = 0
    BLANK = True  # only its messages draw (see ChatMessage)

    def on_mount(self) -> None:
        self.anchor()
        heap.hold()  # long chats: the collector's full passes stay short (see heap)
        self.watch(self, "scroll_y", self.park, init=False)

    def watch_has_focus(self, has_focus: bool) -> None:
        """Restyle the view alone, not every block of every message below it.

        Textual restyles a widget's whole subtree when its focus changes, in case a rule such as
        `ChatView:focus Markdown` exists; none does (ours or Textual's), and at a 10,000-token
        answer (~770 nodes) the restyle took 0.4-0.9 s each time the focus moved in or out.
        """
        self.app.stylesheet.update_nodes([self], animate=True)

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._parked_width:
            self._parked_width = event.size.width
            for message in self.query_children(ChatMessage):
                message.unpark_all()  # each parks again once laid out at the new width
        else:
            self.call_after_refresh(self.park)  # a taller view shows pieces that were far

    def park(self) -> None:
        """Frozen pieces of long answers far from the view cost no layout (see ChatMessage)."""
        for message in self.query_children(ChatMessage):
            message.park()

    def on_chat_message_grew(self) -> None:
        self.call_after_refresh(self.park)

    def on_unmount(self) -> None:
        heap.release()

    async def add_message(self, role: str, text: str = "") -> ChatMessage:
        """Append a message; the welcome block goes with the first one."""
        await self.query(Welcome).remove()
        message = ChatMessage(role, text)
        await self.mount(message)
        self.call_after_refresh(self.park)  # a long history: what scrolled far up is parked
        return message

    async def clear_messages(self) -> None:
        await self.remove_children()
        heap.refresh()  # the removed messages were frozen: free them now
