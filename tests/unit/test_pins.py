"""Pin policy: pins, pool resize, server change, the side-call reservation (pure)."""

from __future__ import annotations

import pytest

from fusion_tui.slots.pins import UNPINNED, PoolChange, SlotPool


def pool(total: int = 4) -> SlotPool:
    p = SlotPool()
    assert p.update(total, "/m/a.gguf", "launch-1") is PoolChange.FIRST
    return p


def test_first_request_is_unpinned_then_uses_the_final_events_slot() -> None:
    p = pool()
    assert p.slot_for("s1") == UNPINNED
    assert p.pin("s1", 2) is None
    assert p.slot_for("s1") == 2
    assert p.slot_for("s1") == 2  # every later request, retries included


def test_pin_outside_the_pool_is_dropped_never_wrapped() -> None:
    p = pool(4)
    p.pin("s1", 1)
    p.pin("s1", 4)  # llama-server would silently serve slot 0
    assert p.slot_for("s1") == UNPINNED
    p.pin("s2", -2)
    assert p.slot_for("s2") == UNPINNED
    assert p.pins == {}


def test_resize_clears_every_pin() -> None:
    p = pool(4)
    p.pin("s1", 3)
    p.pin("s2", 0)
    assert p.update(4, "/m/a.gguf", "launch-1") is PoolChange.NONE
    assert p.slot_for("s1") == 3
    assert p.update(2, "/m/a.gguf", "launch-1") is PoolChange.RESIZED
    assert p.total_slots == 2
    assert p.slot_for("s1") == UNPINNED and p.slot_for("s2") == UNPINNED
    p.pin("s1", 1)
    assert p.update(8, "/m/a.gguf", "launch-1") is PoolChange.RESIZED  # growing clears too
    assert p.slot_for("s1") == UNPINNED


@pytest.mark.parametrize(
    ("model", "launch"), [("/m/b.gguf", "launch-1"), ("/m/a.gguf", "launch-2"), ("/m/a.gguf", None)]
)
def test_server_change_clears_pins(model: str, launch: str | None) -> None:
    p = pool(4)
    p.pin("s1", 1)
    assert p.update(4, model, launch) is PoolChange.SERVER_CHANGED
    assert p.slot_for("s1") == UNPINNED


def test_a_slot_taken_by_another_session_unpins_the_old_owner() -> None:
    p = pool(4)
    p.pin("s1", 3)
    assert p.pin("s2", 3) == "s1"  # the server put s2's prompt over s1's cache
    assert p.slot_for("s1") == UNPINNED
    assert p.slot_for("s2") == 3
    assert p.owner_of(3) == "s2"
    assert p.pin("s2", 3) is None  # re-pinning the same slot displaces nobody


def test_side_call_slot_is_minus_one_in_a_one_slot_pool() -> None:
    p = pool(1)
    assert p.side_call_slot() == UNPINNED
    assert SlotPool().side_call_slot() == UNPINNED  # pool unknown yet


def test_side_call_prefers_a_slot_no_session_is_pinned_to() -> None:
    p = pool(4)
    p.pin("s1", 0)
    p.pin("s2", 1)
    side = p.side_call_slot()
    assert side in (2, 3)
    assert side not in p.pins.values()
    assert p.side_call_slot() == side  # sticks to the same reserved slot while it is free


def test_side_call_skips_a_busy_free_slot_when_another_free_slot_exists() -> None:
    p = pool(4)
    p.pin("s1", 0)
    first = p.side_call_slot()
    second = p.side_call_slot(busy=[first])
    assert second not in (0, first)


def test_side_call_waits_on_a_busy_free_slot_rather_than_evict_a_session() -> None:
    p = pool(2)
    p.pin("s1", 0)
    assert p.side_call_slot(busy=[1]) == 1


def test_side_call_with_every_slot_pinned_takes_the_least_recently_used_session() -> None:
    p = pool(2)
    p.pin("s1", 0)
    p.pin("s2", 1)
    p.slot_for("s1")  # s1 was used last, s2 longest ago
    assert p.side_call_slot(avoid=[0]) == 1
    p.slot_for("s2")
    assert p.side_call_slot() == 0
    assert p.side_call_slot(avoid=[0]) == 1  # the caller's own slot is avoided


def test_side_slot_reservation_follows_pins() -> None:
    p = pool(3)
    side = p.side_call_slot()
    p.pin("s9", side)  # a new session's -1 request landed on the side slot
    assert p.side_call_slot() != side


def test_update_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="total_slots"):
        SlotPool().update(0, "/m", None)
