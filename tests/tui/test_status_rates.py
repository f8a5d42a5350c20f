"""The status line's speed follows recent turns; the start-up probe's figure is only the start."""

from __future__ import annotations

from textual.app import App, ComposeResult

from fusion_tui.server.types import Timings
from fusion_tui.status import ServerStatus
from fusion_tui.tui.widgets.status_line import StatusLine


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield StatusLine()


def _turn(rate: float, n: int = 64) -> Timings:
    return Timings(predicted_n=n, predicted_ms=n / rate * 1000, predicted_per_second=rate)


async def test_the_rate_of_recent_turns_replaces_the_probe() -> None:
    async with _Host().run_test(size=(160, 5)) as pilot:
        line = pilot.app.query_one(StatusLine)
        line.server = ServerStatus("ready", "M", 2, 512, tok_s=0.6)
        await pilot.pause()
        assert "~0.6 tok/s single stream" in line.render()
        for rate in (23.9, 25.0, 22.0):
            line.turn_finished(_turn(rate), f"slot 0 · {rate} tok/s")
        line.turn_finished(_turn(900.0, n=1), "slot 0 · one token")  # no rate from one token
        await pilot.pause()
        text = line.render()
        assert "~24 tok/s recent turns" in text and "single stream" not in text
        assert text.endswith("slot 0 · one token")
