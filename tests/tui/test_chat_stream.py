"""A long streamed answer is cut into frozen pieces and parked off-screen, and looks exactly like
the same answer drawn in one go."""

from __future__ import annotations

import gc
import hashlib
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Markdown

from fusion_tui.tui.widgets import heap
from fusion_tui.tui.widgets.chat_message import PARK_DELAY_S, ChatMessage
from fusion_tui.tui.widgets.chat_view import ChatView
from tests.tui.svg_cells import cells

SECTION = """## Part {n}

The slot keeps its `prompt` cached, so **each** turn costs only the new tokens ({n}).
A second line of the same paragraph, long enough to wrap in a narrow pane of the chat view.

- first point of part {n}
- second point, with `code`

```python
def part_{n}():

    total = 0


    return total
```

1. one
2. two

> a quoted remark about part {n}

| slot | tokens |
| ---- | ------ |
| {n}  | 2,048  |

Plain closing words of part {n}.

---

"""
ANSWER = "".join(SECTION.format(n=n) for n in range(1, 5)) + "The end, without a newline."


def fragments(text: str) -> list[str]:
    """Token-like pieces: short runs, blank lines on their own now and then."""
    out, i = [], 0
    while i < len(text):
        step = 2 + (i * 7) % 9
        out.append(text[i : i + step])
        i += step
    return out


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield ChatView()


async def _streamed(pilot: Any, text: str) -> ChatMessage:
    view = pilot.app.query_one(ChatView)
    message = await view.add_message("assistant")
    for k, fragment in enumerate(fragments(text)):
        await message.append(fragment)
        if k % 25 == 0:
            await pilot.pause()  # let frames happen mid-stream, as they do with a real server
    await message.finish("done")
    await pilot.pause()
    return message


async def _one_shot(pilot: Any, text: str) -> ChatMessage:
    message = await pilot.app.query_one(ChatView).add_message("assistant", text)
    await message.finish("done")
    await pilot.pause()
    return message


def _drawn(svg: str) -> tuple[list[str], str]:
    """The screenshot's text rows (a readable diff), and a digest of every cell (styles too)."""
    drawn = cells(svg)
    height = 1 + max(row for row, _ in drawn)
    width = 1 + max(column for _, column in drawn)
    rows = [
        "".join(drawn.get((r, c), (None, " ", ""))[1] for c in range(width)) for r in range(height)
    ]
    return rows, hashlib.sha256(repr(sorted(drawn.items())).encode()).hexdigest()


async def _screen(
    make: Any, size: tuple[int, int], *, home: bool = False, text: str = ANSWER
) -> tuple[Any, int]:
    app = Host()
    async with app.run_test(size=size) as pilot:
        message = await make(pilot, text)
        view = app.query_one(ChatView)
        if home:
            view.scroll_home(animate=False)
            await pilot.pause()
            await pilot.pause()
        assert message.text == text
        pieces = len(message.pieces)
        return _drawn(app.export_screenshot()), pieces


async def test_a_streamed_answer_looks_like_the_same_answer_drawn_at_once() -> None:
    streamed, pieces = await _screen(_streamed, (100, 260))
    once, one = await _screen(_one_shot, (100, 260))
    assert pieces >= 3 and one == 1  # it was cut, and the one-shot message was not
    assert streamed == once


PROSE = (
    "".join(
        f"Paragraph {n}: the slot keeps its `prompt` cached, so **each** turn is *cheap*; see "
        f"[the docs](https://example.org/{n}) and a line long enough to wrap in a narrow pane.\n"
        f"A soft-broken second line of paragraph {n}.\n\n"
        for n in range(30)
    )
    + "The end."
)


async def test_a_run_of_paragraphs_streamed_looks_the_same_at_any_width() -> None:
    streamed, pieces = await _screen(_streamed, (100, 200), text=PROSE)
    once, _ = await _screen(_one_shot, (100, 200), text=PROSE)
    assert pieces >= 3
    assert streamed == once
    narrow_streamed, _ = await _screen(_streamed, (37, 60), home=True, text=PROSE)
    narrow_once, _ = await _screen(_one_shot, (37, 60), home=True, text=PROSE)
    assert narrow_streamed == narrow_once


