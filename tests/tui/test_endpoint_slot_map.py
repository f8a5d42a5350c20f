"""Pilot tests of `EndpointSlotMap`: slots grouped under one header per endpoint with
its label, model, measured tok/s and health; a row of this session's endpoint can be picked, a
row of another endpoint cannot open a session of this one; the status line names the endpoint."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import OptionList, Static

from fusion_tui.endpoints.slot_groups import EndpointSlots, header_text
from fusion_tui.status import ServerStatus
from fusion_tui.tui.widgets.endpoint_slot_map import EndpointSlotMap
from fusion_tui.tui.widgets.slot_map import SlotMap
from fusion_tui.tui.widgets.status_line import StatusLine
from tests.tui.test_slot_map import slot

HERE = EndpointSlots(
    "here", True, "SmolLM2-135M-Instruct", 41.0,
    (slot(0, cached=1200), slot(1, processing=True, task=3, decoded=12, cached=300)),
    {0: "Fix the parser bug", 1: "side"}, current=True,
)  # fmt: skip
GPU = EndpointSlots(
    "gpu-box", True, "SmolLM2-135M-Instruct", 120.0,
    (slot(0, processing=True, task=7, processed=200, cached=200), slot(1)),
)  # fmt: skip
GONE = EndpointSlots("gpu-box", False, error="connection refused")


class Host(App[None]):
    AUTO_FOCUS = None
    CSS = """
    #body { height: 1fr; }
    #chat-column { width: 1fr; }
    #chat { height: 1fr; padding: 1 2; }
    """

    def __init__(self, *answers: list[EndpointSlots]) -> None:
        super().__init__()
        self.answers = list(answers)
        self.calls = 0
        self.picked: list[int] = []
        times = iter([100.0, 102.0, 104.0])

        async def groups() -> list[EndpointSlots]:
            self.calls += 1
            return self.answers[min(self.calls, len(self.answers)) - 1]

        self.slot_map = EndpointSlotMap(
            groups, lambda: {}, poll_interval=None, clock=lambda: next(times, 0.0), id="slots"
        )

    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            with Vertical(id="chat-column"):
                yield Static("(the chat goes here)", id="chat")
            yield self.slot_map
        status = StatusLine(id="status")
        status.server = ServerStatus(state="ready", model="SmolLM2-135M-Instruct", slots=2)
        status.endpoint = "here"
        status.last_turn = "slot 0 · 1,100 of 1,200 prompt tokens cached"
        yield status

    def on_slot_map_slot_selected(self, event: SlotMap.SlotSelected) -> None:
        self.picked.append(event.slot_id)


def texts(app: Host) -> list[str]:
    listing = app.slot_map.query_one("#slot-list", OptionList)
    return [str(listing.get_option_at_index(i).prompt) for i in range(listing.option_count)]


def test_header_text_names_label_model_speed_and_health() -> None:
    assert header_text(HERE) == "◆ here · ok · 1/2 busy · 41 tok/s\n  SmolLM2-135M-Instruct"
    assert header_text(GONE) == "  gpu-box · down: connection refused"


async def test_slots_are_grouped_under_their_endpoint() -> None:
    app = Host([HERE, GPU])
    async with app.run_test(size=(160, 40)) as pilot:
        await app.slot_map.refresh_now()
        await pilot.pause()
        lines = texts(app)
        assert len(lines) == 6
        assert lines[0].startswith("◆ here ·") and lines[3].startswith("  gpu-box ·")
        assert "Fix the parser bug" in lines[1] and "side" in lines[2]
        assert "—" in lines[4] and "prompt" in lines[4]  # another client's work, no owner
        head = str(app.slot_map.query_one("#slot-head", Static).render())
        assert head == "Slots · 2/4 busy"
        status = str(app.query_one(StatusLine).render())
        assert status.startswith("here · ")


async def test_an_endpoint_that_goes_down_shows_it_and_its_slots_go() -> None:
    app = Host([HERE, GPU], [HERE, GONE])
    async with app.run_test(size=(160, 40)) as pilot:
        await app.slot_map.refresh_now()
        await app.slot_map.refresh_now()
        await pilot.pause()
        lines = texts(app)
        assert len(lines) == 4 and lines[3] == "  gpu-box · down: connection refused"


async def test_only_rows_of_this_sessions_endpoint_open_a_session() -> None:
    app = Host([HERE, GPU])
    async with app.run_test(size=(160, 40)) as pilot:
        await app.slot_map.refresh_now()
        await pilot.pause()
        listing = app.slot_map.query_one("#slot-list", OptionList)
        listing.focus()
        for index in (1, 4):
            listing.highlighted = index
            await pilot.press("enter")
            await pilot.pause()
        assert app.picked == [0]


async def test_narrow_terminals_get_one_line_naming_the_endpoints() -> None:
    app = Host([HERE, GONE])
    async with app.run_test(size=(80, 24)) as pilot:
        await app.slot_map.refresh_now()
        await pilot.pause()
        line = str(app.slot_map.query_one("#slot-summary", Static).render())
        assert line.startswith("here │ gpu-box down · slots 1/2 busy")
