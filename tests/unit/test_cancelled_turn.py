"""A first turn cut short (Esc) before its answer ended: the slot it was sent to still holds its
prompt and the part of the answer read so far, so the session is pinned there and its next turn
goes back to it, instead of being placed again as a brand-new session (an empty slot, the whole
prompt read again: seen in tmux, 0 of 856 tokens cached)."""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path

from fusion_tui.paths import AppPaths
from fusion_tui.server.types import TextDelta
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.unit.local_fake import started, turn


async def test_a_cancelled_first_turn_pins_the_slot_it_was_sent_to(tmp_path: Path) -> None:
    paths = AppPaths(*(tmp_path / n for n in ("config", "data", "state", "log")))
    with FakeLlamaServer(total_slots=4) as srv:
        backend = await started(srv, paths, None)
        srv.script(Reply(text=["Once", " upon", " a", " time"] * 5, chunk_delay=0.05))
        async with aclosing(backend.reply("a long story")) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    break  # the user pressed Esc
        assert backend.session.turns[-1].outcome == "cancelled"
        await turn(backend, "thanks")
        await backend.close()
    first, second = srv.completions()
    assert first.slot is not None and first.body["id_slot"] == first.slot  # an explicit slot
    assert second.body["id_slot"] == first.slot
    assert backend.session.pinned_slot == first.slot


async def test_a_first_turn_that_got_nothing_pins_nothing(tmp_path: Path) -> None:
    paths = AppPaths(*(tmp_path / n for n in ("config", "data", "state", "log")))
    with FakeLlamaServer(total_slots=4) as srv:
        backend = await started(srv, paths, None)
        srv.script(Reply(queue_seconds=5.0))  # no data at all before the cancel
        async with aclosing(backend.reply("a long story")) as events:
            async for _event in events:
                break
        assert backend.session.pinned_slot is None
        await backend.close()
