"""Parking cases found in review: several scroll events in one frame, a taller view, a scroll
right after a cut."""

from __future__ import annotations

from typing import Any

import pytest

from fusion_tui.tui.widgets.chat_message import ChatMessage
from fusion_tui.tui.widgets.chat_view import ChatView
from tests.tui.test_chat_stream import ANSWER, Host, _drawn, _one_shot, _streamed, fragments


async def _page_down(make: Any, text: str) -> list[Any]:
    """Read from the top, paging down 23 rows at a time (PageDown), two key presses per frame."""
    app = Host()
    shots = []
    async with app.run_test(size=(80, 24)) as pilot:
        message = await make(pilot, text)
        view = app.query_one(ChatView)
        view.scroll_home(animate=False, immediate=True)
        await pilot.pause()
        message.park()
        await pilot.pause()
        for _ in range(6):
            for _ in range(2):  # two presses before the next frame is laid out
                view.scroll_to(y=view.scroll_y + 23, animate=False, immediate=True)
            await pilot.pause()
            shots.append((view.scroll_y, _drawn(app.export_screenshot())[0]))
    return shots


async def test_paging_down_twice_a_frame_draws_what_the_one_shot_answer_shows() -> None:
    text = ANSWER * 2
    streamed = await _page_down(_streamed, text)
    once = await _page_down(_one_shot, text)
    for (y, rows), (y1, rows1) in zip(streamed, once, strict=True):
        assert (y, rows) == (y1, rows1)


async def _home_then_end(make: Any, text: str) -> tuple[int, Any]:
    """Home and End before one frame is drawn; then a jump to the middle."""
    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        message = await make(pilot, text)
        view = app.query_one(ChatView)
        message.park()
        await pilot.pause()
        view.scroll_home(animate=False, immediate=True)
        view.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        await pilot.pause()
        height = view.virtual_size.height
        view.scroll_to(y=view.max_scroll_y // 2, animate=False, immediate=True)
        await pilot.pause()
        return height, _drawn(app.export_screenshot())[0]


async def test_a_head_shown_and_parked_again_in_one_frame_keeps_its_own_height() -> None:
    text = ANSWER * 2
    streamed_height, streamed = await _home_then_end(_streamed, text)
    once_height, once = await _home_then_end(_one_shot, text)
    assert streamed_height == once_height  # no blank rows added to the answer
    assert streamed == once


async def _taller(make: Any, text: str) -> Any:
    """Scrolled to the middle, the terminal grows taller (same width)."""
    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        message = await make(pilot, text)
        view = app.query_one(ChatView)
        message.park()
        await pilot.pause()
        view.scroll_to(y=view.max_scroll_y // 2, animate=False, immediate=True)
        await pilot.pause()
        await pilot.resize_terminal(80, 60)
        await pilot.pause()
        await pilot.pause()
        return view.scroll_y, _drawn(app.export_screenshot())[0]


async def test_a_taller_view_draws_the_pieces_it_now_shows() -> None:
    """Only a width change used to re-park."""
    text = ANSWER * 2
    assert await _taller(_streamed, text) == await _taller(_one_shot, text)


class WheelAfterCut:
    """While `reading`, every cut is followed at once by a wheel event, before the next layout."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reading = False
        original = ChatMessage._cut

        async def cut(message: ChatMessage) -> bool:
            due = await original(message)
            view = message.parent
            if self.reading and isinstance(view, ChatView):
                view.scroll_to(y=1 - round(view.scroll_y), animate=False, immediate=True)
            return due

        monkeypatch.setattr(ChatMessage, "_cut", cut)


async def _finished_height(pilot: Any, message: ChatMessage) -> int:
    """The view's content height once `message` is finished, drawn and parked, from the top."""
    view = pilot.app.query_one(ChatView)
    await message.finish("done")
    await pilot.pause(0.3)
    view.scroll_home(animate=False, immediate=True)
    await pilot.pause()
    return view.virtual_size.height


async def test_a_scroll_right_after_a_cut_records_the_frozen_piece_at_its_height(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The user reads the top while it streams and a wheel event lands between a cut and the
    next layout: the piece just frozen must not be parked at its last laid-out height (before
    the latest batch), which left the answer too short until scrolled over."""
    wheel = WheelAfterCut(monkeypatch)
    text = ANSWER * 2
    heights = []
    for stream in (True, False):
        app = Host()
        async with app.run_test(size=(80, 24)) as pilot:
            view = app.query_one(ChatView)
            message = await view.add_message("assistant", "" if stream else text)
            for k, fragment in enumerate(fragments(text) if stream else []):
                await message.append(fragment)
                if k == len(text) // 20:
                    view.scroll_home(animate=False)
                    wheel.reading = True
                if k % 25 == 0:
                    await pilot.pause()
            wheel.reading = False
            heights.append(await _finished_height(pilot, message))
    assert heights[0] == heights[1]


async def test_a_narrower_view_parks_again_without_a_scroll() -> None:
    """After a width change every piece is drawn again; the far ones must be parked again
    once laid out at the new width, without waiting for the user to scroll."""
    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        message = await _streamed(pilot, ANSWER * 3)
        await pilot.pause(0.3)
        pieces = message.pieces
        assert sum(p.has_class("-parked") for p in pieces) >= len(pieces) - 3
        await pilot.resize_terminal(60, 24)
        await pilot.pause()
        await pilot.pause(0.3)
        displayed = [p for p in message.pieces if p.display]
        assert len(displayed) <= 4, (len(displayed), len(pieces))


async def test_an_answer_restarted_then_streamed_records_its_first_cut_at_its_height(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An answer sent again (restart) is drawn anew with an empty live piece, settled while it
    is still streamed into; its first cut must still be parked at its height after that cut,
    not before the latest batch (the answer ended too short until scrolled over)."""
    wheel = WheelAfterCut(monkeypatch)
    text = ANSWER * 2
    results = []
    for stream in (True, False):
        app = Host()
        async with app.run_test(size=(80, 24)) as pilot:
            view = app.query_one(ChatView)
            old = await view.add_message("assistant", ANSWER)  # the answer the user reads
            await old.finish("done")
            message = await view.add_message("assistant", "" if stream else text)
            if stream:
                for k, fragment in enumerate(fragments(ANSWER[:1500])):
                    await message.append(fragment)
                    if k % 25 == 0:
                        await pilot.pause()
                await pilot.pause()
                view.scroll_home(animate=False, immediate=True)
                await pilot.pause()
                await message.restart()  # the server sends the answer again
                await pilot.pause()
                wheel.reading = True
                for k, fragment in enumerate(fragments(text)):
                    await message.append(fragment)
                    if k % 25 == 0:
                        await pilot.pause()
                wheel.reading = False
            height = await _finished_height(pilot, message)
            view.scroll_to(y=view.max_scroll_y, animate=False, immediate=True)
            await pilot.pause()
            results.append((height, _drawn(app.export_screenshot())[0]))
    assert results[0][0] == results[1][0]
    assert results[0][1] == results[1][1]
