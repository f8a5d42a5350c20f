"""Provides `ChatMessage`: one message of the chat, its answer streamed into Markdown widgets.

Fragments are batched (appended at most ~30 times a second, more at once when the widget falls
behind), and `Markdown.append` re-parses only the last block. What still grew with the answer
was the layout: every update re-arranges all blocks of the live Markdown widget. So finished
blocks are cut off (`markdown_cut.settled_cut`): the live widget is frozen where it stands
(never updated again; the blocks below the cut are moved out) and a new live widget takes the
tail, so each update lays out the tail only. The cut is made where the two halves render
exactly as the whole does. The writer is our own loop rather than MarkdownStream because the
cut must happen between two appends, with nothing in flight.

A frozen piece holds a zero-height `.pin`. Textual sizes a container whose children all have a
dynamic height against its parent's height, which grows with every streamed line, so without the
pin every frame would re-arrange every frozen block; with it a piece's arrangement depends on
its width only and stays cached.

What is left per frame grows with the number of widgets Textual walks, drawn or not; so pieces
far from the view are parked (`park`, `parking`): a run of them is laid out as one widget of
the run's height, until the user scrolls near it again. The collector's full passes are kept
short by `heap` (each cut is followed by one).

The message and its pieces are `BLANK` (Textual draws them as blank lines without rendering
them): their size changes with every streamed line, and a resized container re-rendered all of
its lines, the whole answer's height, each frame (a fifth of a frame at 10,000 tokens).
"""

from __future__ import annotations

import asyncio

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownBlock
from textual.worker import Worker, WorkerError

from fusion_tui.tui.widgets import heap
from fusion_tui.tui.widgets.markdown_cut import has_link_definitions, settled_cut, source_lines
from fusion_tui.tui.widgets.parking import Parking

STEP_CHARS = 500
"""Most text one append takes: a writer far behind catches up in steps, not in one long stall."""

FRAME_S = 1 / 30
"""Pause after each append: the tail is laid out at most ~30 times a second, however fast the
tokens come, and the frames in between cost nothing."""

PARK_DELAY_S = 0.1
"""A cut's frame mounts the new tail; parking waits for a later frame, not to add to that one."""

SETTLE_EVERY = 1
"""Cuts between two `heap.settle` calls. Each settle also freezes the transient objects alive at
that moment (render caches, mostly: ~1,500, a few hundred kB), which then stay in memory until the
chat is cleared. Settling less often lets the unfrozen heap grow between settles and brings the
collector's own full passes back (every 4th cut: 16 passes of up to 32 ms in a 10,000-token
answer, worst lag 90-126 ms instead of 40-45)."""

SETTLE_AT = 0.7
"""Where in the pause after a cut's append the settle runs: after the cut's frame is drawn (the
blocks moved out are garbage only then) and before the next append. Run right after that frame
(`call_after_refresh`), its ~3 ms added to the frame's in one stretch of the event loop."""

ROLE_LABELS = {"user": "you", "assistant": "model", "system": "system", "notice": "·"}


def _hard_breaks(state: StateCore) -> None:
    """Every line break inside a paragraph is kept (Markdown joins the lines of a paragraph)."""
    for token in state.tokens:
        for child in token.children or ():
            if child.type == "softbreak":
                child.type = "hardbreak"


def typed_markdown() -> MarkdownIt:
    """The parser of what the user wrote: lines stay lines. A pasted list of names, a stack
    trace or an address was shown joined into one line, not as the user sent it."""
    parser = MarkdownIt("gfm-like")
    parser.core.ruler.push("hard_breaks", _hard_breaks)
    return parser


class Piece(Markdown):
    """A run of the body's blocks. Blank: its blocks draw everything, the piece itself nothing."""

    BLANK = True

    def __init__(self, markdown: str = "", *, typed: bool = False) -> None:
        super().__init__(markdown, parser_factory=typed_markdown if typed else None)


