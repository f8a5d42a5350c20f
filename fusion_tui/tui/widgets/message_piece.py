"""Provides `Piece`: one Markdown widget of a chat message's body, which can be parked.

A long answer is cut into pieces (see `ChatMessage`); once a piece is frozen its text never
changes, so its height at a given width never does either. A frozen piece is given that height
as a fixed style the first time it has been laid out: arranging the message then needs no
measuring of its blocks. A piece far from the view is parked: its blocks are taken out of the
DOM (not only hidden, which still leaves Textual walking and restyling them on every frame and
every focus change) and the piece keeps its height; it is rebuilt from its text when the view
comes near it again. The width changing makes every kept height stale: `forget_height`.
"""

from __future__ import annotations

from textual.widgets import Markdown, Static


class Piece(Markdown):
    """A Markdown piece of a message. `frozen`: the text it shows for good (None while it is
    still written to); only a frozen piece is sized or parked."""

    frozen: str | None = None
    _rebuilding = False
    _stale_height = False

    @property
    def parked(self) -> bool:
        return self.has_class("-parked")

    @property
    def settling(self) -> bool:
        """Being rebuilt: neither parked nor sized until that is done."""
        return self._rebuilding

    def freeze(self, text: str) -> None:
        self.frozen = text

    def size_once(self) -> None:
        """Keep the height it was laid out at (a frozen piece's never changes at this width)."""
        if self.frozen is None or self._rebuilding or self._stale_height:
            return
        if self.styles.height is None and self.outer_size.height:
            self.styles.height = self.outer_size.height

    def park(self) -> None:
        """Take the blocks out; the kept height holds the piece's place."""
        if self.frozen is None or self._rebuilding or self.parked or self._stale_height:
            return
        if not self.outer_size.height:
            return
        self.styles.height = self.outer_size.height
        self.set_class(True, "-parked", update=False)  # a marker: no restyle
        self.remove_children()

    def unpark(self) -> None:
        """Rebuild the blocks from the frozen text (in the background: parse, then mount)."""
        if not self.parked or self._rebuilding:
            return
        self.set_class(False, "-parked", update=False)
        self._rebuild()

    def forget_height(self) -> None:
        """The width changed: draw the piece again and measure it anew."""
        self._stale_height = True  # until laid out again; a parked one holds its place till then
        if self.parked:
            self.unpark()
        elif not self._rebuilding:
            self._measure_again()

    def _measure_again(self) -> None:
        self.styles.height = None
        self.call_after_refresh(self._measured)

    def _measured(self) -> None:
        self._stale_height = False

    def _rebuild(self) -> None:
        self._rebuilding = True
        self.run_worker(self._rebuilt(), group="piece", exit_on_error=False)

    async def _rebuilt(self) -> None:
        try:
            await self.update(self.frozen or "")
            await self.mount(Static("", classes="pin"))
        finally:
            self._rebuilding = False
        if self._stale_height:
            self._measure_again()
