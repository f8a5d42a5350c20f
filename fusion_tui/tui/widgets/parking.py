"""Provides `Parking`: the frozen pieces of a message far from the view, laid out as one widget.

Textual lays out every displayed widget in every frame, drawn or not, so the frozen pieces of a
long answer that the user is not looking at are parked. A run of consecutive parked pieces is
stood for by its first piece (the run's head): it keeps the height of the whole run and its
blocks are not displayed; the other pieces of the run are not displayed at all. So the frame's
work does not grow with the answer: at any length, a message lays out its visible pieces and at
most one head above and one below them (parking every piece on its own, with its own height,
left 31 pieces in each frame's layout at 10,000 tokens and ~300 at 100,000).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from textual.widget import Widget

HEAD, MEMBER = "head", "member"


class Parking:
    """Which pieces of one message are parked, and the height each had when it was drawn."""

    def __init__(self) -> None:
        self._heights: dict[Widget, int] = {}
        self._roles: dict[Widget, str] = {}
        self._blocks_hidden: set[Widget] = set()

    def height(self, piece: Widget) -> int:
        """The piece's own height: as it was when it was first parked, else as drawn.

        Kept after the piece is drawn again: until the next layout its size on screen is stale
        (a head's is its run's, a member's what it was before it was hidden), and another
        scroll in the same frame must not read it. A frozen piece's height changes only with
        the width (`show_all`)."""
        return self._heights.get(piece, piece.outer_size.height)

    def apply(
        self,
        pieces: Sequence[Widget],
        top: int,
        first: int,
        last: int,
        parkable: Collection[Widget],
    ) -> None:
        """Park the `parkable` pieces that lie outside rows [first, last) of the view's content
        and draw the rest; `top` is the row where the first piece starts. Only a piece laid out
        since it last changed is parkable: its size on screen is its height."""
        wanted: list[bool] = []
        y = top
        for piece in pieces:
            height = self.height(piece)
            near = y < last and y + height > first
            wanted.append(piece in parkable and not near and height > 0)
            y += height
        for index, piece in enumerate(pieces):
            if not wanted[index]:
                self._show(piece)
            elif index and wanted[index - 1]:
                self._park(piece, MEMBER)
        for index, piece in enumerate(pieces):  # heads last: members' heights are recorded
            if wanted[index] and not (index and wanted[index - 1]):
                run = 0
                for other, parked in zip(pieces[index:], wanted[index:], strict=True):
                    if not parked:
                        break
                    run += self.height(other)
                self._park(piece, HEAD, run)

    def show_all(self, pieces: Sequence[Widget]) -> None:
        """Draw every piece again, heights forgotten (the width changed: they are stale)."""
        for piece in pieces:
            self._show(piece)
        self._heights.clear()

    def forget(self) -> None:
        """The pieces were removed (the message was drawn anew)."""
        self._heights.clear()
        self._roles.clear()
        self._blocks_hidden.clear()

    def _park(self, piece: Widget, role: str, run: int = 0) -> None:
        if piece not in self._roles:
            self._heights.setdefault(piece, piece.outer_size.height)
            piece.set_class(True, "-parked", update=False)  # a marker: no restyle of the blocks
        previous = self._roles.get(piece)
        self._roles[piece] = role
        if role == MEMBER:
            if previous != MEMBER:
                piece.display = False
            return
        if previous == MEMBER:
            piece.display = True
        if piece not in self._blocks_hidden:
            self._blocks_hidden.add(piece)
            for block in piece.children:
                block.display = False
        if piece.styles.height is None or piece.styles.height.value != run:
            piece.styles.height = run

    def _show(self, piece: Widget) -> None:
        role = self._roles.pop(piece, None)
        if role is None:
            return
        piece.set_class(False, "-parked", update=False)
        if role == MEMBER:
            piece.display = True
        if piece in self._blocks_hidden:
            self._blocks_hidden.discard(piece)
            for block in piece.children:
                block.display = True
        piece.styles.height = None