class ChatMessage(Vertical):
    """A role label, the Markdown body, and a footnote (telemetry or why a turn stopped)."""

    class Grew(Message):
        """A piece was frozen: the view parks what is now far from it."""

    BLANK = True  # no border, no content of its own (see the module docstring)

    DEFAULT_CSS = """
    ChatMessage {
        height: auto;
        margin: 0 0 1 0;
        padding: 0 1;
    }
    ChatMessage > .role {
        color: $text-muted;
        text-style: bold;
    }
    ChatMessage.-user > .role { color: $primary; }
    ChatMessage.-assistant > .role { color: $accent; }
    ChatMessage.-notice { padding: 0 1; margin: 0 0 1 0; }
    ChatMessage.-notice > Markdown { color: $text-muted; }
    ChatMessage > Markdown {
        margin: 0;
        padding: 0;
        background: transparent;
    }
    ChatMessage > Markdown > .pin { height: 0; }
    /* code: long lines wrap inside the pane instead of being cut at its edge (Textual's fence
       scrolls sideways with a hidden scrollbar, which reads as cut in a terminal) */
    ChatMessage MarkdownFence { overflow-x: hidden; }
    ChatMessage MarkdownFence > Label { width: 1fr; text-wrap: wrap; }
    ChatMessage > .footnote {
        color: $text-muted;
        display: none;
    }
    ChatMessage > .footnote.-shown { display: block; }
    ChatMessage.-partial > .footnote { color: $warning; }
    """

    def __init__(self, role: str, text: str = "", *, id: str | None = None) -> None:
        super().__init__(id=id, classes=f"-{role}")
        self.role = role
        self.typed = role == "user"
        """The user's own words: drawn with their line breaks."""
        self._text = text
        self._live_text = text
        """What the live Markdown widget holds; the frozen pieces above it hold the rest."""
        self._live = Piece(text, typed=self.typed)
        self._pending: list[str] = []
        self._wake = asyncio.Event()
        self._finishing = False
        self._writer: Worker[None] | None = None
        self._cuts = 0
        self._parking = Parking()
        self._settled: set[Piece] = set()
        """Pieces laid out since they last changed: the ones that may be parked."""

    def on_mount(self) -> None:
        if self._text:  # drawn at once (history): final from its first layout
            self._settle_piece(self._live)

    def compose(self) -> ComposeResult:
        yield Static(ROLE_LABELS.get(self.role, self.role), classes="role")
        yield self._live
        yield Static("", classes="footnote")

    @property
    def text(self) -> str:
        """Everything written so far (the writer may still be drawing the tail)."""
        return self._text

    @property
    def pieces(self) -> list[Piece]:
        """The Markdown widgets of the body, top to bottom; only the last one is ever updated."""
        return list(self.query_children(Piece))

    def park(self) -> None:
        """Park the frozen pieces more than a quarter of a view's height away from the view;
        draw the rest (see `parking`).

        Positions are in the view's scrolled content (not on screen), so a jump (Home) unparks
        the pieces it lands on before the next frame is drawn; the margin is short because a
        drawn piece is laid out in every frame while the answer streams (a margin of a whole
        view's height above and below: ~20 more widgets at 10,000 tokens, worst lag ~15% more).
        """
        view = self.parent
        pieces = self.pieces
        if not isinstance(view, Widget) or not view.size or not pieces:
            return
        margin = view.size.height // 4
        first = round(view.scroll_y) - margin
        top = pieces[0].virtual_region.y + self.virtual_region.y  # never a hidden one
        parkable = self._settled.difference(pieces[-1:] if self._writer is not None else ())
        self._parking.apply(pieces, top, first, first + view.size.height + 2 * margin, parkable)

    def _settle_piece(self, piece: Piece) -> None:
        """After the next layout: `piece` is final, its size on screen is its height."""

        def settled() -> None:
            if piece.parent is self:  # not removed meanwhile (drawn anew)
                self._settled.add(piece)

        self.call_after_refresh(settled)

    def unpark_all(self) -> None:
        """Draw every piece again (the width changed: the kept heights are stale); each may be
        parked again once laid out at the new width."""
        pieces = self.pieces
        self._parking.show_all(pieces)
        for piece in self._settled.intersection(pieces):
            self._settled.discard(piece)
            self._settle_piece(piece)
        self.call_after_refresh(self.park)  # after those: parked again without a scroll

    async def append(self, fragment: str) -> None:
        if not fragment:
            return
        self._text += fragment
        self._pending.append(fragment)
        if self._writer is None:
            self._writer = self.run_worker(self._write(), group="markdown", exit_on_error=False)
        self._wake.set()
        await asyncio.sleep(0)  # let the writer draw

    async def restart(self) -> None:
        """Drop what was streamed so far (the turn is being sent again elsewhere)."""
        writer, self._writer = self._writer, None
        self._pending.clear()
        if writer is not None:
            writer.cancel()
            try:
                await writer.wait()
            except WorkerError:
                pass  # cancelled: nothing of it is kept
        self._finishing, self._text = False, ""
        await self._render_whole()

    async def finish(self, footnote: str = "", *, partial: bool = False) -> None:
        """Draw what is pending, then the footnote; `partial` marks a turn that did not finish."""
        if self._writer is not None:
            self._finishing = True
            self._wake.set()
            try:
                await self._writer.wait()
            except WorkerError:  # the writer died (a bug) or was cancelled: draw it all anew
                self._pending.clear()
                await self._render_whole()
            finally:
                self._writer, self._finishing = None, False
            if len(self.pieces) > 1 and has_link_definitions(self._text):
                await self._render_whole()
            self._settle_piece(self._live)
            self.post_message(self.Grew())  # complete: its live piece may be parked too
            self.call_after_refresh(heap.settle)  # the whole message is long-lived now
        self.set_footnote(footnote)
        self.set_class(partial, "-partial")

    def set_footnote(self, footnote: str) -> None:
        note = self.query_one(".footnote", Static)
        note.update(footnote)
        note.set_class(bool(footnote), "-shown")

    async def _write(self) -> None:
        """Append whatever piled up since the last append, then cut off finished blocks."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._pending:
                batch = "".join(self._pending)
                self._pending.clear()
                if len(batch) > STEP_CHARS:  # far behind: a bounded step, the rest right after
                    end = batch.rfind("\n", 0, STEP_CHARS) + 1 or STEP_CHARS
                    batch, rest = batch[:end], batch[end:]
                    self._pending.append(rest)
                    self._wake.set()
                self._live_text += batch
                await self._live.append(batch)
                settle = "\n" in batch and await self._cut()
                # what arrives meanwhile is the next batch
                await asyncio.sleep(FRAME_S * SETTLE_AT)
                if settle:
                    # the blocks moved out are garbage now: a short full pass frees them and
                    # what is left alive (the frozen pieces, mostly) is frozen
                    heap.settle()
                await asyncio.sleep(FRAME_S * (1 - SETTLE_AT))
            if self._finishing and not self._pending:
                return

    async def _cut(self) -> bool:
        """Freeze the live widget above its settled cut; a new live widget takes the tail.

        Returns whether a settle is due (`SETTLE_EVERY`)."""
        cut = settled_cut(self._live_text)
        if cut is None:
            return False
        tail = "".join(source_lines(self._live_text)[cut:])
        frozen = self._live
        below = [b for b in frozen.query_children(MarkdownBlock) if b.source_range[0] >= cut]
        with self.app.batch_update():  # no frame shows the tail missing
            await frozen.remove_children(below)
            await frozen.mount(Static("", classes="pin"))
            await asyncio.sleep(0)  # the steps of a cut are short stalls, not one long one
            self._live, self._live_text = Piece(typed=self.typed), tail
            await self.mount(self._live, after=frozen)
            # appended, not passed to Markdown(): after an initial document that ends in a blank
            # line, Textual 8.2's Markdown.append would overwrite that document's last block
            await self._live.append(tail)
        self._cuts += 1
        self._settle_piece(frozen)
        self.set_timer(PARK_DELAY_S, lambda: self.post_message(self.Grew()))
        return self._cuts % SETTLE_EVERY == 0

    async def _render_whole(self) -> None:
        """A link definition can act on text above it: draw the answer as one document."""
        with self.app.batch_update():
            await self.remove_children(Piece)
            self._parking.forget()
            self._settled.clear()
            self._live, self._live_text = Piece(self._text, typed=self.typed), self._text
            await self.mount(self._live, before=self.query_one(".footnote"))