async def test_line_breaks_other_than_newline_do_not_shift_the_cut() -> None:
    # markdown-it numbers lines at \n (and \r) only; str.splitlines also breaks at these
    text = ANSWER.replace("closing words of part 2.", "closing\u2028words\x0cof part 2.")
    streamed, pieces = await _screen(_streamed, (100, 260), text=text)
    once, _ = await _screen(_one_shot, (100, 260), text=text)
    assert pieces >= 3
    assert streamed == once


async def _settled(pilot: Any) -> None:
    """Wait out the parking timers of the last cuts and the layout after them: on a busy machine
    one pause can come before a late timer parks, and the height read is the frame before."""
    await pilot.pause(PARK_DELAY_S * 3)
    await pilot.pause()


async def test_parked_pieces_keep_their_height_and_come_back_when_scrolled_to() -> None:
    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        message = await _streamed(pilot, ANSWER)
        view = app.query_one(ChatView)
        await _settled(pilot)
        parked = [p for p in message.pieces if p.has_class("-parked")]
        assert parked and parked[0] is message.pieces[0]  # the top is far from the view
        height = view.virtual_size.height
        message.unpark_all()
        await _settled(pilot)
        assert view.virtual_size.height == height  # parking changed no height
        view.scroll_end(animate=False)
        await pilot.pause()
        message.park()
        assert message.pieces[0].has_class("-parked")
        view.scroll_home(animate=False)
        await pilot.pause()
        assert not message.pieces[0].has_class("-parked")  # drawn again at the top
    streamed, _ = await _screen(_streamed, (80, 24), home=True)
    once, _ = await _screen(_one_shot, (80, 24), home=True)
    assert streamed == once


async def _jumps(make: Any, text: str) -> list[Any]:
    """Screenshots after jumps to a few positions, each taken after one frame."""
    app = Host()
    shots = []
    async with app.run_test(size=(80, 24)) as pilot:
        message = await make(pilot, text)
        view = app.query_one(ChatView)
        message.park()
        top = message.virtual_region.y
        for k in (0, 3, 2, 0.2, 1):
            y = round(view.max_scroll_y * k / 3) if k else 0
            view.scroll_to(y=y, animate=False, immediate=True)
            shown = range(round(view.scroll_y), round(view.scroll_y) + view.size.height)
            row = top + message.pieces[0].virtual_region.y
            for piece in message.pieces:  # unparked at once, before any frame is drawn
                height = message._parking.height(piece)
                if row < shown.stop and row + height > shown.start:
                    assert not piece.has_class("-parked"), (y, row, height)
                row += height
            await pilot.pause()
            for piece in message.pieces:  # and after the frame, by where it was drawn
                region = piece.virtual_region.translate((0, top))
                if not piece.has_class("-parked") or not piece.display:
                    continue
                assert region.bottom <= shown.start or region.y >= shown.stop, (y, region)
            shots.append(_drawn(app.export_screenshot()))
        assert make is _one_shot or sum(p.has_class("-parked") for p in message.pieces) >= 2
    return shots


async def test_every_piece_in_view_is_drawn_after_a_jump() -> None:
    """Parking keeps only a short margin around the view: a jump anywhere must still draw
    what the same answer drawn at once shows there."""
    text = ANSWER * 2
    assert await _jumps(_streamed, text) == await _jumps(_one_shot, text)


