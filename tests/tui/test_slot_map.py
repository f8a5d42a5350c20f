"""Pilot tests of `SlotMap` with a fake `slots_fn`, hosted like the main screen hosts it."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static

from fusion_tui.server.errors import ServerUnreachable, SlotsUnavailable
from fusion_tui.server.types import SlotState
from fusion_tui.tui.widgets.slot_map import UNAVAILABLE_TEXT, PollStatus, SlotMap, SlotsFn


def slot(
    id: int,
    *,
    processing: bool = False,
    task: int = -1,
    cached: int = 0,
    processed: int = 0,
    reused: int = 0,
    decoded: int = 0,
    n_ctx: int = 4096,
) -> SlotState:
    """A `/slots` entry with the fields the map reads."""
    return SlotState(
        id=id,
        n_ctx=n_ctx,
        is_processing=processing,
        id_task=task,
        n_prompt_tokens=cached,
        n_prompt_tokens_processed=processed,
        n_prompt_tokens_cache=reused,
        n_decoded=decoded,
    )


class Answers:
    """A fake `slots_fn`: answers each poll with the next scripted list (the last one repeats)."""

    def __init__(self, *answers: list[SlotState] | BaseException) -> None:
        self.answers = list(answers)
        self.calls = 0

    async def __call__(self) -> list[SlotState]:
        self.calls += 1
        answer = self.answers[min(self.calls, len(self.answers)) - 1]
        if isinstance(answer, BaseException):
            raise answer
        return answer


class SlotMapHost(App[None]):
    """Chat column on the left, the slot map on the right, a status line under both."""

    AUTO_FOCUS = None  # like the main screen, where the prompt box has the focus

    CSS = """
    #body { height: 1fr; }
    #chat-column { width: 1fr; }
    #chat { height: 1fr; padding: 1 2; }
    #status { height: 1; background: $panel; padding: 0 1; }
    """

    def __init__(
        self,
        slots_fn: SlotsFn,
        owners: Mapping[int, str] | None = None,
        totals: Mapping[int, int] | None = None,
        *,
        poll_interval: float | None = None,
        deadline: float = 3.0,
        clock_times: list[float] | None = None,
    ) -> None:
        super().__init__()
        self.owners = dict(owners or {})
        self.totals = dict(totals or {})
        times = iter(clock_times or [])
        self.slot_map = SlotMap(
            slots_fn,
            lambda: self.owners,
            prompt_totals_fn=lambda: self.totals,
            poll_interval=poll_interval,
            deadline=deadline,
            clock=lambda: next(times, 0.0),
            id="slots",
        )

    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            with Vertical(id="chat-column"):
                yield Static("(the chat goes here)", id="chat")
            yield self.slot_map
        yield Static("ready · test model", id="status")


# --- tests ---------------------------------------------------------------------------------

IDLE = [slot(0, cached=1200), slot(1), slot(2), slot(3, cached=40)]


def _head(app: SlotMapHost) -> str:
    return str(app.slot_map.query_one("#slot-head", Static).render())


def _row_text(app: SlotMapHost, index: int) -> str:
    options = app.slot_map.query_one("#slot-list", OptionList)
    return str(options.get_option_at_index(index).prompt)


async def test_idle_slots_are_listed_with_their_cache() -> None:
    app = SlotMapHost(Answers(IDLE))
    async with app.run_test(size=(160, 48)) as pilot:
        await app.slot_map.refresh_now()
        await pilot.pause()
        rows = app.slot_map.rows
        assert [r.reading.id for r in rows] == [0, 1, 2, 3]
        assert all(r.reading.phase == "idle" for r in rows)
        assert app.slot_map.status == PollStatus("ok")
        assert _head(app) == "Slots · 0/4 busy"
        assert "idle" in _row_text(app, 0) and "1,200/4,096" in _row_text(app, 0)
        assert app.slot_map.query_one("#slot-list", OptionList).option_count == 4


async def test_prompt_progress_and_live_rates_come_from_successive_polls() -> None:
    first = [slot(0, processing=True, task=3, processed=512, reused=1000, cached=1536)]
    first.append(slot(1, processing=True, task=4, decoded=10, cached=300))
    second = [slot(0, processing=True, task=3, processed=1536, reused=1000, cached=2560)]
    second.append(slot(1, processing=True, task=4, decoded=30, cached=320))
    app = SlotMapHost(Answers(first, second), totals={0: 4000}, clock_times=[100.0, 102.0])
    async with app.run_test(size=(160, 48)) as pilot:
        await app.slot_map.refresh_now()
        await app.slot_map.refresh_now()
        await pilot.pause()
        reading, decoding = (r.reading for r in app.slot_map.rows)
        assert (reading.phase, reading.prompt_done, reading.prompt_total) == ("prompt", 2536, 4000)
        assert reading.tokens_per_second == 512.0
        assert (decoding.phase, decoding.decoded, decoding.tokens_per_second) == (
            "decode",
            30,
            10.0,
        )
        assert "2,536/4,000" in _row_text(app, 0) and "512 tok/s" in _row_text(app, 0)
        assert "30 tok" in _row_text(app, 1) and "10.0 tok/s" in _row_text(app, 1)
        assert _head(app) == "Slots · 2/2 busy"


async def test_owners_show_the_session_title_and_the_side_slot() -> None:
    owners = {0: "Refactor the tokenizer", 3: "side"}
    app = SlotMapHost(Answers(IDLE), owners)
    async with app.run_test(size=(160, 48)) as pilot:
        await app.slot_map.refresh_now()
        await pilot.pause()
        assert [r.owner for r in app.slot_map.rows] == ["Refactor the tokenizer", "", "", "side"]
        assert "Refactor the tokenizer" in _row_text(app, 0)
        assert "side" in _row_text(app, 3)
        assert "—" in _row_text(app, 1)
        app.owners[1] = "New session"  # a pin made between polls shows at the next poll
        await app.slot_map.refresh_now()
        assert app.slot_map.rows[1].owner == "New session"


async def test_slots_disabled_gives_one_line_of_explanation() -> None:
    off = SlotsUnavailable(501, "This server does not support slots endpoint.")
    app = SlotMapHost(Answers(IDLE, off))
    async with app.run_test(size=(160, 48)) as pilot:
        await app.slot_map.refresh_now()
        await app.slot_map.refresh_now()
        await pilot.pause()
        assert app.slot_map.status.kind == "unavailable"
        assert app.slot_map.rows == ()
        assert _head(app) == UNAVAILABLE_TEXT
        assert "--slots" in UNAVAILABLE_TEXT and "\n" not in UNAVAILABLE_TEXT
        assert not app.slot_map.query_one("#slot-list").display


async def test_a_hanging_poll_shows_busy_after_the_deadline_and_keeps_the_last_map() -> None:
    class Hang:
        calls = 0

        async def __call__(self) -> list[SlotState]:
            self.calls += 1
            if self.calls == 1:
                return IDLE
            await asyncio.Event().wait()  # never answers
            raise AssertionError("unreachable")

    app = SlotMapHost(Hang(), deadline=0.02)
    async with app.run_test(size=(160, 48)) as pilot:
        await app.slot_map.refresh_now()
        await app.slot_map.refresh_now()
        await pilot.pause()
        assert app.slot_map.status.kind == "busy"
        assert len(app.slot_map.rows) == 4  # the last answered map stays
        assert _head(app).startswith("Slots · 0/4 busy · busy: no answer within 0.02 s")
        assert app.slot_map.has_class("-busy") and not app.slot_map.has_class("-error")


async def test_other_errors_are_shown_compactly_and_the_next_poll_recovers() -> None:
    down = ServerUnreachable("cannot reach llama-server at http://127.0.0.1:1: refused\nmore")
    app = SlotMapHost(Answers(down, IDLE))
    async with app.run_test(size=(160, 48)) as pilot:
        await app.slot_map.refresh_now()
        await pilot.pause()
        assert app.slot_map.status == PollStatus(
            "error", "cannot reach llama-server at http://127.0.0.1:1: refused"
        )
        assert app.slot_map.has_class("-error")
        await app.slot_map.refresh_now()
        assert app.slot_map.status.kind == "ok" and not app.slot_map.has_class("-error")


def _selected(seen: list[Message]) -> list[SlotMap.SlotSelected]:
    """Each message once (the hook sees it again at every node it bubbles through)."""
    unique = {id(m): m for m in seen if isinstance(m, SlotMap.SlotSelected)}
    return list(unique.values())


async def test_selecting_a_slot_posts_slot_selected() -> None:
    seen: list[Message] = []
    app = SlotMapHost(Answers(IDLE), {1: "Sessions screen"})
    async with app.run_test(size=(160, 48), message_hook=seen.append) as pilot:
        await app.slot_map.refresh_now()
        await pilot.pause()
        app.slot_map.query_one("#slot-list").focus()
        await pilot.press("down", "enter")
        await pilot.pause()
        picked = _selected(seen)
        assert [(m.slot_id, m.owner, m.control) for m in picked] == [
            (1, "Sessions screen", app.slot_map)
        ]
        await pilot.click("#slot-list", offset=(4, 6))  # slot 3: rows are two lines when idle
        await pilot.pause()
        picked = _selected(seen)
        assert len(picked) == 2 and picked[-1].slot_id == 3


async def test_a_narrow_terminal_collapses_the_map_to_one_line() -> None:
    busy = [slot(0, processing=True, task=1, processed=100, cached=100), slot(1)]
    app = SlotMapHost(Answers(busy), {0: "Tests"}, {0: 400})
    async with app.run_test(size=(80, 24)) as pilot:
        await app.slot_map.refresh_now()
        await pilot.pause()
        assert app.slot_map.narrow and app.slot_map.size.height == 1
        assert app.slot_map.query_one("#slot-summary").display
        summary = str(app.slot_map.query_one("#slot-summary", Static).render())
        assert summary == "slots 1/2 busy │ #0 Tests prompt 25% │ 1 idle"
        await pilot.resize_terminal(120, 30)
        await pilot.pause()
        assert not app.slot_map.narrow
        assert app.slot_map.outer_size.width == 46 and app.slot_map.size.height > 1


async def test_the_timer_polls_while_visible_and_pauses_under_a_modal() -> None:
    answers = Answers(IDLE)
    app = SlotMapHost(answers, poll_interval=0.01)
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(200):
            await pilot.pause(0.01)
            if answers.calls >= 2:
                break
        assert answers.calls >= 2 and not app.slot_map.is_polling_paused
        assert app.slot_map.status.kind == "ok"
        await app.push_screen(ModalScreen())
        await pilot.pause()
        assert app.slot_map.is_polling_paused
        calls = answers.calls
        await pilot.pause(0.05)
        assert answers.calls == calls  # no poll while the screen is suspended
        app.pop_screen()
        await pilot.pause()
        assert not app.slot_map.is_polling_paused
        app.slot_map.display = False
        await pilot.pause()
        assert app.slot_map.is_polling_paused


async def test_the_timer_never_cancels_a_slow_poll_so_busy_is_reached() -> None:
    async def hang() -> list[SlotState]:
        await asyncio.Event().wait()
        return []

    app = SlotMapHost(hang, poll_interval=0.005, deadline=0.03)
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(300):
            await pilot.pause(0.01)
            if app.slot_map.status.kind == "busy":
                break
        assert app.slot_map.status.kind == "busy"


async def test_polling_disabled_means_no_timer() -> None:
    answers = Answers(IDLE)
    app = SlotMapHost(answers)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause(0.05)
        assert answers.calls == 0 and app.slot_map.is_polling_paused
        app.slot_map.feed(IDLE, at=1.0)
        assert len(app.slot_map.rows) == 4
