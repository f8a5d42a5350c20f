"""Provides `PromptProgressBar`: how far the server is through a long prompt, in the chat.

Shown while a prompt is read (a `Progress` event per server progress chunk), hidden at the first
token, at the end of the turn and on cancel. One line: a bar, processed / total, cached tokens,
the evaluation rate and an ETA, so a minutes-long first token is visibly work, not a hang.
"""

from __future__ import annotations

from typing import Any

from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from fusion_tui.chat.events import Progress

BAR_WIDTH = 24


def bar_text(progress: Progress, width: int = BAR_WIDTH) -> str:
    """`▕██████░░░░░░▏ 50% · reading prompt 1,500 / 3,000 · 310 tok/s · ETA 0:05` (pure)."""
    share = progress.fraction or 0.0
    filled = round(share * width)
    bar = "█" * filled + "░" * (width - filled)
    parts = [f"reading prompt {progress.processed:,} / {progress.total:,}"]
    if progress.cache:
        parts.append(f"{progress.cache:,} cached")
    if progress.tokens_per_second:
        parts.append(f"{progress.tokens_per_second:,.0f} tok/s")
    if progress.eta_s is not None:
        minutes, seconds = divmod(round(progress.eta_s), 60)
        parts.append(f"ETA {minutes}:{seconds:02d}")
    return f"▕{bar}▏ {share:.0%} · " + " · ".join(parts)


class PromptProgressBar(Static):
    """The prompt-progress line above the prompt box (hidden when no prompt is being read)."""

    DEFAULT_CSS = """
    PromptProgressBar {
        height: auto;
        padding: 0 1;
        color: $accent;
        display: none;
    }
    PromptProgressBar.-active { display: block; }
    """

    progress: reactive[Progress | None] = reactive(None, layout=True)

    def render(self) -> str:
        """One line when it fits; on a narrow terminal the bar gets a line of its own."""
        if self.progress is None:
            return ""
        line = bar_text(self.progress)
        width = self.size.width - 2
        if width <= 0 or len(line) <= width:
            return line
        bar, _, label = line.partition(" · ")
        return f"{bar}\n{label}"

    def watch_progress(self, progress: Progress | None) -> None:
        self.set_class(progress is not None, "-active")


async def show_progress(screen: Screen[Any], progress: Progress) -> None:
    """Update the screen's bar, mounting it above `#prompt` the first time."""
    try:
        bar = screen.query_one(PromptProgressBar)
    except NoMatches:
        bar = PromptProgressBar(id="prompt-progress")
        prompt = screen.query_one("#prompt")
        parent = prompt.parent
        assert isinstance(parent, Widget)
        await parent.mount(bar, before=prompt)
    bar.progress = progress


def hide_progress(screen: Screen[Any]) -> None:
    for bar in screen.query(PromptProgressBar):
        bar.progress = None