async def test_parked_runs_keep_the_layout_short_however_long_the_answer() -> None:
    """A run of parked pieces is laid out as one widget: the displayed pieces are the ones in
    view and at most one stand-in above and one below, at any length."""
    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        message = await _streamed(pilot, ANSWER * 3)
        view = app.query_one(ChatView)
        for y in (view.max_scroll_y, view.max_scroll_y // 2, 0):
            view.scroll_to(y=y, animate=False, immediate=True)
            await pilot.pause()
            pieces = message.pieces
            displayed = [p for p in pieces if p.display]
            drawn = [p for p in displayed if not p.has_class("-parked")]
            assert len(pieces) >= 10
            assert len(displayed) - len(drawn) <= 2, (y, len(displayed), len(drawn))
            assert len(drawn) <= 4, (y, len(drawn))


async def test_scrolled_up_while_streaming_draws_what_the_one_shot_answer_shows() -> None:
    async def scrolled_up(pilot: Any, text: str) -> ChatMessage:
        view = pilot.app.query_one(ChatView)
        message = await view.add_message("assistant")
        for k, fragment in enumerate(fragments(text)):
            await message.append(fragment)
            if k == len(text) // 20:
                view.scroll_home(animate=False)  # the user reads the top while it streams
            if k % 25 == 0:
                await pilot.pause()
        await message.finish("done")
        await pilot.pause()
        assert view.scroll_y == 0
        return message

    assert await _jumps(scrolled_up, ANSWER * 2) == await _jumps(_one_shot, ANSWER * 2)


async def test_a_long_history_above_a_new_answer_is_parked() -> None:
    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(ChatView)
        old = await view.add_message("assistant", ANSWER)  # drawn at once, as history is
        await _streamed(pilot, "A new answer.\n\n" * 30)
        for _ in range(40):  # parking follows the stream by a timer: a loaded box is late
            if old.pieces[0].has_class("-parked"):
                break
            await pilot.pause(0.05)
        assert old.pieces[0].has_class("-parked")  # the whole old answer is far above
        view.scroll_home(animate=False)
        await pilot.pause()
        assert not old.pieces[0].has_class("-parked")


async def test_a_narrower_view_redraws_parked_pieces_at_their_new_height() -> None:
    app = Host()
    async with app.run_test(size=(100, 24)) as pilot:
        message = await _streamed(pilot, ANSWER)
        await pilot.resize_terminal(50, 24)
        await pilot.pause()
        await pilot.pause()
        view = app.query_one(ChatView)
        height = view.virtual_size.height
        message.unpark_all()
        assert any(p.has_class("-parked") for p in message.pieces) is False
        await pilot.pause()  # every piece drawn, then the far ones parked again
        assert view.virtual_size.height == height  # no stale height from the wider view


async def test_frozen_pieces_are_never_written_again(monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[tuple[Markdown, bool]] = []
    original = Markdown.append

    def append(self: Markdown, markdown: str) -> Any:
        writes.append((self, len(self.query_children(".pin")) > 0))
        return original(self, markdown)

    monkeypatch.setattr(Markdown, "append", append)
    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        message = await _streamed(pilot, ANSWER)
        pieces = message.pieces
        assert len(pieces) >= 3
        assert writes and not [w for w, frozen in writes if frozen]
        assert {w for w, _ in writes} == set(pieces)  # each piece was live once, then frozen
        assert all(len(p.query_children(".pin")) == 1 for p in pieces[:-1])
        assert len(pieces[-1].query_children(".pin")) == 0


async def test_a_link_definition_makes_the_answer_one_document() -> None:
    text = ANSWER + "\n\nSee [the guide][g].\n\n[g]: https://example.org/guide\n"
    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        message = await _streamed(pilot, text)
        assert len(message.pieces) == 1
        assert message.pieces[0].source == text


async def test_the_view_freezes_the_heap_while_mounted_and_hands_it_back() -> None:
    assert gc.get_freeze_count() == 0
    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        assert gc.get_freeze_count() > 0  # what lived at mount is out of the full passes
        await _streamed(pilot, ANSWER)
        frozen = gc.get_freeze_count()
        await app.query_one(ChatView).clear_messages()
        assert 0 < gc.get_freeze_count() < frozen  # the removed messages were handed back
    assert gc.get_freeze_count() == 0
    heap.settle()  # no view: nothing is frozen
    assert gc.get_freeze_count() == 0
