"""Provides `LiveStepBlock`: the agent step in progress, one block updated in place.

It sits between the finished tool blocks and the answer; each `LiveStep` snapshot replaces its
content (throttled to one redraw per THROTTLE_S, the newest snapshot wins), and it is removed
when the turn ends.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

from fusion_tui.chat.live_step import LiveStep

THROTTLE_S = 0.1


def render_step(state: LiveStep) -> Text:
    text = Text(state.title(), style="bold")
    body = state.body()
    if body:
        text.append("\n")
        text.append(body)
    return text


class LiveStepBlock(Static):
    """The step being written: title (phase, progress, tok/s) and the action forming."""

    DEFAULT_CSS = """
    LiveStepBlock {
        height: auto;
        margin: 0 1 1 1;
        padding: 0 1;
        background: $surface;
        border-left: outer $accent 60%;
        color: $text-muted;
    }
    """

    def __init__(self, state: LiveStep) -> None:
        super().__init__(render_step(state))
        self.state = state
        self._pending: LiveStep | None = None
        self._waiting = False

    def show(self, state: LiveStep) -> None:
        """Draw `state` now, or at the end of the current throttle window."""
        self.state = state
        if self._waiting:
            self._pending = state
            return
        self.update(render_step(state))
        self._waiting = True
        self.set_timer(THROTTLE_S, self._flush)

    def _flush(self) -> None:
        self._waiting = False
        pending, self._pending = self._pending, None
        if pending is not None:
            self.show(pending)


async def show_live_step(
    parent: Widget, block: LiveStepBlock | None, state: LiveStep, *, before: Widget
) -> LiveStepBlock:
    """Mount the block before `before` on the first snapshot, update it after that."""
    if block is None:
        block = LiveStepBlock(state)
        await parent.mount(block, before=before)
    else:
        block.show(state)
    return block
